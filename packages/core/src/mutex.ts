/**
 * The lock algorithm: etcd's Go `concurrency.Mutex`, key for key, with its known flaws fixed.
 *
 * Each contender puts `<prefix><name>/<lease id hex>` with its session's lease. The key with the
 * lowest create revision holds the lock; every other contender watches only the key created
 * just before its own (FIFO, no thundering herd). The holder's create revision is its token.
 */
import type { IRangeRequest, IRangeResponse } from 'etcd3';
import type { Leasehold } from './client.js';
import { LockLostError, LockTakenError, LockTimeoutError, isLeaseholdError } from './errors.js';
import type { EtcdTransport } from './etcd.js';
import type { KeyWatch } from './key-watch.js';
import { LocalQueue } from './local-queue.js';
import { Lock, type AcquireOptions } from './lock.js';
import { encodeName, prefixEnd } from './names.js';
import { validateDurationMs, validateSignal } from './options.js';
import { assertSession, type Session } from './session.js';
import { raceSignal, timeoutSignal } from './wait.js';

const queues = new WeakMap<Session, LocalQueue>();
const localHolders = new WeakMap<Session, Map<string, Lock>>();
const RETRY_WAIT_MS = 200;
/** A waiter re-reads its predecessor at least this often, whatever the watch says. */
const RECHECK_WAIT_MS = 5_000;

export async function acquireLock(
  client: Leasehold,
  name: string,
  options: AcquireOptions,
  wait: boolean,
): Promise<Lock> {
  const segment = encodeName(name);
  const timeoutMs =
    options.timeoutMs === undefined
      ? undefined
      : validateDurationMs('timeoutMs', options.timeoutMs);
  const userSignal = validateSignal(options.signal);
  userSignal?.throwIfAborted();
  client.assertUsable();
  const session = options.session ? assertSession(options.session) : await client.sharedSession();
  session.throwIfLost();

  using timeout =
    timeoutMs === undefined
      ? undefined
      : timeoutSignal(timeoutMs, () => new LockTimeoutError(name, timeoutMs));
  const signal = AbortSignal.any(
    [session.signal, userSignal, timeout?.signal].filter((s): s is AbortSignal => s !== undefined),
  );

  let queue = queues.get(session);
  if (!queue) queues.set(session, (queue = new LocalQueue()));
  let holders = localHolders.get(session);
  if (!holders) localHolders.set(session, (holders = new Map<string, Lock>()));
  if (!wait && queue.busy(name)) {
    const holder = holders.get(name);
    throw new LockTakenError(name, holder?.key ?? '(this session, acquiring)', holder?.token ?? 0n);
  }
  const exitLocal = await queue.enter(name, signal);
  try {
    const lock = await contend(client, session, name, segment, wait, signal, () => {
      holders.delete(name);
      exitLocal();
    });
    holders.set(name, lock);
    return lock;
  } catch (err) {
    exitLocal();
    throw err;
  }
}

async function contend(
  client: Leasehold,
  session: Session,
  name: string,
  segment: string,
  wait: boolean,
  signal: AbortSignal,
  exitLocal: () => void,
): Promise<Lock> {
  const transport = client.transport;
  const prefix = Buffer.from(`${client.lockPrefix}${segment}/`);
  const keyText = `${client.lockPrefix}${segment}/${session.leaseId.toString(16)}`;
  const key = Buffer.from(keyText);
  const range = { key: prefix, range_end: prefixEnd(prefix) };
  const firstCreated: IRangeRequest = {
    ...range,
    sort_order: 'Ascend',
    sort_target: 'Create',
    limit: 1,
  };

  // One round trip. If the key exists already, this is a retry of our own put whose answer was
  // lost: adopt the key rather than queue behind ourselves. That makes the txn safe to retry.
  const res = await transport.call(
    'lock acquire',
    (o) =>
      transport.client.kv.txn(
        {
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: '0' }],
          success: [
            { request_put: { key, value: Buffer.alloc(0), lease: session.leaseId.toString() } },
            { request_range: firstCreated },
          ],
          failure: [{ request_range: { key } }, { request_range: firstCreated }],
        },
        o,
      ),
    { idempotent: true },
  );
  const myRevision = res.succeeded
    ? BigInt(res.header.revision)
    : BigInt(res.responses[0]?.response_range.kvs[0]?.create_revision ?? '0');
  const owner = res.responses[1]?.response_range.kvs[0];
  const ownerRevision = owner ? BigInt(owner.create_revision) : myRevision;

  const deleteOwnKey = () =>
    transport
      .call(
        'lock withdraw',
        (o) =>
          transport.client.kv.txn(
            {
              compare: [
                { key, target: 'Create', result: 'Equal', create_revision: myRevision.toString() },
              ],
              success: [{ request_delete_range: { key } }],
              failure: [],
            },
            o,
          ),
        { idempotent: true },
      )
      .catch(() => undefined); // the lease's expiry removes it otherwise

  // `seenAt`: the revision at which the key was last read as ours; it must not change after.
  const held = (seenAt: string) =>
    Lock.held(
      transport,
      session,
      name,
      keyText,
      myRevision,
      BigInt(seenAt),
      client.keyWatch,
      exitLocal,
    );

  if (ownerRevision === myRevision) return held(res.header.revision);
  if (!wait) {
    await deleteOwnKey();
    throw new LockTakenError(name, owner!.key.toString(), ownerRevision);
  }
  try {
    await waitForPredecessors(transport, client.keyWatch, range, myRevision, signal);
    // The lease may have expired while queued, deleting our key; never report a false success.
    const check = await transport.call('lock check', (o) => transport.client.kv.range({ key }, o), {
      idempotent: true,
    });
    const mine = check.kvs[0];
    if (!mine || BigInt(mine.create_revision) !== myRevision) {
      throw new LockLostError(
        'expired-in-queue',
        keyText,
        myRevision,
        `lock ${keyText} (token ${myRevision}) vanished while waiting: the session's lease expired or the key was deleted`,
      );
    }
    signal.throwIfAborted();
    return held(check.header.revision);
  } catch (err) {
    await deleteOwnKey();
    throw err;
  }
}

/** Waits until no key under the lock created before `myRevision` is left. */
async function waitForPredecessors(
  transport: EtcdTransport,
  keyWatch: KeyWatch,
  range: { key: Buffer; range_end: Buffer },
  myRevision: bigint,
  signal: AbortSignal,
): Promise<void> {
  for (;;) {
    signal.throwIfAborted();
    let res: IRangeResponse;
    try {
      res = await raceSignal(
        transport.call(
          'lock wait',
          (o) =>
            transport.client.kv.range(
              {
                ...range,
                sort_order: 'Descend',
                sort_target: 'Create',
                limit: 1,
                max_create_revision: (myRevision - 1n).toString(),
              },
              o,
            ),
          { idempotent: true },
        ),
        signal,
      );
    } catch (err) {
      if (signal.aborted || !isTransient(err)) throw err;
      await raceSignal(delay(RETRY_WAIT_MS), signal);
      continue;
    }
    const predecessor = res.kvs[0];
    if (!predecessor) return;
    await waitForDelete(
      keyWatch,
      predecessor.key.toString(),
      BigInt(res.header.revision) + 1n,
      signal,
    );
  }
}

/**
 * Resolves when `key` is deleted at or after `fromRevision`, or when the shared watch may have
 * missed events (the caller re-reads). Rejects on abort. Also resolves after a while regardless,
 * so that a watch that silently stopped delivering can only slow a waiter down, never strand it.
 */
async function waitForDelete(
  keyWatch: KeyWatch,
  key: string,
  fromRevision: bigint,
  signal: AbortSignal,
): Promise<void> {
  let registration: Disposable | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const done = new Promise<void>((resolve) => {
      registration = keyWatch.register(key, fromRevision, {
        changed: (kind) => kind === 'delete' && resolve(),
        unsure: () => resolve(),
      });
      timer = setTimeout(resolve, RECHECK_WAIT_MS);
      timer.unref();
    });
    await raceSignal(done, signal);
  } finally {
    clearTimeout(timer);
    registration?.[Symbol.dispose]();
  }
}

function isTransient(err: unknown): boolean {
  return isLeaseholdError(err) && err.code === 'ETCD_UNAVAILABLE';
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
