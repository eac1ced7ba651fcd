import { logViolation, logsByName, workloadOf, type CheckContext } from './context.js';
import { tokenValue } from './model.js';
import type { LogEntry, Rule, Violation } from './types.js';

/**
 * S1: per resource and name, the accepted tokens never decrease in commit order. A decrease
 * means a writer whose hold had been superseded got a write in after its successor's.
 */
export function checkMonotonic(context: CheckContext): Violation[] {
  return monotonic(context, 'S1', (entry) => workloadOf(context, entry) !== 'election');
}

export function monotonic(
  context: CheckContext,
  rule: Rule,
  include: (entry: LogEntry) => boolean,
): Violation[] {
  const violations: Violation[] = [];
  for (const { resource, name, entries } of logsByName(context.logs, include)) {
    let highest: LogEntry | undefined;
    for (const entry of entries) {
      if (highest && tokenValue(entry.token) < tokenValue(highest.token)) {
        violations.push(
          logViolation(
            context,
            rule,
            entry,
            resource,
            `${resource} accepted token ${entry.token} for "${name}" (write ${entry.writeId} by ` +
              `${entry.process}, seq ${entry.seq}) after token ${highest.token} (write ` +
              `${highest.writeId} by ${highest.process}, seq ${highest.seq})`,
          ),
        );
      } else {
        highest = entry;
      }
    }
  }
  return violations;
}
