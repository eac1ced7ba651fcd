/**
 * Read/write locks on the lock queue: readers share, a writer is exclusive, FIFO between them.
 *
 * The lock `name` is the queue `<lockPrefix><name>%rw/` (never the lock `name`'s queue: encoded
 * names hold no raw `%`). A reader's key is `r.<lease hex>.<n>`, a writer's `w.<lease hex>.<n>`, so
 * every read of the queue tells them apart from key names alone. A reader waits for every older
 * key that is not a reader's (a key of another shape counts as a writer); a writer waits for
 * every older key. So a reader queued behind a writer waits for it, and a writer is never starved
 * by readers that came after it. Tokens are the keys' create revisions: a writer's fences like a
 * lock's; a reader's is larger than every writer's before it and smaller than every one after.
 *
 * Go's experimental `recipes.RWMutex` (keys `<pfx>/read/…`, `<pfx>/write/…`) is a different key
 * scheme: the two do not exclude each other.
 */
import { acquireQueued, type Queued } from './acquire.js';
import { LockTakenError } from './errors.js';
import { Lock, type AcquireOptions, type LockMaker, type TryAcquireOptions } from './mutex.js';
import { encodeName } from './options.js';

export type LockMode = 'read' | 'write';

/** The mode of a read/write lock key (`…/r.<lease hex>.<n>`, `…/w.…`); `undefined` for another. */
export function modeOf(key: string): LockMode | undefined {
  const match = /^([rw])\.[0-9a-f]+\.\d+$/.exec(key.slice(key.lastIndexOf('/') + 1));
  return match ? (match[1] === 'r' ? 'read' : 'write') : undefined;
}

function describe(name: string, mode: LockMode): Queued<Lock> {
  const segment = `${encodeName(name)}%rw`;
  return {
    name,
    segment,
    tag: mode === 'read' ? 'r' : 'w',
    what: `read/write lock ${JSON.stringify(name)} (for ${mode === 'read' ? 'reading' : 'writing'})`,
    // Readers pass older readers; everything else waits for every older key.
    admission:
      mode === 'read' ? { capacity: 1, blocks: (key) => modeOf(key) !== 'read' } : { capacity: 1 },
    taken: (holder) =>
      new LockTakenError(
        name,
        holder?.key.toString() ?? '',
        BigInt(holder?.create_revision ?? 0),
        holder?.value.toString() ?? '',
        `read/write lock ${JSON.stringify(name)} (for ${mode === 'read' ? 'reading' : 'writing'})`,
      ),
    hold: (entry) => Promise.resolve(Lock.held(entry, name)),
  };
}

/** Waits for the read/write lock `name` in `mode` (FIFO) and returns it held. */
export function acquireMode(
  maker: LockMaker,
  name: string,
  mode: LockMode,
  options: AcquireOptions,
): Promise<Lock> {
  return acquireQueued(maker, 'rwlock', name, options, true, [], () => describe(name, mode));
}

/** Takes the read/write lock `name` in `mode` only if it is free for it now (`LockTakenError`). */
export function tryAcquireMode(
  maker: LockMaker,
  name: string,
  mode: LockMode,
  options: TryAcquireOptions,
): Promise<Lock> {
  return acquireQueued(maker, 'rwlock', name, options, false, [], () => describe(name, mode));
}
