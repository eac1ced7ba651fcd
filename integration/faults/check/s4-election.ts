import { workloadOf, type CheckContext } from './context.js';
import { monotonic } from './s1-monotonic.js';
import { singleWriter } from './s2-single-writer.js';
import type { Violation } from './types.js';

/** S4: the leader writes of the election workload obey S1 and S2 with election tokens. */
export function checkElectionWrites(context: CheckContext): Violation[] {
  const include = (entry: Parameters<typeof workloadOf>[1]): boolean =>
    workloadOf(context, entry) === 'election';
  return [...monotonic(context, 'S4', include), ...singleWriter(context, 'S4', include)];
}
