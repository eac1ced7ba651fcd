import {
  deletionOf,
  frozenStretches,
  newsReaches,
  uncovered,
  type CheckContext,
} from './context.js';
import type { Hold } from './model.js';
import type { Violation } from './types.js';

/**
 * S6: mutual exclusion of beliefs, in every run. No two processes believe they hold the same lock
 * (or lead the same election) at once. A belief runs from the grant to the loss signal, a read
 * that says lost, or the release (resign); it is excused only while its process is frozen, from
 * the freeze's start to the first read after it.
 *
 * The next holder is granted only once etcd deleted the earlier holder's key, which happens
 * after the earlier holder's local deadline (etcd never expires a lease early), or by a
 * deletion the earlier holder hears of on its watch. So the earlier belief may outlast the later
 * grant only until the earlier process could run again (its loop, and the runner's, whose
 * proxies carry the watch, may have been blocked: measured lag), plus a resolution for each of
 * the two and how overdue the earlier one's ticker was when it signalled, and, after a deletion
 * fault, that deletion's measured round trip.
 */
export function checkExclusion(context: CheckContext): Violation[] {
  const groups = new Map<string, Hold[]>();
  for (const hold of context.model.holds) {
    if (hold.kind === 'cron') continue; // each fire is its own belief: S7
    const key = `${hold.kind}\u0000${hold.name}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(hold);
  }
  const violations: Violation[] = [];
  for (const holds of groups.values()) {
    holds.sort((a, b) => a.start - b.start);
    for (const [i, later] of holds.entries()) {
      for (const earlier of holds.slice(0, i)) {
        if (earlier.process === later.process || earlier.end <= later.start) continue;
        const until = Math.min(earlier.end, later.end);
        const excused = [...frozenStretches(context, earlier), ...frozenStretches(context, later)];
        const overlapMs = uncovered(later.start, until, excused);
        const allowed = allowance(context, earlier, later.start);
        if (overlapMs <= allowed) continue;
        violations.push({
          rule: 'S6',
          kind: later.kind,
          at: later.start,
          process: earlier.process,
          token: earlier.token,
          message:
            `${earlier.process} (token ${earlier.token}) and ${later.process} (token ${later.token}) ` +
            `both believed they held ${later.kind} "${later.name}" for ${Math.round(overlapMs)} ms ` +
            `(allowed ${Math.round(allowed)} ms: until the runner and ${earlier.process} could run + ${context.resolutionMs} ms for each, + its ticker's lag then` +
            `${deletionOf(context, earlier) ? ', after the deletion’s round trip' : ''})`,
        });
      }
    }
  }
  return violations;
}

function allowance(context: CheckContext, earlier: Hold, from: number): number {
  const deletion = deletionOf(context, earlier);
  const news = Math.max(from, deletion ? deletion.ackAt + deletion.rttMs : from);
  const due = newsReaches(context, earlier.process, news);
  return due - from + (earlier.lost?.lagNow ?? 0) + context.resolutionMs;
}
