/**
 * The one primitive under locks and elections, as in etcd's Go `concurrency` package: a queue is
 * the keys `<prefix><segment>/<lease id hex>`, ordered by create revision; the first holds. Every
 * txn on a queue key lives here: join, wait, withdraw, release and guarded writes.
 *
 * A waiter learns it is first from the watch alone: the join txn reads the keys created before
 * its own, and an etcd watch is ordered and gap-free from its start revision, so once it has seen
 * each of them deleted it is first — no read after the event, and no thundering herd (waiters
 * only count deletes). Its own key's delete or overwrite comes on the same ordered stream, so it
 * is never told "first" after its key vanished. When the watch may have missed events, entries
 * trust nothing until the watch's next read of the whole prefix, one read for all of them.
 *
 * Keys never outlive their reason: withdraw and release keep trying until the key is gone or the
 * session ends, and the session's local slot stays taken until then, so a later entry of the same
 * session never adopts a key (and a token) it did not create.
 */
import type { ICompare, IKeyValue, IRequestOp, ITxnResponse } from 'etcd3';
import { anySignal, raceSignal, type Clock } from './clock.js';
import type { LockLostReason } from './errors.js';
import { prefixEnd, rangeOf, readPrefix } from './keys.js';
import { tunables } from './options.js';
import { cleanUp, isEnded, type Report } from './transport/cleanup.js';
import type { Etcd } from './transport/etcd.js';
import { LossLatch } from './latch.js';
import type { Session } from './session.js';
import { Slots, type Slot } from './slots.js';
import type { Watch, WatchEvent } from './watch.js';

/** Builds the error an entry ends with; locks and elections word it their own way. */
export type LostError = (reason: LockLostReason, entry: Entry, cause?: unknown) => Error;

/** Compares `key`'s create revision to `revision` (0: the key is absent). */
export const byCreate = (key: Buffer, revision: bigint): ICompare => ({
  key,
  target: 'Create',
  result: 'Equal',
  create_revision: revision.toString(),
});
const byLease = (key: Buffer, session: Session): ICompare => ({
  key,
  target: 'Lease',
  result: 'Equal',
  lease: session.leaseId.toString(),
});
/** A key's create revision: its place in its queue and its token. */
export const revisionOf = (kv: { create_revision: string }) => BigInt(kv.create_revision);
/** Oldest first; keys one txn created (one revision) in key order. */
const byAge = (a: IKeyValue, b: IKeyValue): number => {
  const [ra, rb] = [revisionOf(a), revisionOf(b)];
  return ra !== rb ? (ra < rb ? -1 : 1) : Buffer.compare(a.key, b.key);
};
/** A join txn that neither created its key nor found it: its guard failed. */
const isRefused = (res: ITxnResponse) =>
  !res.succeeded && res.responses[0]!.response_range.kvs.length === 0;
/** The join txn's key's create revision: the txn's own revision if it created the key. */
const tokenOf = (res: ITxnResponse) =>
  res.succeeded
    ? BigInt(res.header.revision)
    : revisionOf(res.responses[0]!.response_range.kvs[0]!);

/**
 * The first-created of `kvs`, if any. Keys one txn created share a revision (only a foreign
 * writer makes them): the lower key comes first, so the answer does not depend on the order `kvs`
 * come in (a read's key order, an observer's order of events). `Queue.first()` asks etcd instead,
 * as etcdctl and Go's `Election.Leader` do; etcd's sort leaves such ties in no fixed order.
 */
export function firstOf(kvs: Iterable<IKeyValue>): IKeyValue | undefined {
  let first: IKeyValue | undefined;
  for (const kv of kvs) if (!first || byAge(kv, first) < 0) first = kv;
  return first;
}

/** A queue member: every member key has a lease (see {@link Queue}). */
export const isMember = (kv: IKeyValue): boolean => kv.lease !== '0';

/**
 * The keys of `kvs` that are members of the queue `range`. A queue is exactly the direct
 * children of its prefix: a deeper key is another queue's, whose prefix is nested in this one
 * (e.g. `electionPrefix: '/leasehold/election/a/'` beside the default prefix's election `a`).
 * And every member has a lease (leasehold's, Go's and etcdctl's all do): a key without one is
 * data someone put there, which must not block the queue for good. A range read cannot say
 * either; every read of a queue filters with this.
 */
export const membersOf = (range: string, kvs: IKeyValue[]): IKeyValue[] =>
  kvs.filter((kv) => isMember(kv) && rangeOf(kv.key.toString()) === range);

/** etcd's refusal of a put whose lease no longer exists. */
export const isLeaseNotFound = (err: unknown): boolean =>
  /requested lease not found/.test(String((err as Error | undefined)?.message));

/**
 * Which older keys an entry waits for, and how many of them may remain when it is admitted
 * (holds): a lock's or an election's entry waits for every older key, capacity 1 (it is first);
 * a semaphore's for every older key, capacity `permits`; a reader's for older writers only,
 * capacity 1. Keys only ever leave the set an entry waits for, so the watch alone admits it.
 */
export interface Admission {
  /** Admitted once fewer than this many of the keys that block it remain. */
  capacity: number;
  /** Whether the older key `key` blocks the entry. Default: every older key does. */
  blocks?: (key: string) => boolean;
  /**
   * Compares the join txn must pass to create the key (a semaphore's: no key with other
   * permits): atomic with the create, so no key ever joins past one it disagrees with.
   */
  guard?: ICompare[];
  /** The error of a join the guard refused, from the keys in the queue's range then. */
  refused?: (kvs: IKeyValue[]) => Error;
  /**
   * More reads for the join txn, asked for as it is sent (a semaphore's slot records): `seen`
   * gets their answers, the queue's keys (keys only) and the revision they were read at, before
   * the entry follows the queue.
   */
  reads?: () => IRequestOp[];
  seen?: (answers: IKeyValue[][], queue: IKeyValue[], readAt: bigint) => void;
}

export class Queue {
  /** Local turns at each key: one session's entries for one name take the key one at a time. */
  readonly #slots = new Slots();

  constructor(
    readonly etcd: Etcd,
    readonly watch: Watch,
    readonly clock: Clock,
    readonly report: Report,
    /** What the queue's keys are, for messages: `lock` or `election`. */
    readonly noun: string,
    /** This client's live session with this lease id (decimal), if any. */
    private readonly sessionOf: (leaseId: string) => Session | undefined = () => undefined,
    /**
     * The prefixes of every queue of the client (locks and elections): a user's fenced write
     * under one would put a key without a lease into some queue, blocking it for good.
     */
    readonly reserved: readonly string[] = [],
  ) {}

  /** If an entry of this client holds or waits for `key`: its token (0 while it still waits). */
  busy(key: string): bigint | undefined {
    return this.#slots.busy(key);
  }

  /** The queue of `segment` (an encoded name). */
  range(segment: string): string {
    return `${this.watch.prefix}${segment}/`;
  }

  /**
   * Puts the session's key in the queue of `segment` (once any earlier entry of this session for
   * it has left) and reads who is ahead, in one txn: create the key if absent, else adopt it (a
   * retry whose first answer was lost). Rejects with `signal.reason` as soon as the signal
   * aborts (`turnSignal`: only while waiting for this session's earlier entry to leave);
   * whatever the txn created is then removed in the background.
   */
  async join(
    segment: string,
    session: Session,
    opts: {
      value: Buffer;
      signal: AbortSignal;
      lostError: LostError;
      turnSignal?: AbortSignal;
      /** Read the holder's value too (for `LockTakenError`); otherwise `holder` has keys only. */
      withHolder?: boolean;
      /**
       * Entries of one session that may hold at once (permits, readers) need keys of their own:
       * with a tag the key is `<tag>.<lease hex>.<n>`, n the lowest no entry of this client has.
       * Without one it is `<lease hex>` (etcd's Go scheme), which the session's entries take in
       * turns.
       */
      tag?: string;
      /** Default: every older key blocks, capacity 1. */
      admission?: Admission;
    },
  ): Promise<Entry> {
    const range = this.range(segment);
    const hex = session.leaseId.toString(16);
    const tagged = opts.tag === undefined ? undefined : `${range}${opts.tag}.${hex}.`;
    const key = Buffer.from(tagged === undefined ? `${range}${hex}` : this.#free(tagged));
    const slot = this.#slots.enter(key.toString());
    try {
      if (slot.waits) {
        // Combining signals costs more than the rest of an uncontended join's local work.
        const turnSignal = opts.turnSignal ? anySignal(opts.signal, opts.turnSignal) : opts.signal;
        await raceSignal(slot.turn, turnSignal);
      } else {
        opts.signal.throwIfAborted();
      }
      session.throwIfLost();
    } catch (err) {
      slot.leave();
      throw err;
    }
    // The queue's keys (without values, which may be large), and, for a caller that reports the
    // holder, the first key with its value (a sorted range: only when asked for).
    const span = { key: Buffer.from(range), range_end: prefixEnd(range) };
    const reads: IRequestOp[] = [{ request_range: { ...span, keys_only: true } }];
    if (opts.withHolder) {
      reads.push({
        request_range: { ...span, sort_order: 'Ascend', sort_target: 'Create', limit: 1 },
      });
    }
    const own = reads.length + 1;
    reads.push(...(opts.admission?.reads?.() ?? []));
    const put = { key, value: opts.value, lease: session.leaseId.toString() };
    const sent = this.etcd.txn(
      `${this.noun} join`,
      {
        compare: [byCreate(key, 0n), ...(opts.admission?.guard ?? [])],
        success: [{ request_put: put }, ...reads],
        failure: [{ request_range: { key } }, ...reads],
      },
      { idempotent: true },
    );
    let res: ITxnResponse;
    try {
      res = await raceSignal(sent, opts.signal).catch(async (err: unknown) => {
        throw isLeaseNotFound(err) ? await session.gone(err) : err;
      });
    } catch (err) {
      // Once the txn has answered, remove what it made, guarded by its create revision (never by
      // the lease: a late duplicate would then delete this session's next key). If it never
      // answered, or was refused, it may still land later: the sweep collects that key.
      slot.idle();
      void sent.then(
        (late) =>
          isRefused(late)
            ? slot.leave()
            : this.remove('withdraw', session, key, byCreate(key, tokenOf(late)), slot),
        () => slot.leave(),
      );
      throw err;
    }
    const { capacity = 1, blocks, refused } = opts.admission ?? {};
    if (isRefused(res)) {
      // Its guard failed and nothing was created: the key is free for the next entry at once.
      slot.leave();
      const kvs = res.responses[1]!.response_range.kvs;
      throw refused ? refused(kvs) : new Error(`${this.noun} join refused by its guard`);
    }
    const token = tokenOf(res);
    const older = membersOf(range, res.responses[1]!.response_range.kvs)
      .filter((kv) => revisionOf(kv) < token)
      .sort(byAge);
    const ahead = blocks ? older.filter((kv) => blocks(kv.key.toString())) : older;
    opts.admission?.seen?.(
      res.responses.slice(own).map((r) => r.response_range.kvs),
      res.responses[1]!.response_range.kvs,
      BigInt(res.header.revision),
    );
    const adopted = res.succeeded ? undefined : res.responses[0]!.response_range.kvs[0]!;
    const value = adopted?.value ?? opts.value;
    const entry = new Entry(
      this,
      session,
      slot,
      key.toString(),
      token,
      value,
      opts.lostError,
      capacity,
    );
    // The sorted read's first key may belong to a queue nested below this one: then the holder
    // is not known with its value (the caller reads it with `first()`).
    const sorted = opts.withHolder ? res.responses[2]!.response_range.kvs[0] : ahead[0];
    const holder = sorted && membersOf(range, [sorted]).length > 0 ? sorted : undefined;
    entry.listen(ahead, BigInt(res.header.revision), {
      // Only when the entry waits: a permit admitted beside older holders took nobody's turn.
      holder: holder && revisionOf(holder) < token && ahead.length >= capacity ? holder : undefined,
      adopted,
    });
    return entry;
  }

  /** `<stem><n>` for the lowest n whose key no entry of this client holds, waits for or removes. */
  #free(stem: string): string {
    let n = 0;
    while (this.#slots.owns(`${stem}${n}`)) n++;
    return `${stem}${n}`;
  }

  /**
   * The queue of `segment` with values, oldest first, and the revision it was read at: what an
   * observer takes as the truth. Read in pages, so a large queue (or a large nested one) stays
   * within gRPC's message limit.
   */
  async candidates(segment: string): Promise<{ kvs: IKeyValue[]; readAt: bigint }> {
    const range = this.range(segment);
    const read = await readPrefix((r) => this.etcd.range(`${this.noun} observe`, r), range, {
      keysOnly: false,
      pageKeys: tunables.valuePageKeys,
    });
    return { kvs: membersOf(range, read.kvs).sort(byAge), readAt: read.readAt };
  }

  /**
   * Removes keys of this client's live sessions that no entry owns (from a read of the whole
   * prefix): a join txn that landed after its caller had given up (etcd applies a delayed request
   * however late it arrives), a key a snapshot restore brought back. Each goes through the
   * session's slot, so no entry can adopt it meanwhile.
   */
  sweep(kvs: IKeyValue[]): void {
    for (const kv of kvs) {
      const session = this.sessionOf(kv.lease);
      const key = kv.key.toString();
      const hex = session?.leaseId.toString(16);
      const name = key.slice(rangeOf(key).length);
      // A tagged key (`<tag>.<lease hex>.<n>`: a permit's, a reader's) is the lease's too.
      const named = name === hex || name.split('.')[1] === hex;
      // Keys from before this process resumed the lease are the caller's to resume or revoke.
      if (!session || !named || session.isLost || this.#slots.owns(key)) continue;
      if (revisionOf(kv) <= session.startRevision) continue;
      const slot = this.#slots.enter(key);
      void this.remove('sweep', session, kv.key, byCreate(kv.key, revisionOf(kv)), slot);
    }
  }

  /** The first key of the queue of `segment` now (the holder), if any. */
  async first(segment: string): Promise<IKeyValue | undefined> {
    const range = this.range(segment);
    const res = await this.etcd.range(`${this.noun} first`, {
      key: Buffer.from(range),
      range_end: prefixEnd(range),
      sort_order: 'Ascend',
      sort_target: 'Create',
      limit: 1,
    });
    const first = res.kvs[0];
    if (!first || membersOf(range, [first]).length > 0) return first;
    // A nested queue's key (or a key without a lease) was created first: only a read of the
    // whole range can tell which is the queue's own first key. Keys only, in pages; then its value.
    const read = await readPrefix((r) => this.etcd.range(`${this.noun} first`, r), range, {
      keysOnly: true,
      pageKeys: tunables.checkPageKeys,
    });
    const own = firstOf(membersOf(range, read.kvs));
    if (!own) return undefined;
    return (await this.etcd.range(`${this.noun} first`, { key: own.key })).kvs[0];
  }

  /**
   * Deletes `key` under `guard` until it is gone or the session ends (see `cleanUp`), then
   * leaves the slot. After a refusal the slot stays taken: this session must never adopt the
   * leftover key, and with it a token it did not create.
   */
  remove(what: string, session: Session, key: Buffer, guard: ICompare, slot: Slot): Promise<void> {
    slot.idle();
    const once = async () => {
      const request = {
        compare: [guard],
        success: [{ request_delete_range: { key } }],
        failure: [],
      };
      await this.etcd.txn(`${this.noun} ${what}`, request, { idempotent: true, once: true });
      slot.leave();
    };
    // Its keys go with the lease (revoked, or expiring) once the session has ended.
    const moot = (err?: unknown) => {
      const ended = session.isLost || isEnded(err);
      if (ended) slot.leave();
      return ended;
    };
    const label = `${this.noun} ${what} of ${key.toString()}`;
    return cleanUp(this.clock, this.report, label, once, moot);
  }
}

/**
 * Where an entry is: waiting for the keys `ahead` of it to go (trusting events alone only while
 * not `unsure`: see `Watch`), first (holding), or ended (lost, or removed by its owner; no
 * event or read moves it again).
 */
type EntryState =
  { kind: 'waiting'; ahead: Set<string>; unsure: boolean } | { kind: 'first' } | { kind: 'ended' };
const waiting = (ahead: Iterable<string>): EntryState => ({
  kind: 'waiting',
  ahead: new Set(ahead),
  unsure: false,
});

/**
 * One session's key in one queue: waiting, then first (holding), then ended. Owned by the handle
 * that made it (a lock or a campaign), which turns its end into that handle's error.
 */
export class Entry {
  /**
   * Trips once: on loss (`#lose`), or when the owner ends the hold (`end`). Reading its signal
   * checks the session's deadline first, so a passed deadline trips it on the first read.
   */
  readonly #end = new LossLatch<Error>(() => void this.session.isLost);
  /** Whether the latch tripped for a loss or because the owner ended the hold. */
  #endedBy: 'lost' | 'owner' | undefined;
  #state: EntryState = waiting([]);
  /** Events below this revision are already reflected in what the entry knows. */
  #from = 0n;
  /** Resolves the wait of `waitFirst`, made only when the entry is not first at once. */
  #becameFirst: (() => void) | undefined;
  /** The entry's subscription to its queue's events, disposed when the entry ends. */
  #subscription: Disposable | undefined;
  #removing: Promise<void> | undefined;
  /**
   * The first key of the queue when this entry joined, if not this one: with its value if the
   * join asked for it (`withHolder`), else keys only.
   */
  holder: IKeyValue | undefined;

  constructor(
    private readonly queue: Queue,
    readonly session: Session,
    private readonly slot: Slot,
    /** The etcd key of this entry. */
    readonly key: string,
    /** The key's create revision: its place in the queue and its fencing token. */
    readonly token: bigint,
    /** The key's value as the join found or wrote it. */
    readonly value: Buffer,
    private readonly lostError: LostError,
    /** Admitted once fewer than this many of the keys ahead remain (see {@link Admission}). */
    private readonly capacity = 1,
  ) {}

  #stop(): void {
    this.#subscription?.[Symbol.dispose]();
    this.#subscription = undefined;
    this.session.detach(this);
  }

  /** @internal The session ended: so does the entry (see `Session.attach`). */
  sessionEnded(error: Error): void {
    this.#lose('session', error);
  }

  /** @internal Starts following the queue from the join's read. */
  listen(
    ahead: IKeyValue[],
    readAt: bigint,
    found: { holder: IKeyValue | undefined; adopted: IKeyValue | undefined },
  ): void {
    this.holder = found.holder;
    this.#state = waiting(ahead.map((kv) => kv.key.toString()));
    this.#from = readAt + 1n;
    const sub = this.queue.watch.subscribe(rangeOf(this.key), this.#from, {
      events: (batch) => this.#events(batch),
      unsure: () => {
        if (this.#state.kind === 'waiting') this.#state.unsure = true;
      },
      read: (kvs, readAt) => this.#read(kvs, readAt),
    });
    this.#subscription = sub;
    const signal = this.session.signal;
    this.session.attach(this);
    // A replayed event may have ended it while subscribing.
    if (this.#state.kind === 'ended') this.#stop();
    if (signal.aborted) this.#lose('session', signal.reason);
    // A key named after this lease but written by someone else on another lease is not ours.
    if (found.adopted && found.adopted.lease !== this.session.leaseId.toString()) {
      this.#lose('overwritten');
    }
    this.#maybeFirst();
  }

  /** Key prefixes a fenced write must stay out of (see {@link Queue.reserved}). */
  get reserved(): readonly string[] {
    return this.queue.reserved;
  }

  /** Whether this entry is first in its queue (holds). */
  get isFirst(): boolean {
    return this.#state.kind === 'first';
  }

  /**
   * Aborts when the entry ends: with its lost error, or with the reason its owner ended it
   * (`end`). Reading it checks the session's deadline first.
   */
  get signal(): AbortSignal {
    return this.#end.signal;
  }

  /**
   * Why the entry ended, or undefined while it lasts: what its signal would say, checking the
   * session's deadline first, without making the signal.
   */
  get endReason(): Error | undefined {
    void this.session.isLost;
    return this.#end.reason;
  }

  /** Calls `listener` once if the entry is lost (not when its owner ends it). */
  onLost(listener: (error: Error) => void): Disposable {
    return this.#end.on((error) => this.#endedBy === 'lost' && listener(error));
  }

  /**
   * The owner ends the hold: the signal aborts at once with `reason()` (unless the entry ended
   * already), then the key is removed as by {@link remove}. Returns whether this call ended it.
   */
  end(what: 'release' | 'resign', reason: () => Error): boolean {
    let ended = false;
    if (!this.#end.tripped) {
      this.#endedBy = 'owner';
      ended = this.#end.trip(reason);
    }
    void this.remove(what).catch(() => undefined);
    return ended;
  }

  /**
   * Resolves once first; rejects with `signal.reason` on abort or with the entry's error if it
   * ends first. A rejected entry is withdrawn in the background.
   */
  async waitFirst(signal: AbortSignal): Promise<void> {
    try {
      // Already first (an uncontended join): nothing to wait for, no signals to combine.
      if (!this.isFirst || signal.aborted) {
        const first = new Promise<void>((resolve) => (this.#becameFirst = resolve));
        if (this.isFirst) this.#becameFirst!(); // first meanwhile
        await raceSignal(first, AbortSignal.any([signal, this.#end.signal]));
      }
      this.session.throwIfLost(); // a stalled loop may have passed the deadline meanwhile
    } catch (err) {
      void this.remove('withdraw').catch(() => undefined);
      // A waiter whose session ended reports the session's error, whichever listener ran first.
      const ended = err === this.#end.reason && this.session.isLost;
      throw ended ? (this.session.signal.reason as Error) : err;
    }
  }

  /**
   * Runs `ops` in one txn only while this entry still owns its key (same create revision, same
   * lease). Not retried: a write that timed out may have landed. If the key is no longer ours
   * the entry ends (deleted or overwritten) and this rejects with its error.
   */
  async txn(what: string, ops: IRequestOp[]): Promise<bigint> {
    this.session.throwIfLost();
    if (this.#end.reason) throw this.#end.reason;
    const key = Buffer.from(this.key);
    const compare = [byCreate(key, this.token), byLease(key, this.session)];
    const failure = [{ request_range: { key } }];
    const res = await this.queue.etcd.txn(
      what,
      { compare, success: ops, failure },
      { idempotent: false },
    );
    if (!res.succeeded) {
      this.#lose(res.responses[0]?.response_range.kvs[0] ? 'overwritten' : 'deleted');
      const reason = this.#end.reason as Error | undefined; // ended meanwhile, by #lose or not
      if (reason) throw reason;
    }
    return BigInt(res.header.revision);
  }

  /**
   * Deletes the key, guarded by its create revision, so a late or repeated call never removes a
   * newer entry's key. Idempotent. See {@link Queue.remove} for failures.
   */
  remove(what: 'release' | 'resign' | 'withdraw'): Promise<void> {
    this.#state = { kind: 'ended' };
    this.#stop();
    const key = Buffer.from(this.key);
    const guard = byCreate(key, this.token);
    return (this.#removing ??= this.queue.remove(what, this.session, key, guard, this.slot));
  }

  /** One revision's events in the queue: its own key's fate first, then the keys ahead. */
  #events(batch: readonly WatchEvent[]): void {
    if (batch[0]!.revision < this.#from || this.#state.kind === 'ended') return;
    for (const { kind, kv } of batch) {
      if (kv.key.toString() !== this.key) continue;
      if (kind === 'delete') return this.#lose(this.#gone());
      if (kv.lease !== this.session.leaseId.toString() || revisionOf(kv) !== this.token) {
        return this.#lose('overwritten');
      }
    }
    const state = this.#state;
    if (state.kind !== 'waiting') return;
    let moved = false;
    for (const { kind, kv } of batch) {
      if (kind === 'delete' && state.ahead.delete(kv.key.toString())) moved = true;
    }
    if (moved) this.#maybeFirst();
  }

  /** Why an entry whose key is gone ended: a holder's was deleted, a waiter's expired. */
  #gone(): LockLostReason {
    return this.#state.kind === 'first' ? 'deleted' : 'expired-in-queue';
  }

  #maybeFirst(): void {
    const state = this.#state;
    if (state.kind !== 'waiting' || state.unsure || state.ahead.size >= this.capacity) return;
    this.#state = { kind: 'first' };
    this.slot.held(this.token);
    this.#becameFirst?.();
  }

  /**
   * Takes a read of its queue at `readAt` as the truth (see `Watch`): its own key must be there,
   * unchanged, or it has ended; the keys ahead are those still in the read. Deletes seen since
   * the read was sent were already applied, and keys only ever leave that set, so the new set is
   * the intersection of the two. An entry that joined after the read cannot use it.
   */
  #read(kvs: IKeyValue[], readAt: bigint): void {
    const state = this.#state;
    if (state.kind === 'ended' || this.token > readAt) return;
    const mine = kvs.find((kv) => kv.key.toString() === this.key);
    if (!mine || revisionOf(mine) !== this.token) return this.#lose(this.#gone());
    if (mine.lease !== this.session.leaseId.toString()) return this.#lose('overwritten');
    if (readAt >= this.#from) this.#from = readAt + 1n;
    if (state.kind !== 'waiting') return;
    const ahead = kvs
      .filter((kv) => isMember(kv) && revisionOf(kv) < this.token)
      .map((kv) => kv.key.toString());
    this.#state = waiting(ahead.filter((k) => state.ahead.has(k)));
    this.#maybeFirst();
  }

  #lose(reason: LockLostReason, cause?: unknown): void {
    if (this.#state.kind === 'ended') return;
    this.#state = { kind: 'ended' };
    this.#endedBy ??= 'lost';
    this.#end.trip(this.lostError(reason, this, cause));
    // Deleted: nothing to remove. Overwritten: the key still blocks the queue. Session: its keys
    // go with the lease. `remove` handles all three.
    void this.remove('withdraw').catch(() => undefined);
  }
}
