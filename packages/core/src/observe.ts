/**
 * Following an election: who leads, as a stream of states in revision order. It includes "no
 * leader" (Go's `Observe` never reports it) and every value a leader proclaims.
 *
 * The observer keeps its own copy of the election's candidates (the direct children of its
 * queue's prefix, as every queue read agrees), from one read and then the watch's ordered,
 * gap-free events, applied a revision at a time: a txn that deletes several candidates is one
 * change, so no candidate that never led is reported in between. Whenever the watch may have
 * missed events (reconnect, compaction, a subscription it cannot replay), and whenever the
 * watch's periodic read of the prefix disagrees with it about the leader, the observer reads the
 * candidates again and carries on from that read, reporting a state only if it differs from the
 * last one reported.
 */
import type { IKeyValue } from 'etcd3';
import { anySignal, sleep, type Clock } from './clock.js';
import { isClientClosedError, isEtcdUnavailableError } from './errors.js';
import { toHolder, type Holder } from './hold.js';
import { tunables, validateSignal } from './options.js';
import { firstOf, isMember, type Queue } from './queue.js';
import type { WatchEvent } from './watch.js';

/** Who leads an election as of `revision`; `leader` is undefined when no one does. */
export interface LeaderState {
  /** The leader's key, token and value; `undefined` while no one leads. */
  leader: Holder | undefined;
  /** The etcd revision at which this became the state. */
  revision: bigint;
}

/** Options of `client.observe(election, options)`. */
export interface ObserveOptions {
  /** Ends the iteration (without an error) when aborted. */
  signal?: AbortSignal;
}

const same = (a: Holder | undefined, b: Holder | undefined) =>
  a?.key === b?.key &&
  a?.token === b?.token &&
  (a === undefined || b === undefined || Buffer.from(a.valueBytes).equals(b.valueBytes));

/** A candidate as the check compares them: its key and create revision. */
const leaderId = (kv: IKeyValue | undefined) => kv && `${kv.key.toString()}@${kv.create_revision}`;

/**
 * What the observer is doing: reading the candidates (events that arrive meanwhile wait for the
 * read; `again` when the watch said unsure while the read was out, so it may predate a gap),
 * following the watch from its view, or ended.
 */
type Phase =
  | { kind: 'reading'; pending: WatchEvent[][]; again: boolean }
  | { kind: 'following' }
  | { kind: 'ended'; error: Error | undefined };

/** A `next()` waiting for a state. */
interface Waiter {
  resolve(result: IteratorResult<LeaderState>): void;
  reject(error: unknown): void;
}

export class Observer implements AsyncIterableIterator<LeaderState> {
  /** Candidates by key: the current view of the election. */
  readonly #candidates = new Map<string, IKeyValue>();
  /** States not yet taken by the consumer: none is dropped. */
  readonly #states: LeaderState[] = [];
  /** Concurrent `next()` calls, served in call order. */
  readonly #waiters: Waiter[] = [];
  #phase: Phase = { kind: 'reading', pending: [], again: false };
  #last: Holder | undefined;
  /** Events below this revision are reflected in `#candidates`. */
  #from = 0n;
  #reported = false;
  /** Revisions applied so far: tells whether the view moved between two of the watch's reads. */
  #applied = 0;
  /**
   * A watch read that named another leader than the view: `leader` (key and create revision) as
   * of `readAt`, with `#applied` at the time. Judged once the view reaches `readAt` exactly.
   */
  #suspect: { readAt: bigint; leader: string | undefined; applied: number; at: number } | undefined;
  #stop = () => {};

  private constructor(
    private readonly queue: Queue,
    private readonly clock: Clock,
    private readonly segment: string,
    private readonly signal: AbortSignal,
  ) {}

  /**
   * @internal Use `client.observe()`. Starts reading at once; `closed` ends it with the client.
   */
  static start(
    queue: Queue,
    segment: string,
    options: ObserveOptions,
    closed: AbortSignal,
  ): Observer {
    const signal = anySignal(validateSignal(options.signal), closed);
    const observer = new Observer(queue, queue.clock, segment, signal);
    const onAbort = () => observer.#end();
    signal.addEventListener('abort', onAbort, { once: true });
    const release = queue.clock.hold(); // an observer is work the process waits on
    // Another cluster (or a rewound history): states from it are not this election's.
    const changed = queue.etcd.onChanged((err) => observer.#end(err));
    observer.#stop = () => {
      release();
      changed[Symbol.dispose]();
      signal.removeEventListener('abort', onAbort);
    };
    if (signal.aborted) observer.#end();
    else void observer.#read(true);
    return observer;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<LeaderState>> {
    const state = this.#states.shift();
    if (state) return Promise.resolve({ value: state, done: false });
    if (this.#phase.kind === 'ended') {
      const { error } = this.#phase;
      return error === undefined
        ? Promise.resolve({ value: undefined, done: true })
        : Promise.reject(error);
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<LeaderState>> {
    this.#end();
    this.#states.length = 0;
    return Promise.resolve({ value: undefined, done: true });
  }

  #end(error?: unknown): void {
    if (this.#phase.kind === 'ended') return;
    this.#phase = { kind: 'ended', error: error as Error | undefined };
    this.#stop();
    // States already reported go first; every call still waiting then settles.
    for (const waiter of this.#waiters.splice(0)) {
      const state = this.#states.shift();
      if (state) waiter.resolve({ value: state, done: false });
      else if (error === undefined) waiter.resolve({ value: undefined, done: true });
      else waiter.reject(error);
    }
  }

  /**
   * Reads the candidates (with values) and takes that as the truth from its revision on. The
   * first read also subscribes. Retried with backoff until it succeeds or the observer ends.
   */
  async #read(first = false): Promise<void> {
    for (let delay: number = tunables.retryMinMs; this.#phase.kind === 'reading';) {
      let read: { kvs: IKeyValue[]; readAt: bigint };
      try {
        read = await this.queue.candidates(this.segment);
      } catch (err) {
        if (isClientClosedError(err)) return this.#end();
        // Only "etcd did not answer" is worth waiting out; a refusal (a permission the user's
        // roles lack, another cluster) would fail the same way for ever.
        if (!isEtcdUnavailableError(err)) return this.#end(err);
        await sleep(this.clock, delay, this.signal).catch(() => undefined);
        delay = Math.min(delay * 2, tunables.retryMaxMs);
        continue;
      }
      const phase = this.#phase as Phase;
      if (phase.kind !== 'reading') return;
      if (phase.again) {
        phase.again = false;
        continue;
      }
      this.#candidates.clear();
      for (const kv of read.kvs) this.#candidates.set(kv.key.toString(), kv);
      this.#from = read.readAt + 1n;
      this.#suspect = undefined;
      this.#report(read.readAt, false);
      if (first) this.#subscribe();
      this.#phase = { kind: 'following' };
      for (const batch of phase.pending) this.#apply(batch);
      return;
    }
  }

  /** Reads again, unless a read is already out (then that one is read again when it lands). */
  #readAgain(): void {
    const phase = this.#phase;
    if (phase.kind === 'ended') return;
    if (phase.kind === 'reading') {
      phase.again = true;
      return;
    }
    this.#phase = { kind: 'reading', pending: [], again: false };
    void this.#read();
  }

  #subscribe(): void {
    const sub = this.queue.watch.subscribe(this.queue.range(this.segment), this.#from, {
      events: (batch) => {
        const phase = this.#phase;
        if (phase.kind === 'reading') phase.pending.push([...batch]);
        else this.#apply(batch);
      },
      unsure: () => this.#readAgain(),
      read: (kvs, readAt) => this.#check(kvs, readAt),
    });
    const stop = this.#stop;
    this.#stop = () => {
      stop();
      sub[Symbol.dispose]();
    };
    if (this.#phase.kind === 'ended') this.#stop();
  }

  /**
   * The watch's periodic read of the prefix (keys only). It is a separate call, so it often
   * arrives before events it already reflects: a different leader in it proves nothing yet. It
   * is judged when the view reaches its revision exactly (just before the first event after it
   * is applied), and if no event comes, by a later read: two reads at least one attempt deadline
   * apart that disagree with a view that did not move in between mean the view went wrong
   * (events it never got). Only then is the election read again, so no state the watch delivers
   * is ever dropped for a false alarm.
   */
  #check(kvs: IKeyValue[], readAt: bigint): void {
    // A stream still starting (or restarting) has events to deliver that the read already saw.
    if (this.#phase.kind !== 'following' || readAt < this.#from - 1n) return;
    if (!this.queue.watch.live) return;
    const theirs = leaderId(firstOf(kvs.filter(isMember)));
    if (theirs === leaderId(firstOf(this.#candidates.values()))) {
      this.#suspect = undefined;
      return;
    }
    const earlier = this.#suspect;
    if (earlier && earlier.applied === this.#applied && earlier.leader === theirs) {
      // A stream that is only slow (a loaded host) also leaves the view still: it convicts only
      // after a whole attempt deadline, in which a live stream answers (or is replaced).
      if (this.clock.now() - earlier.at >= this.queue.etcd.attemptTimeoutMs) this.#readAgain();
      return;
    }
    this.#suspect = { readAt, leader: theirs, applied: this.#applied, at: this.clock.now() };
  }

  /** One revision's events: applied together, then reported once. */
  #apply(batch: readonly WatchEvent[]): void {
    const revision = batch[0]!.revision;
    if (revision < this.#from || this.#phase.kind === 'ended') return;
    const suspect = this.#suspect;
    if (suspect && revision > suspect.readAt) {
      // The view is exactly as of the suspect read now: every event up to it is applied.
      this.#suspect = undefined;
      if (leaderId(firstOf(this.#candidates.values())) !== suspect.leader) {
        this.#readAgain();
        const phase = this.#phase as Phase;
        if (phase.kind === 'reading') phase.pending.push([...batch]);
        return;
      }
    }
    this.#from = revision + 1n;
    this.#applied++;
    const puts = new Set<string>();
    for (const { kind, kv } of batch) {
      const key = kv.key.toString();
      if (kind === 'delete' || !isMember(kv)) this.#candidates.delete(key);
      else {
        this.#candidates.set(key, kv);
        puts.add(key);
      }
    }
    // A put on the leader's key is a proclaim: reported even if the value is unchanged.
    const leaderKey = firstOf(this.#candidates.values())?.key.toString();
    this.#report(revision, leaderKey !== undefined && puts.has(leaderKey));
  }

  #report(revision: bigint, always: boolean): void {
    const leader = toHolder(firstOf(this.#candidates.values()));
    if (!always && this.#reported && same(leader, this.#last)) return;
    this.#reported = true;
    this.#last = leader;
    const waiter = this.#waiters.shift();
    if (waiter) waiter.resolve({ value: { leader, revision }, done: false });
    else this.#states.push({ leader, revision });
  }
}
