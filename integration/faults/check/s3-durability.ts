import type { CheckContext } from './context.js';
import type { LogEntry, Violation } from './types.js';

/**
 * S3: every acknowledged write is in its resource's log exactly once with the token it was sent
 * with, and every write the resource rejected (`stale`) or the SDK refused (`lost`) is absent.
 * Writes with an unknown outcome (`info`) may be either.
 */
export function checkDurability(context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  const logged = new Map<string, Map<string, LogEntry[]>>();
  for (const [resource, entries] of Object.entries(context.logs)) {
    const byId = new Map<string, LogEntry[]>();
    for (const entry of entries) {
      let list = byId.get(entry.writeId);
      if (!list) byId.set(entry.writeId, (list = []));
      list.push(entry);
    }
    logged.set(resource, byId);
    for (const [writeId, list] of byId) {
      const first = list[0];
      if (list.length > 1 && first) {
        violations.push({
          rule: 'S3',
          message: `${resource} logged write ${writeId} ${list.length} times (seq ${list.map((e) => e.seq).join(', ')})`,
          process: first.process,
          token: first.token,
          resource,
        });
      }
    }
  }
  for (const write of context.model.writes) {
    const entries = logged.get(write.resource)?.get(write.writeId) ?? [];
    const base = {
      rule: 'S3' as const,
      at: write.doneAt ?? write.invokeAt,
      process: write.process,
      token: write.token,
      resource: write.resource,
    };
    if (write.outcome === 'ok') {
      const entry = entries[0];
      if (!entry) {
        violations.push({
          ...base,
          message: `acknowledged write ${write.writeId} (token ${write.token}, "${write.name}") is missing from the ${write.resource} log`,
        });
      } else if (entry.token !== write.token || entry.process !== write.process) {
        violations.push({
          ...base,
          message: `write ${write.writeId} was sent by ${write.process} with token ${write.token} but ${write.resource} logged it as ${entry.process} with token ${entry.token}`,
        });
      }
    } else if ((write.outcome === 'stale' || write.outcome === 'lost') && entries.length > 0) {
      violations.push({
        ...base,
        message: `write ${write.writeId} (token ${write.token}) failed as "${write.outcome}" yet is in the ${write.resource} log (seq ${entries.map((e) => e.seq).join(', ')})`,
      });
    }
  }
  return violations;
}
