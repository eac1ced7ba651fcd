import type { IKeyValue, IWatchRequest, IWatchResponse } from 'etcd3';
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
 *   resumes from the last delivered revision + 1, and subscribers miss nothing;
 * - when that is impossible (the revision was compacted) every subscriber is told it is unsure
 *   and re-reads; so is one that subscribes from a revision the watch can no longer replay;
 * - a stream that hangs (a frozen member keeps the connection open) is caught twice: a create
 *   must be confirmed within `callTimeoutMs`, and every `recheckIntervalMs` one linearizable read
 *   gives the cluster's revision, which the stream must then prove it has delivered (a progress
 *   request) within `callTimeoutMs`, or it is replaced and every subscriber re-reads. That check
 *   is O(1) per client, whatever the number of locks, and its read also catches a cluster whose
 *   history was rewound (see `Etcd.observe`).
 */
export class Watch {
  readonly #subs = new Map<string, Set<Subscription>>();
  readonly #progress = new Listeners<void>();
  #phase: 'idle' | 'starting' | 'live' | 'retrying' | 'closed' = 'idle';
  #stream: WatchStream | undefined;
  /** Every event up to this revision has been delivered. */
  #delivered = 0n;
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
    if (res.created) {
      this.#phase = 'live';
      this.#cancelCreateTimer();
      this.#retryDelayMs = tunables.retryMinMs;
      return;
    }
    if (res.events.length === 0) {
      // A progress notification: everything up to the header's revision has been sent.
      const revision = BigInt(res.header.revision);
      if (revision > this.#delivered) this.#delivered = revision;
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
    this.#progress.emit();
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

  #scheduleCheck(): void {
    if (this.#cancelCheck || this.#phase === 'closed') return;
    this.#cancelCheck = callAt(this.clock, this.clock.now() + this.recheckIntervalMs, () => {
      this.#cancelCheck = undefined;
      if (this.#subs.size === 0) return;
      void this.#check().finally(() => this.#scheduleCheck());
    });
  }

  /** Proves the stream has delivered everything up to the cluster's current revision. */
  async #check(): Promise<void> {
    const stream = this.#stream;
    if (this.#phase !== 'live' || !stream) return;
    let target: bigint;
    try {
      const range = { key: Buffer.from(this.prefix), range_end: prefixEnd(this.prefix) };
      const res = await this.etcd.call(
        'watch check',
        (o) => this.etcd.client.kv.range({ ...range, count_only: true }, o),
        { idempotent: true },
      );
      target = BigInt(res.header.revision);
    } catch {
      return; // unreachable or ended: the sessions' own deadlines cover that
    }
    const giveUpAt = this.clock.now() + this.etcd.options.callTimeoutMs;
    while (this.#delivered < target) {
      if (stream !== this.#stream) return;
      if (this.clock.now() >= giveUpAt) {
        this.#broken(stream, true);
        return this.#allUnsure();
      }
      try {
        stream.write({ progress_request: {} });
      } catch {
        return this.#broken(stream, true);
      }
      await new Promise<void>((resolve) => {
        const sub = this.#progress.add(() => done());
        const cancel = callAt(this.clock, this.clock.now() + tunables.progressRetryMs, () =>
          done(),
        );
        const done = () => {
          sub[Symbol.dispose]();
          cancel();
          resolve();
        };
      });
    }
  }
}
