/**
 * Telling a late loss signal the SDK caused from one the machine caused. Workers measure their
 * own event-loop lag (a 20 ms ticker's worst lateness over the last 2 s) and put it on each `lost`
 * line. A signal late by no more than the timer tolerance plus that lag came as early as the
 * process was allowed to run: no timer of that process, the SDK's included, could have run
 * sooner. Such S5 violations are set apart (and reported) instead of failing a run on a loaded
 * machine; a late signal the lag does not explain still fails it.
 */
import type { HistoryLine, Violation } from './check/index.js';

/**
 * The most event-loop lag that excuses a late signal. Lag beyond this on a test machine is a
 * broken run, not a reason to pass one: the signal must then come within tolerance + this.
 */
export const MAX_EXCUSED_LAG_MS = 1_500;

export interface Excused {
  violation: Violation;
  latenessMs: number;
  loopLagMs: number;
}

type Line = HistoryLine & { loopLagMs?: number };

export function excuseLateSignals(
  violations: readonly Violation[],
  history: readonly HistoryLine[],
  toleranceMs: number,
): { unexcused: Violation[]; excused: Excused[] } {
  const unexcused: Violation[] = [];
  const excused: Excused[] = [];
  for (const violation of violations) {
    // Only a late signal can be the machine's doing; two processes believing at once, or a hold
    // used past its deadline without a signal, never are.
    const late =
      violation.rule === 'S5' && violation.kind === 'late-signal'
        ? lateness(violation, history)
        : undefined;
    if (late && late.latenessMs <= toleranceMs + Math.min(late.loopLagMs, MAX_EXCUSED_LAG_MS)) {
      excused.push({ violation, ...late });
    } else {
      unexcused.push(violation);
    }
  }
  return { unexcused, excused };
}

/** For a late-signal violation: how late the `lost` line came, and the lag it reported. */
function lateness(
  violation: Violation,
  history: readonly HistoryLine[],
): { latenessMs: number; loopLagMs: number } | undefined {
  const mine = (history as Line[])
    .filter((l) => l.process === violation.process && l.token === violation.token)
    .sort((a, b) => a.at - b.at);
  const lost = mine.find((l) => l.op === 'lost');
  if (lost?.loopLagMs === undefined) return undefined;
  const deadlines = mine.filter((l) => l.deadlineAt !== undefined && l.at <= lost.at);
  const deadline = deadlines[deadlines.length - 1]?.deadlineAt;
  if (deadline === undefined) return undefined;
  return { latenessMs: lost.at - deadline, loopLagMs: lost.loopLagMs };
}
