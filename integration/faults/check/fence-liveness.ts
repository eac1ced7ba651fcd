import type { CheckContext } from './context.js';
import { tokenValue } from './model.js';
import type { Violation } from './types.js';

/**
 * Liveness of the fence: a write a resource rejected as stale must have met a larger token that
 * the resource had accepted for the same name: its log (in commit order, atomic with the fence)
 * holds an entry with a larger token whose write was sent before the rejection came back. A
 * rejection without one refused a current holder: the fence is too strict (`<=` for `<`).
 */
export function checkFenceLiveness(context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  for (const write of context.model.writes) {
    if (write.outcome !== 'stale') continue;
    const token = tokenValue(write.token);
    const doneAt = write.doneAt ?? context.model.endAt;
    const larger = (context.logs[write.resource] ?? []).some((entry) => {
      if (entry.name !== write.name || tokenValue(entry.token) <= token) return false;
      const sent = context.writesById.get(entry.writeId)?.invokeAt;
      return sent === undefined || sent <= doneAt;
    });
    if (larger) continue;
    violations.push({
      rule: 'liveness',
      kind: 'fence',
      at: doneAt,
      process: write.process,
      token: write.token,
      resource: write.resource,
      message: `${write.resource} rejected ${write.process}'s write ${write.writeId} (token ${write.token}, "${write.name}") as stale, yet had accepted no larger token for "${write.name}" by then: a current holder's write was refused`,
    });
  }
  return violations;
}
