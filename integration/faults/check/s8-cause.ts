import { DELETIONS, type CheckContext } from './context.js';
import type { Violation } from './types.js';

/** Losses that say the key (or the lease) vanished on the server, as the SDK reports them. */
const VANISHED = new Set(['deleted', 'overwritten', 'expired-in-queue', 'gone']);
/** Faults that take every key back to another state: a restore (and what follows it). */
const REWRITES = new Set(['snapshot-restore']);

/**
 * S8: no hold or waiter loses its key without a cause. A lock, term or queue entry whose key was
 * deleted or overwritten, or whose lease etcd says is gone, must have met a deletion fault aimed
 * at it (revoke-lease, delete-key), a restore, or its own local deadline first (its lease may then
 * have expired). Anything else is the SDK removing or misreading a key: a stale release landing
 * on a newer key, a key judged by the wrong revision.
 */
export function checkCauses(context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  const { model } = context;
  const ttlMs = context.config.ttlSeconds * 1000;
  // A deletion explains what it overlaps; a revoked lease stays gone, so it also explains every
  // later "gone" of its process's session; a restore, whatever follows it within a TTL.
  const explained = (
    process: string,
    from: number,
    to: number,
    detail: string,
    deadline?: number,
  ): boolean => {
    if (deadline !== undefined && deadline <= to) return true;
    return model.faults.some((f) => {
      const end = f.end ?? model.endAt;
      if (REWRITES.has(f.fault)) return f.start <= to && end + ttlMs >= from;
      if (!DELETIONS.has(f.fault) || f.target !== process || f.start > to) return false;
      return end >= from || (f.fault === 'revoke-lease' && detail === 'gone');
    });
  };
  for (const hold of model.holds) {
    const detail = hold.lost?.detail;
    if (!hold.lost || hold.lostAt === undefined || !detail || !VANISHED.has(detail)) continue;
    if (explained(hold.process, hold.start, hold.lostAt, detail, hold.lost.deadlineAt)) continue;
    violations.push({
      rule: 'S8',
      at: hold.lostAt,
      process: hold.process,
      token: hold.token,
      message: `${hold.process}'s ${hold.kind} "${hold.name}" (token ${hold.token}) was lost as "${detail}" with no fault that removes keys and before its local deadline`,
    });
  }
  for (const op of model.operations) {
    if (op.op !== 'acquire' && op.op !== 'campaign') continue;
    if (op.type !== 'fail' || !op.detail || !VANISHED.has(op.detail)) continue;
    const at = op.doneAt ?? op.invokeAt;
    if (explained(op.process, op.invokeAt, at, op.detail, op.deadlineAt)) continue;
    violations.push({
      rule: 'S8',
      at,
      process: op.process,
      message: `${op.process}'s ${op.op} of "${op.name}" failed as "${op.detail}" while waiting, with no fault that removes keys: its queue key vanished`,
    });
  }
  return violations;
}
