import { logViolation, logsByName, workloadOf, type CheckContext } from './context.js';
import type { LogEntry, Rule, Violation } from './types.js';

/**
 * S2: per resource and name, one writer (process) per token, and each token's writes are
 * contiguous in the log: once another token's write lands, the earlier token never writes again.
 */
export function checkSingleWriter(context: CheckContext): Violation[] {
  return singleWriter(context, 'S2', (entry) => workloadOf(context, entry) !== 'election');
}

export function singleWriter(
  context: CheckContext,
  rule: Rule,
  include: (entry: LogEntry) => boolean,
): Violation[] {
  const violations: Violation[] = [];
  const report = (entry: LogEntry, resource: string, message: string): void => {
    violations.push(logViolation(context, rule, entry, resource, message));
  };
  for (const { resource, name, entries } of logsByName(context.logs, include)) {
    const writerOf = new Map<string, string>();
    const finished = new Set<string>();
    let current: LogEntry | undefined;
    for (const entry of entries) {
      const writer = writerOf.get(entry.token);
      if (writer === undefined) writerOf.set(entry.token, entry.process);
      else if (writer !== entry.process) {
        report(
          entry,
          resource,
          `${resource} "${name}": token ${entry.token} written by ${entry.process} (write ` +
            `${entry.writeId}, seq ${entry.seq}) and by ${writer}`,
        );
      }
      if (current && current.token !== entry.token) {
        finished.add(current.token);
        if (finished.has(entry.token)) {
          report(
            entry,
            resource,
            `${resource} "${name}": token ${entry.token} wrote again (write ${entry.writeId}, ` +
              `seq ${entry.seq}) after token ${current.token}'s write ${current.writeId} ` +
              `(seq ${current.seq}): its writes are not contiguous`,
          );
        }
      }
      current = entry;
    }
  }
  return violations;
}
