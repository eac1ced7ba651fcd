/**
 * An etcd in memory for users' own tests: the KV store, leases, watches, faults and the clock
 * they all run on, shared by every client made on it with `memoryClient({ etcd })`. The SDK's
 * real logic runs on top (locks, sessions, elections are core's code, not copies), so what a
 * test sees here is what it would see against etcd, minus what the README lists as not modelled.
 */
import type { Leasehold } from '@leasehold/core';
import { prefixEnd, type IResponseHeader } from '@leasehold/core/internal';
import { randomBytes } from 'node:crypto';
import { MemoryClock } from './clock.js';
import { MemoryFaults } from './faults.js';
import { invalid } from './invalid.js';
import { MemoryKv } from './kv.js';
import { MemoryLeases } from './leases.js';
import { MemoryProcess } from './process.js';
import { register } from './registry.js';
import { MemoryStream } from './stream.js';
import { MemoryWatches } from './watches.js';
import { memoryWire, type WireHandlers } from './wire.js';

/** Options of `new MemoryEtcd(options)`. */
export interface MemoryEtcdOptions {
  /** Where the clock starts, in milliseconds. Default 0. */
  startMs?: number;
}

/** A key as stored, with its revisions. */
export interface MemoryKey {
  /** The key, decoded as UTF-8. */
  key: string;
  /** The value, decoded as UTF-8. */
  value: string;
  /** The revision that created the key: a lock's or candidate's fencing token. */
  createRevision: bigint;
  /** The revision of the key's latest write. */
  modRevision: bigint;
  /** How many times the key was written since it was created (1 after the create). */
  version: bigint;
  /** The lease the key is attached to; 0n for none. */
  leaseId: bigint;
}

/** The memory etcd's clock: time moves only when a test advances it. */
export interface TestClock {
  /** Milliseconds since the clock's origin. */
  now(): number;
  /** Moves time forward by `ms`, running the timers (and what they start) that come due. */
  advance(ms: number): Promise<void>;
  /** Lets pending work (answers, watch events) run without moving time. */
  settle(): Promise<void>;
}

/** Faults planted in the next unary calls (see faults.ts). */
export type TestFaults = Pick<MemoryFaults, 'failNext' | 'hangNext' | 'clear'>;

const id64 = () => BigInt.asUintN(63, randomBytes(8).readBigUInt64BE()).toString();

let created = 0;

/**
 * An etcd in memory: clients made on it with `memoryClient({ etcd })` share its keys, leases and
 * clock. Move time with `clock.advance(ms)`, pause a client's process with `pause(client)`, plant
 * faults with `faults.failNext()` / `faults.hangNext()`, and act on it as another client or an
 * operator would (`revokeLease`, `delete`, `put`, `compact`).
 *
 * @example
 * ```ts
 * const etcd = new MemoryEtcd();
 * const a = await memoryClient({ etcd });
 * const lock = await a.acquire('job');
 * etcd.pause(a);
 * await etcd.clock.advance(11_000); // past the session's TTL (10 s by default): the lease expires
 * etcd.resume(a);
 * lock.isHeld; // false
 * ```
 */
export class MemoryEtcd {
  readonly #clock: MemoryClock;
  readonly #faults = new MemoryFaults();
  readonly #kv: MemoryKv;
  readonly #leases: MemoryLeases;
  readonly #watches: MemoryWatches;
  readonly #processes = new WeakMap<Leasehold, MemoryProcess>();
  readonly #streams = new Map<MemoryProcess, Set<MemoryStream<unknown, unknown>>>();
  readonly #header: (revision: bigint) => IResponseHeader;

  /**
   * @throws InvalidArgumentError from `@leasehold/core` when `startMs` is not a finite number
   * of milliseconds, 0 or more.
   */
  constructor(options: MemoryEtcdOptions = {}) {
    const startMs = options.startMs ?? 0;
    if (!(Number.isFinite(startMs) && startMs >= 0)) {
      throw invalid('startMs', 'a finite number of milliseconds, 0 or more', startMs);
    }
    this.#clock = new MemoryClock(startMs);
    const [cluster_id, member_id] = [id64(), id64()];
    this.#header = (revision) => ({
      cluster_id,
      member_id,
      revision: revision.toString(),
      raft_term: '2',
    });
    this.#watches = new MemoryWatches(() => this.#kv, this.#header);
    this.#leases = new MemoryLeases(this.#clock, () => this.#kv);
    this.#kv = new MemoryKv({
      header: this.#header,
      leaseExists: (id) => this.#leases.has(id),
      onWrite: (revision, events) => this.#watches.written(revision, events),
    });
    const endpoint = `memory://etcd-${++created}`;
    register(this, {
      endpoint,
      process: () => new MemoryProcess(this.#clock),
      wire: (process) =>
        memoryWire(
          {
            clock: this.#clock,
            faults: this.#faults,
            handlers: (p) => this.#handlers(p),
            closed: (p) => this.#closeStreams(p),
          },
          process,
        ),
      attach: (client, process) => void this.#processes.set(client, process),
    });
  }

  /** The clock every lease, timer and deadline of this etcd and its clients runs on. */
  get clock(): TestClock {
    return this.#clock;
  }

  /** Faults for the next KV and lease calls of any client. */
  get faults(): TestFaults {
    return this.#faults;
  }

  /** The store's revision: each write moves it by one. */
  get revision(): bigint {
    return this.#kv.revision;
  }

  /** The key as stored now, or undefined. */
  get(key: string): MemoryKey | undefined {
    const kv = this.#kv.range({ key: Buffer.from(key) }).kvs[0];
    return kv && toKey(kv);
  }

  /** Every key under `prefix` now, in key order. */
  keys(prefix = ''): MemoryKey[] {
    const range = { key: Buffer.from(prefix), range_end: prefixEnd(prefix) };
    return this.#kv.range(range).kvs.map(toKey);
  }

  /** Writes `key` as another client would (one revision); `leaseId` attaches it to a lease. */
  put(key: string, value: string, options: { leaseId?: bigint } = {}): bigint {
    const leaseId = options.leaseId ?? 0n;
    if (leaseId !== 0n && !(typeof leaseId === 'bigint' && this.#leases.has(leaseId))) {
      throw invalid('options.leaseId', 'a live lease of this etcd (see leases())', leaseId);
    }
    this.#kv.put({
      key: Buffer.from(key),
      value: Buffer.from(value),
      lease: (options.leaseId ?? 0n).toString(),
    });
    return this.#kv.revision;
  }

  /** Deletes `key` (with `prefix`, every key under it) at one revision; how many went. */
  delete(key: string, options: { prefix?: boolean } = {}): number {
    const range = options.prefix
      ? { key: Buffer.from(key), range_end: prefixEnd(key) }
      : { key: Buffer.from(key) };
    return Number(this.#kv.deleteRange(range).deleted);
  }

  /** Live lease ids, in grant order. */
  leases(): bigint[] {
    return this.#leases.ids();
  }

  /** Ends a lease now, as `etcdctl lease revoke` would; false if there is no such lease. */
  revokeLease(leaseId: bigint): boolean {
    if (typeof leaseId !== 'bigint') throw invalid('leaseId', 'a bigint lease id', leaseId);
    if (!this.#leases.has(leaseId)) return false;
    this.#leases.revoke(leaseId);
    return true;
  }

  /** Compacts history before `revision` (default: the current one), as etcd's compaction does. */
  compact(revision: bigint = this.#kv.revision): void {
    if (typeof revision !== 'bigint' || revision < 1n || revision > this.#kv.revision) {
      throw invalid(
        'revision',
        `a bigint from 1 to the current revision ${this.#kv.revision}`,
        revision,
      );
    }
    this.#kv.compact(revision);
    this.#watches.compacted(revision);
  }

  /**
   * Freezes `client`'s process, as SIGSTOP would: its timers and everything sent to it wait,
   * while this etcd's time goes on (its leases can expire). `resume` runs what waited.
   */
  pause(client: Leasehold): void {
    this.#processOf(client).pause();
  }

  /** Lets a client frozen by `pause` run again: its timers and what was sent to it run now. */
  resume(client: Leasehold): void {
    this.#processOf(client).resume();
  }

  #processOf(client: Leasehold): MemoryProcess {
    const process = this.#processes.get(client);
    if (!process)
      throw invalid('client', 'a client made by memoryClient({ etcd }) on this etcd', client);
    return process;
  }

  #handlers(process: MemoryProcess): WireHandlers {
    const kv = this.#kv;
    const leases = this.#leases;
    const header = () => this.#header(kv.revision);
    const open = <Req, Res>(
      serve: (req: Req, s: MemoryStream<Req, Res>) => void,
      onClose?: (s: object) => void,
    ) => {
      const streams = this.#streams.get(process) ?? new Set();
      this.#streams.set(process, streams);
      const stream: MemoryStream<Req, Res> = new MemoryStream<Req, Res>(process, serve, () => {
        streams.delete(stream as MemoryStream<unknown, unknown>);
        onClose?.(stream);
      });
      streams.add(stream as MemoryStream<unknown, unknown>);
      return Promise.resolve(stream);
    };
    return {
      kv: {
        range: async (req) => kv.range(req),
        txn: async (req) => kv.txn(req),
        put: async (req) => kv.put(req),
        deleteRange: async (req) => kv.deleteRange(req),
      },
      leaseClient: {
        leaseGrant: async (req) => {
          const granted = leases.grant(Number(req.TTL), BigInt(req.ID ?? 0));
          return {
            header: header(),
            ID: granted.id.toString(),
            TTL: String(granted.ttlSeconds),
            error: '',
          };
        },
        leaseRevoke: async (req) => {
          leases.revoke(BigInt(req.ID ?? 0));
          return { header: header() };
        },
        leaseTimeToLive: async (req) => {
          const id = BigInt(req.ID ?? 0);
          const left = leases.timeToLive(id);
          return {
            header: header(),
            ID: id.toString(),
            TTL: String(left.ttlSeconds),
            grantedTTL: String(left.grantedSeconds),
            keys: req.keys ? kv.keysOf(id) : [],
          };
        },
        leaseKeepAlive: () =>
          open((req: { ID: string | number }, stream) => {
            const id = BigInt(req.ID ?? 0);
            const ttl = leases.keepAlive(id);
            stream.send({ header: header(), ID: id.toString(), TTL: String(ttl) });
          }),
      },
      watchClient: {
        watch: () =>
          open(
            (req, stream) => this.#watches.serve(req, stream),
            (stream) => this.#watches.closed(stream),
          ),
      },
    };
  }

  #closeStreams(process: MemoryProcess): void {
    for (const stream of [...(this.#streams.get(process) ?? [])]) stream.cancel();
    this.#streams.delete(process);
  }
}

/** A new, empty etcd in memory. */
export function memoryEtcd(options?: MemoryEtcdOptions): MemoryEtcd {
  return new MemoryEtcd(options);
}

function toKey(kv: {
  key: Buffer;
  value: Buffer;
  create_revision: string;
  mod_revision: string;
  version: string;
  lease: string;
}): MemoryKey {
  return {
    key: kv.key.toString(),
    value: kv.value.toString(),
    createRevision: BigInt(kv.create_revision),
    modRevision: BigInt(kv.mod_revision),
    version: BigInt(kv.version),
    leaseId: BigInt(kv.lease),
  };
}
