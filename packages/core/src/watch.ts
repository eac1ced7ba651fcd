import type { IKeyValue, IRangeResponse, IWatchRequest, IWatchResponse } from 'etcd3';
import { callAt, sleep, type Clock } from './clock.js';
import { endStream, prefixEnd, type Etcd, type Stream } from './etcd.js';
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
  /** An event in the subscribed range, at or after the revision subscribed from, in order. */
  event(event: WatchEvent): void;
  /** Events may have been missed: re-read, and trust events after the read's revision. */
  unsure(): void;
  /**
   * The range's keys (keys only) as a linearizable read saw them at `readAt`: a listener whose
   * belief disagrees (its own key gone or changed, a key it waits for gone) re-reads.
   */
  verify(kvs: IKeyValue[], readAt: bigint): void;
}

type WatchStream = Stream<IWatchRequest, IWatchResponse>;
interface Subscription {
  from: bigint;
  listener: WatchListener;
}

/** The queue a key belongs to: `<prefix><segment>/` for `<prefix><segment>/<lease hex>`. */
export const rangeOf = (key: string): string => key.slice(0, key.lastIndexOf('/') + 1);

/**
 * One etcd watch over a whole prefix, shared by every lock, waiter and candidate of a client
 * (a watch per lock measured twice the cost of an uncontended acquire). The price: the client
 * also decodes other clients' churn under the same prefix.
 *
 * What makes it safe to rely on:
 * - an etcd watch is ordered and gap-free from its start revision, so after a broken stream it
 *   resumes from the revision after the last event it delivered. Only events count: etcd 3.4
 *   answers a progress request with its current revision even while the watch is still sending
 *   older events, so a progress notification proves the stream is alive, not what it delivered;
 * - when resuming is impossible (the revision was compacted) every subscriber is told it is
 *   unsure and re-reads; so is one that subscribes from a revision the watch can no longer replay;
 * - every `recheckIntervalMs`, and at once after any reconnect, one keys-only linearizable read
 *   of the prefix is handed to every subscriber to check its belief against (a holder whose key
 *   is gone, a waiter whose predecessor is gone: each re-reads), so an event missed for any reason
 *   costs at most that long; and the stream must answer a progress request within
 *   `callTimeoutMs`, or it is replaced (a frozen member keeps a dead stream open). That is one
 *   read per client, whatever the number of locks, and it also catches a rewound history
 *   (`Etcd.observe`). A watch create must be confirmed within `callTimeoutMs` too.
 */
export class Watch {
  readonly #subs = new Map<string, Set<Subscription>>();
  readonly #progress = new Listeners<void>();
  #phase: 'idle' | 'starting' | 'live' | 'retrying' | 'closed' = 'idle';
  #stream: WatchStream | undefined;
  /** The revision of the last event delivered: a resumed stream starts after it. */
  #delivered = 0n;
  #resumed = false;
  #checkAt = Infinity;
  /** Events from this revision on are in `#buffer` or still to come. */
  #coveredFrom = 0n;
  #buffer: WatchEvent[] = [];
  #retryDelayMs: number = tunables.retryMinMs;
  #cancelCreateTimer = () => {};
  #cancelCheck: (() => void) | undefined;

  constructor(
    private readonly etcd: Etcd,
    private readonly clock: Clock,
    readonly prefix: string,
    private readonly recheckIntervalMs: number,
  ) {}

  /**
   * Delivers events of `range` from revision `from` on. Buffered events are replayed at once,
   * before this returns; if the watch cannot replay from `from`, `unsure` follows in a microtask.
   */
  subscribe(range: string, from: bigint, listener: WatchListener): Disposable {
    const sub = { from, listener };
    let set = this.#subs.get(range);
    if (!set) this.#subs.set(range, (set = new Set()));
    set.add(sub);
    if (this.#phase === 'idle') {
      this.#reset(from);
      void this.#open();
    } else if (from < this.#coveredFrom) {
      queueMicrotask(() => set.has(sub) && listener.unsure());
    } else {
      for (const e of this.#buffer) {
        if (e.revision >= from && rangeOf(e.kv.key.toString()) === range) listener.event(e);
      }
    }
    this.#scheduleCheck();
    return {
      [Symbol.dispose]: () => {
        set.delete(sub);
        if (set.size === 0 && this.#subs.get(range) === set) this.#subs.delete(range);
      },
    };
  }

  close(): void {
    this.#phase = 'closed';
    this.#subs.clear();
    this.#cancelCheck?.();
    this.#drop(false);
  }

  #reset(from: bigint): void {
    this.#buffer = [];
    this.#coveredFrom = from;
    this.#delivered = from - 1n;
  }

  async #open(): Promise<void> {
    this.#phase = 'starting';
    let stream: WatchStream;
    try {
      stream = await this.etcd.stream((client) => client.watchClient.watch());
    } catch {
      return this.#retry();
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
      this.clock.now() + this.etcd.options.callTimeoutMs,
      () => this.#phase === 'starting' && this.#broken(stream, true),
    );
  }

  #onResponse(stream: WatchStream, res: IWatchResponse): void {
    if (stream !== this.#stream) return;
    try {
      this.etcd.observe(res.header);
    } catch {
      return this.#drop(true); // closed, or another cluster: the client is ending
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
      if (this.#resumed) this.#scheduleCheck(0); // belt and braces after any break
      this.#resumed = true;
      return;
    }
    for (const ev of res.events) {
      const event: WatchEvent = {
        kind: ev.type === 'Delete' ? 'delete' : 'put',
        kv: ev.kv,
        revision: BigInt(ev.kv.mod_revision),
      };
      this.#buffer.push(event);
      if (this.#buffer.length > tunables.watchReplayEvents) {
        this.#coveredFrom = this.#buffer.shift()!.revision + 1n;
      }
      if (event.revision > this.#delivered) this.#delivered = event.revision;
      for (const sub of this.#subs.get(rangeOf(ev.kv.key.toString())) ?? []) {
        if (event.revision >= sub.from) sub.listener.event(event);
      }
    }
  }

  #broken(stream: WatchStream, stuck: boolean): void {
    if (stream !== this.#stream || this.#phase === 'closed') return;
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
    for (const set of [...this.#subs.values()]) {
      for (const sub of [...set]) sub.listener.unsure();
    }
  }

  /** Arms the next check `delayMs` from now, unless one is already due sooner. */
  #scheduleCheck(delayMs = this.recheckIntervalMs): void {
    const at = this.clock.now() + delayMs;
    if (this.#phase === 'closed' || this.#checkAt <= at) return;
    this.#cancelCheck?.();
    this.#checkAt = at;
    this.#cancelCheck = callAt(this.clock, at, () => {
      this.#checkAt = Infinity;
      if (this.#subs.size > 0) void this.#check().finally(() => this.#scheduleCheck());
    });
  }

  /** Hands every subscriber one read of the prefix, then proves the stream still answers. */
  async #check(): Promise<void> {
    const stream = this.#stream;
    if (this.#phase !== 'live' || !stream) return;
    const request = { key: Buffer.from(this.prefix), range_end: prefixEnd(this.prefix) };
    let res: IRangeResponse;
    try {
      res = await this.etcd.range('watch check', { ...request, keys_only: true });
    } catch {
      return; // unreachable or ended: the sessions' own deadlines cover that
    }
    const byRange = new Map<string, IKeyValue[]>();
    for (const kv of res.kvs) {
      const range = rangeOf(kv.key.toString());
      byRange.set(range, [...(byRange.get(range) ?? []), kv]);
    }
    const readAt = BigInt(res.header.revision);
    for (const [range, set] of [...this.#subs]) {
      for (const sub of [...set]) sub.listener.verify(byRange.get(range) ?? [], readAt);
    }
    if (stream === this.#stream && !(await this.#answers(stream))) {
      this.#broken(stream, true);
      this.#allUnsure();
    }
  }

  /** Whether the stream answers a progress request within `callTimeoutMs`. */
  #answers(stream: WatchStream): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const done = (answered: boolean) => {
        sub[Symbol.dispose]();
        cancel();
        resolve(answered);
      };
      const sub = this.#progress.add(() => done(true));
      const cancel = callAt(this.clock, this.clock.now() + this.etcd.options.callTimeoutMs, () =>
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
