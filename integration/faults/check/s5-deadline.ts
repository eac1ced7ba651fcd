import type { CheckContext } from './context.js';
import { deadlineAt, type Hold } from './model.js';
import type { Violation } from './types.js';

/** Faults that freeze a worker: its timers cannot fire, so lateness and overlap are expected. */
const FREEZING_FAULTS = new Set(['pause-holder', 'stall-loop']);

/**
 * S5: a holder learns of its loss no later than its local deadline (plus the timer tolerance),
 * and, in runs without pause or stall faults, no two processes believe they hold the same
 * name at the same time.
 */
export function checkDeadlines(context: CheckContext): Violation[] {
  return [...lateSignals(context), ...beliefOverlaps(context)];
}

function frozen(context: CheckContext, hold: Hold): boolean {
  if (hold.paused) return true;
  return context.model.faults.some(
    (f) =>
      FREEZING_FAULTS.has(f.fault) &&
      f.target === hold.process &&
      f.start <= hold.end &&
      (f.end ?? context.model.endAt) >= hold.start,
  );
}

function lateSignals(context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  const { toleranceMs } = context;
  for (const hold of context.model.holds) {
    if (frozen(context, hold)) continue;
    const what = `${hold.process}'s ${hold.kind} "${hold.name}" (token ${hold.token})`;
    const base = { rule: 'S5' as const, process: hold.process, token: hold.token };
    if (hold.endReason === 'lost' && hold.lostAt !== undefined) {
      const deadline = deadlineAt(hold, hold.lostAt);
      if (deadline !== undefined && hold.lostAt > deadline + toleranceMs) {
        violations.push({
          ...base,
          kind: 'late-signal',
          at: hold.lostAt,
          message: `${what} was signalled lost ${Math.round(hold.lostAt - deadline)} ms after its local deadline (tolerance ${toleranceMs} ms)`,
        });
      }
      continue;
    }
    // No signal: the process must not have acted on the hold past its deadline.
    const deadline = hold.deadlines[hold.deadlines.length - 1]?.deadlineAt;
    if (deadline === undefined) continue;
    const limit = deadline + toleranceMs;
    const acts: number[] = context.model.writes
      .filter(
        (w) =>
          w.process === hold.process &&
          w.token === hold.token &&
          w.invokeAt > hold.start &&
          w.invokeAt <= hold.end,
      )
      .map((w) => w.invokeAt);
    if (hold.endReason === 'release') acts.push(hold.end);
    const late = acts.find((at) => at > limit);
    if (late !== undefined) {
      violations.push({
        ...base,
        kind: 'unsignalled',
        at: late,
        message: `${what} was still in use ${Math.round(late - deadline)} ms after its local deadline with no loss signal (tolerance ${toleranceMs} ms)`,
      });
    }
  }
  return violations;
}

function beliefOverlaps(context: CheckContext): Violation[] {
  const injected = [...context.config.faults, ...context.model.faults.map((f) => f.fault)];
  if (injected.some((fault) => FREEZING_FAULTS.has(fault))) return [];
  const groups = new Map<string, Hold[]>();
  for (const hold of context.model.holds) {
    const key = `${hold.kind}\u0000${hold.name}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(hold);
  }
  const violations: Violation[] = [];
  for (const holds of groups.values()) {
    holds.sort((a, b) => a.start - b.start);
    let active: Hold[] = [];
    for (const hold of holds) {
      active = active.filter((a) => a.end > hold.start);
      for (const earlier of active) {
        if (earlier.process === hold.process) continue;
        // The later holder believed from its grant on, so the overlap is how long the earlier
        // one kept believing after that.
        const overlapMs = earlier.end - hold.start;
        if (overlapMs <= context.toleranceMs) continue;
        violations.push({
          rule: 'S5',
          kind: 'overlap',
          at: hold.start,
          process: hold.process,
          token: hold.token,
          message:
            `${earlier.process} (token ${earlier.token}) and ${hold.process} (token ${hold.token}) ` +
            `both believed they held ${hold.kind} "${hold.name}" for ${Math.round(overlapMs)} ms ` +
            `(tolerance ${context.toleranceMs} ms)`,
        });
      }
      active.push(hold);
    }
  }
  return violations;
}
