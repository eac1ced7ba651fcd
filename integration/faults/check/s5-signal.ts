import { deletionOf, newsReaches, type CheckContext } from './context.js';
import { deadlineAt, rttAt, tokenValue, type Hold } from './model.js';
import type { Violation } from './types.js';

/**
 * S5: the SDK tells a holder of its loss in time, judged on the session's raw local deadline
 * (`deadlineAtMs`, which keeps its value once lost) as each worker recorded it:
 *
 * - `held-after-deadline`: a read of the hold (`isHeld`) that began after the deadline said it was
 *   still held. A read compares the clock with the deadline itself, so no lag excuses it.
 * - `late-signal`: the loss signal came later than the first moment after the deadline that the
 *   process could run a timer (+ the lag's resolution): a SIGSTOP or a blocked loop shows up as
 *   measured lag, and the signal is due as soon as the process runs again, not a moment later.
 * - `unsignalled`: the hold was used (a write sent, a release) later than that, with no signal.
 * - `late-deletion-signal`: the key was deleted or the lease revoked on the server (a fault, timed
 *   by the nemesis), and the holder still believed after the acknowledgement + one round trip of
 *   its own to etcd (as it measured it then), once the runner (its proxies) and the holder could
 *   run (+ a resolution for each of the two: both relay the news, and a stall just under two
 *   ticks leaves a ticker less than a period late, so no lag line shows it).
 * - `believed-after-deletion`: the same for any deletion of the hold's key etcd made while the
 *   holder still believed (the observer's watch: a lease that expired, a stray delete), timed by
 *   when the runner heard of it. A holder cut off from etcd meets it through its own deadline,
 *   which comes first (etcd never expires a lease early).
 */
export function checkSignals(context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  for (const hold of context.model.holds) {
    violations.push(...heldAfterDeadline(hold), ...deadlineSignal(context, hold));
    const deletion = deletionSignal(context, hold) ?? serverDeletion(context, hold);
    if (deletion) violations.push(deletion);
  }
  return violations;
}

const what = (hold: Hold): string =>
  `${hold.process}'s ${hold.kind === 'term' ? 'term' : hold.kind === 'cron' ? 'cron run' : 'lock'} "${hold.name}" (token ${hold.token})`;

function heldAfterDeadline(hold: Hold): Violation[] {
  const late = hold.checks.find(
    (c) => c.held && c.deadlineAt !== undefined && c.readAt > c.deadlineAt,
  );
  if (!late || late.deadlineAt === undefined) return [];
  return [
    {
      rule: 'S5',
      kind: 'held-after-deadline',
      at: late.readAt,
      process: hold.process,
      token: hold.token,
      message: `a read of ${what(hold)} said "held" ${Math.round(late.readAt - late.deadlineAt)} ms after its local deadline`,
    },
  ];
}

function deadlineSignal(context: CheckContext, hold: Hold): Violation[] {
  const base = { rule: 'S5' as const, process: hold.process, token: hold.token };
  // Due as soon as the process could run after the deadline; allowed until one resolution later.
  const allowance = (deadline: number, lagNow = 0) =>
    context.freeAfter(hold.process, deadline) - deadline + lagNow + context.resolutionMs;
  if (hold.lost && hold.lostAt !== undefined) {
    const deadline = hold.lost.deadlineAt ?? deadlineAt(hold, hold.lostAt);
    if (deadline === undefined || hold.lostAt <= deadline) return [];
    const late = hold.lostAt - deadline;
    const allowed = allowance(deadline, hold.lost.lagNow);
    if (late <= allowed) return [];
    return [
      {
        ...base,
        kind: 'late-signal',
        at: hold.lostAt,
        message: `${what(hold)} was signalled lost ${Math.round(late)} ms after its local deadline (allowed ${Math.round(allowed)} ms: until the process could run + ${context.resolutionMs} ms)`,
      },
    ];
  }
  // No signal: the hold must not have been used past its deadline (writes carry their deadline).
  const acts = context.model.writes
    .filter((w) => w.process === hold.process && w.token === hold.token)
    .filter((w) => w.invokeAt > hold.start && w.invokeAt <= hold.end)
    .map((w) => ({ at: w.invokeAt, deadline: w.deadlineAt ?? deadlineAt(hold, w.invokeAt) }));
  if (hold.endReason === 'release')
    acts.push({ at: hold.end, deadline: deadlineAt(hold, hold.end) });
  for (const act of acts) {
    if (act.deadline === undefined || act.at <= act.deadline) continue;
    const allowed = allowance(act.deadline);
    if (act.at - act.deadline <= allowed) continue;
    return [
      {
        ...base,
        kind: 'unsignalled',
        at: act.at,
        message: `${what(hold)} was still in use ${Math.round(act.at - act.deadline)} ms after its local deadline with no loss signal (allowed ${Math.round(allowed)} ms: until the process could run + ${context.resolutionMs} ms)`,
      },
    ];
  }
  return [];
}

function deletionSignal(context: CheckContext, hold: Hold): Violation | undefined {
  const deletion = deletionOf(context, hold);
  if (!deletion || hold.end < deletion.fault.start) return undefined;
  const { ackAt, rttMs } = deletion;
  const by = newsReaches(context, hold.process, ackAt + rttMs) + context.resolutionMs;
  if (hold.end <= by) return undefined;
  const how = hold.endReason === 'end-of-history' ? 'never learned of it' : `learned of it only`;
  return {
    rule: 'S5',
    kind: 'late-deletion-signal',
    at: by,
    process: hold.process,
    token: hold.token,
    message: `${deletion.fault.fault} ${deletion.fault.id} removed the key of ${what(hold)}; it ${how} ${Math.round(hold.end - ackAt)} ms after the deletion was acknowledged (allowed ${Math.round(by - ackAt)} ms: its round trip of ${Math.round(rttMs)} ms, then until the runner and it could run, + ${context.resolutionMs} ms for each)`,
  };
}

function serverDeletion(context: CheckContext, hold: Hold): Violation | undefined {
  if (hold.key === undefined || deletionOf(context, hold)) return undefined;
  // The key is reused by its session's later holds: only a delete after this hold's creation
  // (a larger revision than its token) is of this hold's key.
  const token = tokenValue(hold.token);
  const deletedAt = context.model.deletes.get(hold.key)?.find((d) => d.revision > token)?.at;
  if (deletedAt === undefined || deletedAt >= hold.end) return undefined;
  const rttMs = rttAt(context.model, hold.process, deletedAt);
  const by = newsReaches(context, hold.process, deletedAt + rttMs) + context.resolutionMs;
  if (hold.end <= by) return undefined;
  return {
    rule: 'S5',
    kind: 'believed-after-deletion',
    at: by,
    process: hold.process,
    token: hold.token,
    message: `etcd deleted the key of ${what(hold)} (${hold.key}); it still believed ${Math.round(hold.end - deletedAt)} ms after the runner heard of it (allowed ${Math.round(by - deletedAt)} ms: its round trip of ${Math.round(rttMs)} ms, then until the runner and it could run, + ${context.resolutionMs} ms for each)`,
  };
}
