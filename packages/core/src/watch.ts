import type { IKeyValue, IWatchRequest, IWatchResponse } from 'etcd3';
import { callAt, sleep, type Clock } from './clock.js';
import { prefixEnd, rangeOf, readPrefix } from './keys.js';
import { isEnded } from './transport/cleanup.js';
import { endStream, type Etcd } from './transport/etcd.js';
import type { Stream } from './transport/wire.js';
import { Listeners } from './latch.js';
import { tunables } from './options.js';

export interface WatchEvent {
  kind: 'put' | 'delete';
  kv: IKeyValue;
  /** The event's revision (the key's mod revision). */
  revision: bigint;
}

/** What a queue entry hears about its queue. */
export interface WatchListener {
  /**
   * The subscribed range's events of one revision (one txn: e.g. a multi-key delete), at or
   * after the revision subscribed from, in revision order. They are one state change: apply
   * them together, never one at a time (a waiter whose predecessor and own key go in one txn
   * was never first).
   */
  events(events: readonly WatchEvent[], revision: bigint): void;
  /**
   * Events may have been missed (or belong to another history): trust none of them on its own
   * until the next `read`, which the watch sends at once.
   */
  unsure(): void;
  /** The range's keys (keys only), as a linearizable read saw them at `readAt`. */
  read(kvs: IKeyValue[], readAt: bigint): void;
}

type WatchStream = Stream<IWatchRequest, IWatchResponse>;
/** One subscriber of one range; disposing it unsubscribes. */
class Subscription implements Disposable {
  constructor(
    readonly from: bigint,
    readonly listener: WatchListener,
    private readonly range: string,
    private readonly subs: Map<string, Subscribers>,
  ) {}

  [Symbol.dispose](): void {
    const current = this.subs.get(this.range);
    if (current === this) this.subs.delete(this.range);
    else if (current instanceof Set) {
      current.delete(this);
      if (current.size === 0) this.subs.delete(this.range);
    }
  }
}

/** A range's subscribers: most ranges have one (a holder), so no set for it. */
type Subscribers = Subscription | Set<Subscription>;

const each = (subs: Subscribers | undefined): Iterable<Subscription> =>
  subs === undefined ? [] : subs instanceof Set ? [...subs] : [subs];

/**
 * Calls `fn` with each run of events that share a revision and a range: etcd sends a txn's
 * events together and in order, so a run is one state change of one queue.
 */
export function byRevisionAndRange(
  events: readonly WatchEvent[],
  fn: (range: string, batch: WatchEvent[], revision: bigint) => void,
): void {
  for (let i = 0; i < events.length;) {
    const revision = events[i]!.revision;
    const ranges = new Map<string, WatchEvent[]>();
    for (; i < events.length && events[i]!.revision === revision; i++) {
      const range = rangeOf(events[i]!.kv.key.toString());
      const batch = ranges.get(range);
      if (batch) batch.push(events[i]!);
      else ranges.set(range, [events[i]!]);
    }
    for (const [range, batch] of ranges) fn(range, batch, revision);
  }
}

/**
 * One etcd watch over a whole prefix, shared by every lock, waiter and candidate of a client
 * (a watch per lock measured twice the cost of an uncontended acquire). The price: the client
 * also decodes other clients' churn under the same prefix.
 *
 * What makes it safe to rely on:
 * - an etcd watch is ordered and gap-free from its start revision. Only events count as
 *   delivered: etcd 3.4 answers a progress request with its current revision even while the
 *   watch is still sending older events, so a progress notification proves the stream is alive,
 *   nothing more;
 * - after any break the stream resumes after the last event it delivered, but every subscriber
 *   is told it is unsure: the member may have been restored from a snapshot, and events of another
 *   history would read as consistent. So are they all after a compaction, and one that subscribes
 *   from a revision the watch can no longer replay;
 * - whenever it says unsure, and every `recheckIntervalMs` while the client has subscribers or
 *   live sessions, the watch reads the whole prefix (keys only, in pages, at one revision) and
 *   hands each subscriber its range: that one read settles every unsure subscriber and catches
 *   anything missed (a hold whose key is gone, a waiter whose predecessor is gone), so an event
 *   lost for any reason costs at most `recheckIntervalMs`; it also catches a rewound history
 *   (`Etcd.observe`). A failed read is retried with backoff. The stream must answer a progress
 *   request within one attempt's deadline (1 s), and a watch create be confirmed as fast, or the
 *   stream is replaced (a frozen member keeps a dead stream open);
 * - every event and every read also goes to `onEvent` / `onRead` listeners: the queue sweeps the
 *   keys of this client's sessions that nothing owns.
 */
export class Watch {
  readonly #subs = new Map<string, Subscribers>();
  readonly #progress = new Listeners<void>();
  #phase: 'idle' | 'starting' | 'live' | 'retrying' | 'closed' = 'idle';
  #stream: WatchStream | undefined;
  /** The revision of the last event delivered: a resumed stream starts after it. */
  #delivered = 0n;
  #resumed = false;
  #checkAt = Infinity;
  #checking = false;
  /** A check was asked for while one ran: run another right after it. */
  #checkAgain = false;
  readonly #events = new Listeners<WatchEvent>();
  /** Events from this revision on are in `#buffer` or still to come. */
  #coveredFrom = 0n;
  #buffer: WatchEvent[] = [];
  #retryDelayMs: number = tunables.retryMinMs;
  #cancelCreateTimer = () => {};
  #cancelCheck: (() => void) | undefined;

  readonly #reads = new Listeners<{ kvs: IKeyValue[]; readAt: bigint }>();

  constructor(
    private readonly etcd: Etcd,
    private readonly clock: Clock,
    readonly prefix: string,
    private readonly recheckIntervalMs: number,
    /** Whether to go on checking without subscribers (while the client has live sessions). */
    private readonly active: () => boolean = () => false,
  ) {}

  /** Whether the stream is up and confirmed: events it has not delivered yet are on their way. */
  get live(): boolean {
    return this.#phase === 'live';
  }

  /** Hears every event under the prefix, whichever range it is in. */
  onEvent(listener: (event: WatchEvent) => void): Disposable {
    return this.#events.add(listener);
  }

  /** Hears every check's read of the whole prefix (keys only), e.g. to sweep orphaned keys. */
  onRead(listener: (read: { kvs: IKeyValue[]; readAt: bigint }) => void): Disposable {
    return this.#reads.add(listener);
  }

  /** Starts the periodic check if it is not running (a session was made). */
  wake(): void {
    this.#scheduleCheck();
  }

  /**
   * Delivers events of `range` from revision `from` on. Buffered events are replayed at once,
   * before this returns; if the watch cannot replay from `from`, `unsure` follows in a microtask.
   */
  subscribe(range: string, from: bigint, listener: WatchListener): Disposable {
    const sub = new Subscription(from, listener, range, this.#subs);
    const current = this.#subs.get(range);
    if (current === undefined) this.#subs.set(range, sub);
    else if (current instanceof Set) current.add(sub);
    else this.#subs.set(range, new Set([current, sub]));
    if (this.#phase === 'idle') {
      this.#reset(from);
      void this.#open();
    } else if (from < this.#coveredFrom) {
      queueMicrotask(() => {
        const now = this.#subs.get(range);
        if (now !== sub && !(now instanceof Set && now.has(sub))) return;
        listener.unsure();
        this.#checkNow();
      });
    } else {
      // The buffer is in revision order, so only its tail can be due: a fresh join (from the
      // revision it just read) usually replays nothing, however full the buffer is.
      const buffer = this.#buffer;
      let i = buffer.length;
      while (i > 0 && buffer[i - 1]!.revision >= from) i--;
      if (i < buffer.length) {
        byRevisionAndRange(buffer.slice(i), (r, batch, revision) => {
          if (r === range) listener.events(batch, revision);
        });
      }
    }
    this.#scheduleCheck();
    return sub;
  }

  close(): void {
    this.#phase = 'closed';
    this.#subs.clear();
    this.#cancelCheck?.();
    this.#drop(false);
  }

  /** Starts over at `from`: a first stream, or after a compaction (everyone is unsure already). */
  #reset(from: bigint): void {
    this.#resumed = false;
    this.#buffer = [];
    this.#coveredFrom = from;
    this.#delivered = from - 1n;
  }

  async #open(): Promise<void> {
    this.#phase = 'starting';
    let stream: WatchStream;
    try {
      stream = await this.etcd.stream((client) => client.watchClient.watch());
    } catch (err) {
      // Closed, or met another cluster: nothing will ever be watched through this client again.
      return isEnded(err) ? this.close() : this.#retry();
    }
    if (this.#phase !== 'starting') return stream.cancel();
    this.#stream = stream;
    stream.on('data', (res) => this.#onResponse(stream, res));
    stream.on('error', () => this.#broken(stream, false));
    stream.on('end', () => this.#broken(stream, false));
    stream.write({
      create_request: {
        key: Buffer.from(this.prefix),
        range_end: prefixEnd(this.prefix),
        start_revision: (this.#delivered + 1n).toString(),
      },
    });
    // A frozen member accepts the stream and never confirms it.
    this.#cancelCreateTimer = callAt(
      this.clock,
      this.clock.now() + this.etcd.attemptTimeoutMs,
      () => this.#phase === 'starting' && this.#broken(stream, true),
    );
  }

  #onResponse(stream: WatchStream, res: IWatchResponse): void {
    if (stream !== this.#stream) return;
    try {
      this.etcd.observe(res.header);
    } catch {
      return this.close(); // closed, or another cluster: the client is ending
    }
    if (res.canceled) {
      const compacted = BigInt(res.compact_revision || '0');
      if (compacted === 0n) return this.#broken(stream, false);
      // Events between the last delivered one and the compaction are gone: start again from
      // what etcd still has, and have everyone re-read.
      this.#drop(false);
      this.#reset(compacted);
      void this.#open();
      return this.#allUnsure();
    }
    this.#progress.emit(); // any answer proves the stream is alive
    if (res.created) {
      this.#phase = 'live';
      this.#cancelCreateTimer();
      this.#retryDelayMs = tunables.retryMinMs;
      if (this.#resumed) this.#allUnsure(); // after a break: perhaps another history
      this.#resumed = true;
      return;
    }
    if (res.events.length === 0) return;
    const events = res.events.map((ev): WatchEvent => ({
      kind: ev.type === 'Delete' ? 'delete' : 'put',
      kv: ev.kv,
      revision: BigInt(ev.kv.mod_revision),
    }));
    for (const event of events) {
      this.#buffer.push(event);
      if (this.#buffer.length > tunables.watchReplayEvents) {
        this.#coveredFrom = this.#buffer.shift()!.revision + 1n;
      }
      if (event.revision > this.#delivered) this.#delivered = event.revision;
    }
    byRevisionAndRange(events, (range, batch, revision) => {
      for (const sub of each(this.#subs.get(range))) {
        if (revision >= sub.from) sub.listener.events(batch, revision);
      }
    });
    for (const event of events) this.#events.emit(event);
  }

  #broken(stream: WatchStream, stuck: boolean): void {
    if (stream !== this.#stream || this.#phase === 'closed') return;
    if (stuck) this.etcd.stuck(stream);
    this.#drop(stuck);
    void this.#retry();
  }

  #drop(stuck: boolean): void {
    endStream(this.#stream, stuck);
    this.#stream = undefined;
    this.#cancelCreateTimer();
  }

  async #retry(): Promise<void> {
    if (this.#phase === 'closed') return;
    this.#phase = 'retrying';
    const delay = this.#retryDelayMs;
    this.#retryDelayMs = Math.min(delay * 2, tunables.retryMaxMs);
    await sleep(this.clock, delay);
    if (this.#phase === 'retrying') await this.#open();
  }

  #allUnsure(): void {
    for (const subs of [...this.#subs.values()]) {
      for (const sub of each(subs)) sub.listener.unsure();
    }
    this.#checkNow();
  }

  /** Runs a check at once, or right after the one running. */
  #checkNow(): void {
    if (this.#checking) this.#checkAgain = true;
    else this.#scheduleCheck(0);
  }

  /** Arms the next check `delayMs` from now, unless one is already due sooner. */
  #scheduleCheck(delayMs = this.recheckIntervalMs): void {
    const at = this.clock.now() + delayMs;
    if (this.#phase === 'closed' || this.#checking || this.#checkAt <= at) return;
    this.#cancelCheck?.();
    this.#checkAt = at;
    this.#cancelCheck = callAt(this.clock, at, () => {
      this.#checkAt = Infinity;
      if (this.#subs.size === 0 && !this.active()) return;
      this.#checking = true;
      void this.#check().then((read) => {
        this.#checking = false;
        const again = this.#checkAgain;
        this.#checkAgain = false;
        // A failed read is tried again soon: unsure subscribers are waiting for one.
        this.#scheduleCheck(again ? 0 : read ? this.recheckIntervalMs : tunables.retryMaxMs);
      });
    });
  }

  /**
   * Hands every subscriber (and `onRead`) one read of the prefix, then, if the stream is up,
   * proves it still answers. Also while no stream is open: the read alone catches a rewound
   * history and the keys a session should no longer have.
   */
  async #check(): Promise<boolean> {
    let read: { kvs: IKeyValue[]; readAt: bigint };
    try {
      // Keys only, in pages that stay far below gRPC's message limit, at one revision.
      read = await readPrefix((r) => this.etcd.range('watch check', r), this.prefix, {
        keysOnly: true,
        pageKeys: tunables.checkPageKeys,
      });
    } catch (err) {
      if (isEnded(err)) this.close();
      return false; // unreachable: tried again soon; the sessions' deadlines still hold
    }
    const byRange = new Map<string, IKeyValue[]>();
    for (const kv of read.kvs) {
      const range = rangeOf(kv.key.toString());
      const kvs = byRange.get(range);
      if (kvs) kvs.push(kv);
      else byRange.set(range, [kv]);
    }
    for (const [range, subs] of [...this.#subs]) {
      for (const sub of each(subs)) sub.listener.read(byRange.get(range) ?? [], read.readAt);
    }
    this.#reads.emit(read);
    const stream = this.#stream;
    if (this.#phase === 'live' && stream && !(await this.#answers(stream))) {
      if (stream !== this.#stream) return true;
      this.#broken(stream, true);
      this.#allUnsure();
    }
    return true;
  }

  /** Whether the stream answers a progress request within one attempt's deadline. */
  #answers(stream: WatchStream): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const done = (answered: boolean) => {
        sub[Symbol.dispose]();
        cancel();
        resolve(answered);
      };
      const sub = this.#progress.add(() => done(true));
      const cancel = callAt(this.clock, this.clock.now() + this.etcd.attemptTimeoutMs, () =>
        done(false),
      );
      try {
        stream.write({ progress_request: {} });
      } catch {
        done(false);
      }
    });
  }
}
