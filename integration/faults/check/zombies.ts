import type { CheckContext } from './context.js';
import { tokenValue, type Hold, type Write } from './model.js';

export interface ZombieWrite {
  process: string;
  writeId: string;
  resource: string;
  name: string;
  token: string;
  invokeAt: number;
  /** The newer grant that had superseded the writer's hold when it wrote. */
  supersededBy: { process: string; token: string; at: number };
  outcome: 'rejected' | 'prevented' | 'accepted' | 'landed-first' | 'other';
}

export interface ZombieStats {
  attempted: number;
  /** The resource refused the stale token. */
  rejected: number;
  /** The SDK refused because the hold was already lost. */
  prevented: number;
  /**
   * Landed after the resource had accepted a larger token for the name: fencing failed to stop
   * it (must be 0 when fencing is on; each is also an S1 violation).
   */
  accepted: number;
  /**
   * Landed before any larger token reached the resource: the resource could not yet know the
   * writer was superseded, and its next writer's larger token still wins. Safe, counted apart.
   */
  landedFirst: number;
  /** Timed out, unknown outcome or other errors. */
  other: number;
  writes: ZombieWrite[];
}

/**
 * A zombie write is one invoked after its writer's hold was superseded on the server: some
 * process had already been granted a larger token for the same name. Cron runs are left out:
 * every fire has its own claim, so a later fire does not supersede an earlier one.
 */
export function findZombies(context: CheckContext): ZombieStats {
  const grants = new Map<string, Hold[]>();
  for (const hold of context.model.holds) {
    const key = `${hold.kind}\u0000${hold.name}`;
    let list = grants.get(key);
    if (!list) grants.set(key, (list = []));
    list.push(hold);
  }
  for (const list of grants.values()) list.sort((a, b) => a.start - b.start);

  const stats: ZombieStats = {
    attempted: 0,
    rejected: 0,
    prevented: 0,
    accepted: 0,
    landedFirst: 0,
    other: 0,
    writes: [],
  };
  for (const write of context.model.writes) {
    if (write.workload === 'cron') continue;
    const kind = write.workload === 'election' ? 'term' : 'lock';
    const newer = supersededBy(grants.get(`${kind}\u0000${write.name}`) ?? [], write);
    if (!newer) continue;
    const outcome =
      write.outcome === 'stale'
        ? 'rejected'
        : write.outcome === 'lost'
          ? 'prevented'
          : write.outcome === 'ok'
            ? landedAfterLarger(context, write)
              ? 'accepted'
              : 'landed-first'
            : 'other';
    stats.attempted++;
    if (outcome === 'landed-first') stats.landedFirst++;
    else stats[outcome]++;
    stats.writes.push({
      process: write.process,
      writeId: write.writeId,
      resource: write.resource,
      name: write.name,
      token: write.token,
      invokeAt: write.invokeAt,
      supersededBy: { process: newer.process, token: newer.token, at: newer.start },
      outcome,
    });
  }
  return stats;
}

function supersededBy(holds: Hold[], write: Write): Hold | undefined {
  const token = tokenValue(write.token);
  for (const hold of holds) {
    if (hold.start >= write.invokeAt) break;
    if (tokenValue(hold.token) > token) return hold;
  }
  return undefined;
}

/** Whether the resource's log holds a larger token for the write's name before the write itself. */
function landedAfterLarger(context: CheckContext, write: Write): boolean {
  // Commit order is seq order, whatever order the log arrived in.
  const log = [...(context.logs[write.resource] ?? [])].sort(
    (a, b) => Number(a.seq) - Number(b.seq),
  );
  const at = log.findIndex((entry) => entry.writeId === write.writeId);
  // An acknowledged write missing from the log is S3's to report; count it as landed late.
  const before = at === -1 ? log : log.slice(0, at);
  const token = tokenValue(write.token);
  return before.some((entry) => entry.name === write.name && tokenValue(entry.token) > token);
}
