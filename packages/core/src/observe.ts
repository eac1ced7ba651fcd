/**
 * Following an election: who leads, as a stream of states in revision order. It includes "no
 * leader" (Go's `Observe` never reports it) and every value a leader proclaims.
 *
 * The observer keeps its own copy of the election's candidates, from one read and then the
 * watch's ordered, gap-free events. Whenever the watch may have missed events (reconnect,
 * compaction, a subscription it cannot replay), the observer reads the candidates again and
 * carries on from that read, reporting a state only if it differs from the last one reported.
 */
import type { IKeyValue } from 'etcd3';
import { anySignal, sleep, type Clock } from './clock.js';
import { isClientClosedError, isClusterChangedError } from './errors.js';
import { toHolder, type Holder } from './hold.js';
import { prefixEnd } from './etcd.js';
import { tunables, validateSignal } from './options.js';
import type { Queue } from './queue.js';
import type { WatchEvent } from './watch.js';

/** Who leads an election as of `revision`; `leader` is undefined when no one does. */
export interface LeaderState {
  leader: Holder | undefined;
  /** The etcd revision at which this became the state. */
  revision: bigint;
}

export interface ObserveOptions {
  /** Ends the iteration (without an error) when aborted. */
  signal?: AbortSignal;
}

const same = (a: Holder | undefined, b: Holder | undefined) =>
  a?.key === b?.key && a?.token === b?.token && a?.value === b?.value;

export class Observer implements AsyncIterableIterator<LeaderState> {
  /** Candidates by key: the current view of the election. */
  readonly #candidates = new Map<string, IKeyValue>();
  /** States not yet taken by the consumer: none is dropped. */
  readonly #states: LeaderState[] = [];
  #wake = () => {};
  #error: unknown;
  #ended = false;
  #last: Holder | undefined;
  /** Events below this revision are reflected in `#candidates`. */
  #from = 0n;
  /** Events that arrived while a read was pending: applied after it. */
  #pending: WatchEvent[] | undefined = [];
  #readAgain = false;
  #reported = false;
  #stop = () => {};

  private constructor(
    private readonly queue: Queue,
    private readonly clock: Clock,
    private readonly range: string,
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
    const observer = new Observer(queue, queue.clock, queue.range(segment), signal);
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
    else void observer.#reread(true);
    return observer;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<LeaderState>> {
    for (;;) {
      const state = this.#states.shift();
      if (state) return { value: state, done: false };
      if (this.#error !== undefined) throw this.#error as Error;
      if (this.#ended) return { value: undefined, done: true };
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  return(): Promise<IteratorResult<LeaderState>> {
    this.#end();
    this.#states.length = 0;
    return Promise.resolve({ value: undefined, done: true });
  }

  #end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = error;
    this.#stop();
    this.#wake();
  }

  /**
   * Reads the candidates (with values) and takes that as the truth from its revision on. The
   * first read also subscribes; later ones follow an `unsure` from the watch. Retried with
   * backoff until it succeeds or the observer ends.
   */
  async #reread(first = false): Promise<void> {
    for (let delay: number = tunables.retryMinMs; !this.#ended;) {
      let kvs: IKeyValue[];
      let readAt: bigint;
      try {
        const res = await this.queue.etcd.range('election observe', {
          key: Buffer.from(this.range),
          range_end: prefixEnd(this.range),
          sort_order: 'Ascend',
          sort_target: 'Create',
        });
        [kvs, readAt] = [res.kvs, BigInt(res.header.revision)];
      } catch (err) {
        if (isClientClosedError(err)) return this.#end();
        if (isClusterChangedError(err)) return this.#end(err);
        await sleep(this.clock, delay, this.signal).catch(() => undefined);
        delay = Math.min(delay * 2, tunables.retryMaxMs);
        continue;
      }
      if (this.#ended) return;
      if (this.#readAgain) {
        this.#readAgain = false;
        continue; // the watch said unsure while this read was out: it may predate a gap
      }
      this.#candidates.clear();
      for (const kv of kvs) this.#candidates.set(kv.key.toString(), kv);
      this.#from = readAt + 1n;
      this.#report(readAt, false);
      if (first) this.#subscribe();
      const pending = this.#pending ?? [];
      this.#pending = undefined;
      for (const event of pending) this.#apply(event);
      return;
    }
  }

  #subscribe(): void {
    const sub = this.queue.watch.subscribe(this.range, this.#from, {
      event: (e) => (this.#pending ? this.#pending.push(e) : this.#apply(e)),
      unsure: () => {
        if (this.#pending) {
          this.#readAgain = true;
          return;
        }
        this.#pending = [];
        void this.#reread();
      },
      read: () => {}, // keys only; the events and the re-read on `unsure` are the truth
    });
    const stop = this.#stop;
    this.#stop = () => {
      stop();
      sub[Symbol.dispose]();
    };
    if (this.#ended) this.#stop();
  }

  #apply({ kind, kv, revision }: WatchEvent): void {
    if (revision < this.#from || this.#ended) return;
    this.#from = revision + 1n;
    const key = kv.key.toString();
    if (kind === 'delete') this.#candidates.delete(key);
    else this.#candidates.set(key, kv);
    // A put on the leader's key is a proclaim: reported even if the value is unchanged.
    const leaderKey = this.#leader()?.key.toString();
    this.#report(revision, kind === 'put' && key === leaderKey);
  }

  #leader(): IKeyValue | undefined {
    let first: IKeyValue | undefined;
    for (const kv of this.#candidates.values()) {
      if (!first || BigInt(kv.create_revision) < BigInt(first.create_revision)) first = kv;
    }
    return first;
  }

  #report(revision: bigint, always: boolean): void {
    const leader = toHolder(this.#leader());
    if (!always && this.#reported && same(leader, this.#last)) return;
    this.#reported = true;
    this.#last = leader;
    this.#states.push({ leader, revision });
    this.#wake();
  }
}
