/**
 * A scripted etcd surface for unit tests of pure logic: lease calls, watch streams, and KV calls
 * answered from a tiny in-memory store that the test can delay or fail, and a watch whose events
 * the test delivers. Real etcd behaviour is tested in integration/.
 */
import { EventEmitter } from 'node:events';
import type {
  ICompare,
  IEvent,
  IKeyValue,
  IRangeRequest,
  IRangeResponse,
  IRequestOp,
  IResponseOp,
  ITxnRequest,
  ITxnResponse,
  IWatchRequest,
  IWatchResponse,
} from 'etcd3';
import { ClientClosedError, EtcdUnavailableError } from './errors.js';
import { prefixEnd } from './keys.js';
import { silentLogger } from './logger.js';
import { Telemetry } from './telemetry.js';
import type { Etcd } from './transport/etcd.js';
import { byRevisionAndRange, type Watch, type WatchEvent, type WatchListener } from './watch.js';

/** A keepalive stream whose answers the test sends. */
export class FakeStream extends EventEmitter {
  readonly written: unknown[] = [];
  ended = false;
  cancelled = false;
  write(item: unknown): void {
    this.written.push(item);
  }
  end(): void {
    this.ended = true;
  }
  cancel(): void {
    this.cancelled = true;
  }
  /** etcd's answer to the oldest unanswered keepalive. */
  answer(ttlSeconds: number): void {
    this.emit('data', { TTL: String(ttlSeconds), header: { revision: '1', cluster_id: '1' } });
  }
}

/** A response header at `revision`, from the one fake cluster. */
export const headerAt = (revision: bigint | number | string = 1) => ({
  revision: String(revision),
  cluster_id: '1',
  member_id: '1',
  raft_term: '1',
});

/** A watch event as the SDK's watch hands it on (a delete carries only key and revision). */
export function watchEvent(
  kind: 'put' | 'delete',
  key: string,
  revision: bigint,
  opts: { create?: bigint; lease?: bigint | number | string; value?: string } = {},
): WatchEvent {
  const kv: IKeyValue =
    kind === 'put'
      ? {
          key: Buffer.from(key),
          value: Buffer.from(opts.value ?? ''),
          lease: String(opts.lease ?? '0'),
          create_revision: String(opts.create ?? revision),
          mod_revision: String(revision),
          version: '1',
        }
      : {
          key: Buffer.from(key),
          value: Buffer.alloc(0),
          lease: '0',
          create_revision: '0',
          mod_revision: String(revision),
          version: '0',
        };
  return { kind, kv, revision };
}

/** A watch stream whose responses the test sends. */
export class FakeWatchStream extends FakeStream {
  get requests(): IWatchRequest[] {
    return this.written as IWatchRequest[];
  }
  /** The start revision of every create request written, in order. */
  get creates(): bigint[] {
    return this.requests.flatMap((r) =>
      r.create_request ? [BigInt(r.create_request.start_revision ?? 0)] : [],
    );
  }
  /** How many progress requests were written. */
  get progressRequests(): number {
    return this.requests.filter((r) => r.progress_request).length;
  }
  respond(res: Partial<IWatchResponse>): void {
    const full: IWatchResponse = {
      header: headerAt(1),
      watch_id: '0',
      created: false,
      canceled: false,
      compact_revision: '0',
      cancel_reason: '',
      fragment: false,
      events: [],
      ...res,
    };
    this.emit('data', full);
  }
  /** Confirms the create request. */
  created(revision: bigint | number = 1): void {
    this.respond({ created: true, header: headerAt(revision) });
  }
  /** Sends `events` in one response. */
  events(...events: WatchEvent[]): void {
    this.respond({
      header: headerAt(events.at(-1)?.revision ?? 1),
      events: events.map(
        (e) => ({ type: e.kind === 'delete' ? 'Delete' : 'Put', kv: e.kv }) as IEvent,
      ),
    });
  }
  /** A progress notification: no events, everything up to `revision` has been sent. */
  progress(revision: bigint | number): void {
    this.respond({ header: headerAt(revision) });
  }
  /** etcd cancels the watch: its start revision was compacted away. */
  compacted(compactRevision: bigint | number, revision: bigint | number = compactRevision): void {
    this.respond({
      canceled: true,
      compact_revision: String(compactRevision),
      header: headerAt(revision),
    });
  }
  /** The stream breaks. */
  fail(): void {
    this.emit('error', new Error('watch stream broken (fake)'));
  }
}

const TARGETS = ['Version', 'Create', 'Mod', 'Value', 'Lease'] as const;
const RESULTS = ['Equal', 'Greater', 'Less', 'NotEqual'] as const;
const EMPTY = Buffer.alloc(0);

/**
 * A few etcd KV semantics in memory, enough to answer the SDK's txns and reads: one revision per
 * write, create revisions kept across puts, compares on Create/Mod/Version/Lease/Value, ranges by
 * key or `[key, range_end)`. Every write is logged as the watch would deliver it.
 */
export class FakeKv {
  /** The store's revision: each write (a put, a delete, a txn that writes) adds one. */
  revision = 1n;
  readonly #data = new Map<string, IKeyValue>();
  /** Every write, in order, as a watch event. */
  readonly log: WatchEvent[] = [];

  get(key: string): IKeyValue | undefined {
    return this.#data.get(key);
  }

  has(key: string): boolean {
    return this.#data.has(key);
  }

  /** Puts `key` at a new revision (another client's write) and returns its watch event. */
  put(key: string, opts: { lease?: bigint | number | string; value?: string } = {}): WatchEvent {
    this.revision++;
    const lease = String(opts.lease ?? '0');
    return this.#put(Buffer.from(key), Buffer.from(opts.value ?? ''), lease, this.revision);
  }

  /** Deletes `key` at a new revision (expiry, or another client) and returns its watch event. */
  delete(key: string): WatchEvent {
    const kv = this.#data.get(key);
    if (!kv) throw new Error(`FakeKv: no key ${key} to delete`);
    this.revision++;
    return this.#delete(kv.key, this.revision);
  }

  /** Deletes every key given in one revision (`etcdctl del --prefix`), in key order. */
  deleteAll(...keys: string[]): WatchEvent[] {
    this.revision++;
    return [...keys].sort().map((key) => {
      const kv = this.#data.get(key);
      if (!kv) throw new Error(`FakeKv: no key ${key} to delete`);
      return this.#delete(kv.key, this.revision);
    });
  }

  /**
   * Key order (or create order, ascending), `limit` with `more`, keys-only; `revision` must be
   * the current one (no history).
   */
  range(request: IRangeRequest): IRangeResponse {
    if (request.revision !== undefined && BigInt(request.revision) !== this.revision) {
      throw new Error(`FakeKv keeps no history: asked for revision ${request.revision}`);
    }
    const byCreate = request.sort_target === 'Create';
    const kvs = this.#select(request.key, request.range_end).sort((a, b) =>
      byCreate
        ? Number(BigInt(a.create_revision) - BigInt(b.create_revision))
        : Buffer.compare(a.key, b.key),
    );
    const limit = Number(request.limit ?? 0);
    const page = limit > 0 ? kvs.slice(0, limit) : kvs;
    return {
      header: headerAt(this.revision),
      kvs: request.count_only
        ? []
        : page.map((kv) => (request.keys_only ? { ...kv, value: EMPTY } : kv)),
      more: page.length < kvs.length,
      count: String(kvs.length),
    };
  }

  txn(request: ITxnRequest): ITxnResponse {
    const succeeded = (request.compare ?? []).every((c) => this.#compare(c));
    const revision = this.revision + 1n;
    let wrote = false;
    const ops: IRequestOp[] = (succeeded ? request.success : request.failure) ?? [];
    const responses = ops.map((op): IResponseOp => {
      if (op.request_put) {
        const { key, value, lease } = op.request_put;
        this.#put(key ?? EMPTY, value ?? EMPTY, String(lease ?? '0'), revision);
        wrote = true;
        return { response_put: { header: headerAt(revision) } } as IResponseOp;
      }
      if (op.request_delete_range) {
        const gone = this.#select(op.request_delete_range.key, op.request_delete_range.range_end);
        for (const kv of gone) this.#delete(kv.key, revision);
        if (gone.length > 0) wrote = true;
        return {
          response_delete_range: { header: headerAt(revision), deleted: String(gone.length) },
        } as IResponseOp;
      }
      if (op.request_range) return { response_range: this.range(op.request_range) } as IResponseOp;
      throw new Error('FakeKv: nested txns are not modelled');
    });
    if (wrote) this.revision = revision;
    return { header: headerAt(this.revision), succeeded, responses };
  }

  #put(key: Buffer, value: Buffer, lease: string, revision: bigint): WatchEvent {
    const old = this.#data.get(key.toString());
    const kv: IKeyValue = {
      key,
      value,
      lease,
      create_revision: old?.create_revision ?? String(revision),
      mod_revision: String(revision),
      version: String(BigInt(old?.version ?? '0') + 1n),
    };
    this.#data.set(key.toString(), kv);
    const event: WatchEvent = { kind: 'put', kv, revision };
    this.log.push(event);
    return event;
  }

  #delete(key: Buffer, revision: bigint): WatchEvent {
    this.#data.delete(key.toString());
    const event = watchEvent('delete', key.toString(), revision);
    this.log.push(event);
    return event;
  }

  #select(key: Buffer | undefined, rangeEnd: Buffer | undefined): IKeyValue[] {
    const start = key ?? EMPTY;
    const toEnd = rangeEnd?.length === 1 && rangeEnd[0] === 0;
    return [...this.#data.values()]
      .filter((kv) =>
        !rangeEnd || rangeEnd.length === 0
          ? kv.key.equals(start)
          : Buffer.compare(kv.key, start) >= 0 && (toEnd || Buffer.compare(kv.key, rangeEnd) < 0),
      )
      .sort((a, b) => Buffer.compare(a.key, b.key));
  }

  #compare(c: ICompare): boolean {
    const kv = c.key ? this.#data.get(c.key.toString()) : undefined;
    const target = typeof c.target === 'number' ? TARGETS[c.target] : (c.target ?? 'Version');
    const result = typeof c.result === 'number' ? RESULTS[c.result] : (c.result ?? 'Equal');
    let order: number;
    if (target === 'Value') {
      order = Buffer.compare(kv?.value ?? EMPTY, c.value ?? EMPTY);
    } else {
      const [have, want] = {
        Version: [kv?.version, c.version],
        Create: [kv?.create_revision, c.create_revision],
        Mod: [kv?.mod_revision, c.mod_revision],
        Lease: [kv?.lease, c.lease],
      }[target ?? 'Version'].map((v) => BigInt(v ?? 0)) as [bigint, bigint];
      order = have < want ? -1 : have > want ? 1 : 0;
    }
    if (result === 'Equal') return order === 0;
    if (result === 'NotEqual') return order !== 0;
    return result === 'Greater' ? order > 0 : order < 0;
  }
}

/**
 * How the fake answers one call. `apply()` runs it on the store (etcd applied it). A handler may
 * wait before applying (a slow call), wait after (applied, answer late), or throw instead of
 * applying (a failed call).
 */
export type FakeCall<Req, Res> = (
  what: string,
  request: Req,
  apply: () => Res,
) => Res | Promise<Res>;

export interface GrantResponse {
  ID: string;
  TTL: string;
  header: ReturnType<typeof headerAt>;
}

/**
 * The slice of `Etcd` the SDK uses, scripted: lease calls (lease ids 255, 256, ... in grant
 * order), keepalive and watch streams the test answers, and KV txns and reads answered from
 * `store` through `handlers`.
 */
export function fakeEtcd(options: { grantTtl?: number } = {}) {
  const streams: FakeStream[] = [];
  const watches: FakeWatchStream[] = [];
  const revokes: string[] = [];
  /** Streams reported stuck (`Etcd.stuck`), in order. */
  const stuck: unknown[] = [];
  /** The `what` of every call, txn and read, in order. */
  const calls: string[] = [];
  /** Whether each `call()` allowed retries, by its `what`, in order. */
  const retried: { what: string; idempotent: boolean }[] = [];
  const txns: { what: string; request: ITxnRequest }[] = [];
  const state = {
    answers: 0,
    revokeFailures: 0,
    leaseGone: false,
    /** leaseGrant calls so far. */
    grants: 0,
    closed: false,
  };
  const store = new FakeKv();
  /** `Etcd.onChanged` listeners; `change(err)` tells them the cluster changed. */
  const changed = new Set<(error: Error) => void>();
  const change = (error: Error) => [...changed].forEach((listener) => listener(error));
  const handlers: {
    txn: FakeCall<ITxnRequest, ITxnResponse>;
    /** Reads through `etcd.range(what)`, and the watch check's `client.kv.range` ('kv.range'). */
    range: FakeCall<IRangeRequest, IRangeResponse>;
    grant: (apply: () => GrantResponse) => GrantResponse | Promise<GrantResponse>;
  } = {
    txn: (_what, _request, apply) => apply(),
    range: (_what, _request, apply) => apply(),
    grant: (apply) => apply(),
  };
  const header = headerAt(1);
  const etcd = {
    options: { callTimeoutMs: 1_000, endpoints: ['http://fake:1'] },
    telemetry: new Telemetry(silentLogger),
    attemptTimeoutMs: 1_000,
    clusterId: '1',
    get answers() {
      return state.answers;
    },
    assertUsable: () => {
      if (state.closed) throw new ClientClosedError();
    },
    close: () => void (state.closed = true),
    call: async <T>(
      what: string,
      run: (o: { deadline: number }) => Promise<T>,
      opts: { idempotent: boolean },
    ) => {
      calls.push(what);
      retried.push({ what, idempotent: opts.idempotent });
      return run({ deadline: 0 });
    },
    txn: async (what: string, request: ITxnRequest) => {
      calls.push(what);
      txns.push({ what, request });
      return handlers.txn(what, request, () => store.txn(request));
    },
    range: async (what: string, request: IRangeRequest) => {
      calls.push(what);
      return handlers.range(what, request, () => store.range(request));
    },
    observe: () => {},
    stuck: (stream: unknown) => void stuck.push(stream),
    answered: () => undefined,
    onChanged: (listener: (error: Error) => void) => {
      changed.add(listener);
      return { [Symbol.dispose]: () => void changed.delete(listener) };
    },
    stream: async <S>(open: (client: unknown) => Promise<S>) => open(etcd.client),
    client: {
      leaseClient: {
        leaseGrant: async ({ TTL }: { TTL: number }) => {
          const ID = String(255 + state.grants++);
          return handlers.grant(() => ({ ID, TTL: String(options.grantTtl ?? TTL), header }));
        },
        /** A resumed lease: 3 s left of 10 granted, unless `leaseGone`. */
        leaseTimeToLive: async ({ ID }: { ID: string }) => {
          const gone = state.leaseGone;
          return { ID, TTL: gone ? '-1' : '3', grantedTTL: gone ? '0' : '10', header };
        },
        leaseRevoke: async ({ ID }: { ID: string }) => {
          revokes.push(ID);
          if (state.revokeFailures-- > 0) throw new EtcdUnavailableError('etcd is down (fake)');
          if (state.leaseGone) throw new Error('etcdserver: requested lease not found');
          return { header };
        },
        leaseKeepAlive: async () => {
          const stream = new FakeStream();
          streams.push(stream);
          return stream;
        },
      },
      watchClient: {
        watch: async () => {
          const stream = new FakeWatchStream();
          watches.push(stream);
          return stream;
        },
      },
      kv: {
        range: async (request: IRangeRequest) =>
          handlers.range('kv.range', request, () => store.range(request)),
      },
    },
  };
  /** How many calls, txns and reads were made with this `what`. */
  const count = (what: string) => calls.filter((c) => c === what).length;
  return {
    etcd: etcd as unknown as Etcd,
    streams,
    watches,
    revokes,
    stuck,
    state,
    store,
    calls,
    retried,
    txns,
    handlers,
    count,
    change,
  };
}

export interface FakeSubscription {
  range: string;
  from: bigint;
  listener: WatchListener;
  disposed: boolean;
}

/**
 * A `Watch` whose events the test delivers: `emit` hands events to live subscribers of their
 * range at or after their `from` (as the real watch does), `unsure` tells every live subscriber.
 * Events in `replay` are delivered during `subscribe`, as the real watch replays its buffer.
 */
export function fakeWatch(prefix: string) {
  const subs: FakeSubscription[] = [];
  const replay: WatchEvent[] = [];
  const live = () => subs.filter((s) => !s.disposed);
  // As the real watch does: one call per revision and range.
  const deliver = (events: WatchEvent[], to: FakeSubscription[]) =>
    byRevisionAndRange(events, (range, batch, revision) => {
      for (const s of to) {
        if (!s.disposed && revision >= s.from && range === s.range)
          s.listener.events(batch, revision);
      }
    });
  const watch = {
    prefix,
    live: true,
    subscribe(range: string, from: bigint, listener: WatchListener): Disposable {
      const sub: FakeSubscription = { range, from, listener, disposed: false };
      subs.push(sub);
      deliver(replay, [sub]);
      return { [Symbol.dispose]: () => void (sub.disposed = true) };
    },
  };
  return {
    watch: watch as unknown as Watch,
    subs,
    replay,
    live,
    emit(...events: WatchEvent[]): void {
      deliver(events, live());
    },
    unsure(): void {
      for (const s of live()) s.listener.unsure();
    },
    /** Hands every live subscription the keys of its range, as the watch's check does. */
    read(store: { range(r: IRangeRequest): IRangeResponse }): void {
      for (const s of live()) {
        const res = store.range({ key: Buffer.from(s.range), range_end: prefixEnd(s.range) });
        s.listener.read(res.kvs, BigInt(res.header.revision));
      }
    },
  };
}
