/**
 * etcd's key-value store in memory: one global revision that each writing request (a put, a
 * delete that deleted something, a txn that wrote) moves by one; per key its create revision,
 * mod revision, version and lease; every version kept until compacted, so reads at a past
 * revision and watches from a past revision see what etcd would.
 */
import type {
  ICompare,
  IDeleteRangeRequest,
  IDeleteRangeResponse,
  IKeyValue,
  IPutRequest,
  IPutResponse,
  IRangeRequest,
  IRangeResponse,
  IRequestOp,
  IResponseHeader,
  IResponseOp,
  ITxnRequest,
  ITxnResponse,
} from '@leasehold/core/internal';
import { wireErrors } from '@leasehold/core/internal';

export interface KvEvent {
  type: 'Put' | 'Delete';
  kv: IKeyValue;
  prev_kv?: IKeyValue | undefined;
}

/** A key's value at one revision; `undefined` kv is a deletion. */
interface Version {
  revision: bigint;
  kv: IKeyValue | undefined;
}

const EMPTY = Buffer.alloc(0);
const TARGETS = ['Version', 'Create', 'Mod', 'Value', 'Lease'] as const;
const RESULTS = ['Equal', 'Greater', 'Less', 'NotEqual'] as const;
const ORDERS = ['None', 'Ascend', 'Descend'] as const;
const SORT_TARGETS = ['Key', 'Version', 'Create', 'Mod', 'Value'] as const;

const enumOf = <T extends string>(names: readonly T[], value: unknown, fallback: T): T =>
  typeof value === 'number' ? (names[value] ?? fallback) : ((value as T | undefined) ?? fallback);

/** Keys as latin1 strings: one char per byte, so string order is etcd's byte order. */
const name = (key: Buffer | string | undefined): string =>
  key === undefined ? '' : Buffer.isBuffer(key) ? key.toString('latin1') : key;
const bytes = (key: Buffer | string | undefined): Buffer =>
  key === undefined ? EMPTY : Buffer.isBuffer(key) ? key : Buffer.from(key);

/** One op's answer as etcd3 decodes it: the oneof's name beside its value. */
const answer = (name: keyof IResponseOp, value: unknown): IResponseOp =>
  ({ response: name, [name]: value }) as unknown as IResponseOp;

const int = (v: unknown): bigint => BigInt((v as string | number | undefined) ?? 0);

export interface KvOptions {
  /** The header every answer carries (cluster and member ids, term) at `revision`. */
  header(revision: bigint): IResponseHeader;
  /** Whether etcd has this lease: a put with an unknown lease is refused. */
  leaseExists(id: bigint): boolean;
  /** Every applied write, once per revision. */
  onWrite(revision: bigint, events: KvEvent[]): void;
}

export class MemoryKv {
  #revision = 1n;
  #compacted = 0n;
  readonly #keys = new Map<string, Version[]>();
  /** Sorted names of `#keys`, rebuilt lazily after a new key. */
  #sorted: string[] | undefined = [];

  constructor(private readonly options: KvOptions) {}

  get revision(): bigint {
    return this.#revision;
  }

  get compacted(): bigint {
    return this.#compacted;
  }

  range(req: IRangeRequest): IRangeResponse {
    const at = int(req.revision);
    if (at > this.#revision) {
      throw wireErrors.refused('etcdserver: mvcc: required revision is a future revision');
    }
    if (at > 0n && at < this.#compacted) {
      throw wireErrors.refused('etcdserver: mvcc: required revision has been compacted');
    }
    return this.#range(req, at > 0n ? at : this.#revision, this.#revision);
  }

  put(req: IPutRequest): IPutResponse {
    const res = this.txn({ success: [{ request_put: req }] });
    return res.responses[0]!.response_put;
  }

  deleteRange(req: IDeleteRangeRequest): IDeleteRangeResponse {
    const res = this.txn({ success: [{ request_delete_range: req }] });
    return res.responses[0]!.response_delete_range;
  }

  /** Compares, then one branch's ops at one new revision (if any of them writes). */
  txn(req: ITxnRequest): ITxnResponse {
    const write = { revision: this.#revision + 1n, events: [] as KvEvent[] };
    const [succeeded, responses] = this.#txn(req, write);
    if (write.events.length > 0) {
      this.#revision = write.revision;
      this.options.onWrite(write.revision, write.events);
    }
    for (const r of responses) {
      const name = (r as { response?: keyof IResponseOp }).response;
      const inner = name && (r[name] as { header?: IResponseHeader } | undefined);
      if (inner && typeof inner === 'object') inner.header = this.options.header(this.#revision);
    }
    return { header: this.options.header(this.#revision), succeeded, responses };
  }

  /** Every current key whose lease is `id`, deleted at one revision (a lease's end). */
  deleteLeased(id: bigint): number {
    const lease = id.toString();
    const ops: IRequestOp[] = this.#current(this.#revision)
      .filter((kv) => kv.lease === lease)
      .map((kv) => ({ request_delete_range: { key: kv.key } }));
    if (ops.length > 0) this.txn({ success: ops });
    return ops.length;
  }

  /** Current keys with this lease (a lease time-to-live with `keys`). */
  keysOf(id: bigint): Buffer[] {
    const lease = id.toString();
    return this.#current(this.#revision)
      .filter((kv) => kv.lease === lease)
      .map((kv) => kv.key);
  }

  /** Forgets versions before `revision`: reads and watches from before it are refused. */
  compact(revision: bigint): void {
    if (revision <= this.#compacted) {
      throw wireErrors.refused('etcdserver: mvcc: required revision has been compacted');
    }
    if (revision > this.#revision) {
      throw wireErrors.refused('etcdserver: mvcc: required revision is a future revision');
    }
    this.#compacted = revision;
    for (const [key, versions] of this.#keys) {
      // Keep the newest version at or before `revision`: it is still the value read there.
      let keep = 0;
      for (let i = 0; i < versions.length; i++) if (versions[i]!.revision <= revision) keep = i;
      versions.splice(0, keep);
      if (versions.length === 1 && versions[0]!.kv === undefined) {
        this.#keys.delete(key);
        this.#sorted = undefined;
      }
    }
  }

  #txn(req: ITxnRequest, write: { revision: bigint; events: KvEvent[] }): [boolean, IResponseOp[]] {
    const succeeded = (req.compare ?? []).every((c) => this.#compare(c));
    const ops = (succeeded ? req.success : req.failure) ?? [];
    // etcd checks every lease before applying anything: a refused txn writes nothing.
    for (const op of ops) {
      const lease = int(op.request_put?.lease);
      if (lease !== 0n && !op.request_put?.ignore_lease && !this.options.leaseExists(lease)) {
        throw wireErrors.leaseNotFound();
      }
    }
    const responses = ops.map((op): IResponseOp => {
      if (op.request_range) {
        // Reads inside a txn see its earlier writes.
        const at = write.events.length > 0 ? write.revision : this.#revision;
        return answer('response_range', this.#range(op.request_range, at, at));
      }
      if (op.request_put) return answer('response_put', this.#put(op.request_put, write));
      if (op.request_delete_range) {
        return answer('response_delete_range', this.#delete(op.request_delete_range, write));
      }
      if (op.request_txn) {
        const [ok, inner] = this.#txn(op.request_txn, write);
        return answer('response_txn', { header: undefined, succeeded: ok, responses: inner });
      }
      throw wireErrors.refused('etcdserver: unknown request in txn');
    });
    return [succeeded, responses];
  }

  #put(req: IPutRequest, write: { revision: bigint; events: KvEvent[] }): IPutResponse {
    const key = bytes(req.key);
    const prev = this.#at(name(key), write.revision);
    if ((req.ignore_value || req.ignore_lease) && !prev) {
      throw wireErrors.refused('etcdserver: key not found');
    }
    const kv: IKeyValue = {
      key,
      value: req.ignore_value ? prev!.value : bytes(req.value),
      lease: req.ignore_lease ? prev!.lease : int(req.lease).toString(),
      create_revision: prev?.create_revision ?? write.revision.toString(),
      mod_revision: write.revision.toString(),
      version: (int(prev?.version) + 1n).toString(),
    };
    this.#set(name(key), write.revision, kv);
    write.events.push({ type: 'Put', kv, prev_kv: prev });
    // etcd3 decodes an absent message as null.
    return { header: undefined, prev_kv: (req.prev_kv && prev) || null } as never;
  }

  #delete(
    req: IDeleteRangeRequest,
    write: { revision: bigint; events: KvEvent[] },
  ): IDeleteRangeResponse {
    const gone = this.#select(req.key, req.range_end, write.revision);
    for (const prev of gone) {
      this.#set(name(prev.key), write.revision, undefined);
      const kv: IKeyValue = {
        key: prev.key,
        value: EMPTY,
        lease: '0',
        create_revision: '0',
        mod_revision: write.revision.toString(),
        version: '0',
      };
      write.events.push({ type: 'Delete', kv, prev_kv: prev });
    }
    return {
      header: undefined,
      deleted: String(gone.length),
      prev_kvs: req.prev_kv ? gone : [],
    } as never;
  }

  #range(req: IRangeRequest, at: bigint, headerAt: bigint): IRangeResponse {
    let kvs = this.#select(req.key, req.range_end, at).filter(
      (kv) =>
        (!req.min_mod_revision || int(kv.mod_revision) >= int(req.min_mod_revision)) &&
        (!req.max_mod_revision || int(kv.mod_revision) <= int(req.max_mod_revision)) &&
        (!req.min_create_revision || int(kv.create_revision) >= int(req.min_create_revision)) &&
        (!req.max_create_revision || int(kv.create_revision) <= int(req.max_create_revision)),
    );
    const target = enumOf(SORT_TARGETS, req.sort_target, 'Key');
    let order = enumOf(ORDERS, req.sort_order, 'None');
    if (order === 'None' && target !== 'Key') order = 'Ascend';
    if (order !== 'None') {
      const by = (kv: IKeyValue): bigint | Buffer =>
        target === 'Key'
          ? kv.key
          : target === 'Value'
            ? kv.value
            : int(
                { Version: kv.version, Create: kv.create_revision, Mod: kv.mod_revision }[target],
              );
      const sign = order === 'Descend' ? -1 : 1;
      kvs = [...kvs].sort((a, b) => {
        const [x, y] = [by(a), by(b)];
        const c =
          typeof x === 'bigint'
            ? x < (y as bigint)
              ? -1
              : x > (y as bigint)
                ? 1
                : 0
            : Buffer.compare(x, y as Buffer);
        return sign * c;
      });
    }
    const count = kvs.length;
    const limit = Number(req.limit ?? 0);
    const page = limit > 0 ? kvs.slice(0, limit) : kvs;
    return {
      header: this.options.header(headerAt),
      kvs: req.count_only ? [] : page.map((kv) => (req.keys_only ? { ...kv, value: EMPTY } : kv)),
      more: page.length < count,
      count: String(count),
    };
  }

  #compare(c: ICompare): boolean {
    const target = enumOf(TARGETS, c.target, 'Version');
    const result = enumOf(RESULTS, c.result, 'Equal');
    const kvs = c.range_end
      ? this.#select(c.key, c.range_end, this.#revision)
      : [this.#at(name(c.key), this.#revision)];
    return kvs.every((kv) => {
      // A missing key compares as zero, except by value.
      if (!kv && target === 'Value') return false;
      let order: number;
      if (target === 'Value') order = Buffer.compare(kv!.value, bytes(c.value));
      else {
        const have = int(
          {
            Version: kv?.version,
            Create: kv?.create_revision,
            Mod: kv?.mod_revision,
            Lease: kv?.lease,
          }[target],
        );
        const want = int(
          { Version: c.version, Create: c.create_revision, Mod: c.mod_revision, Lease: c.lease }[
            target
          ],
        );
        order = have < want ? -1 : have > want ? 1 : 0;
      }
      if (result === 'Equal') return order === 0;
      if (result === 'NotEqual') return order !== 0;
      return result === 'Greater' ? order > 0 : order < 0;
    });
  }

  /** Keys of `[key, rangeEnd)` (just `key` without an end; to the end for `\0`) at `at`. */
  #select(key: Buffer | string | undefined, rangeEnd: Buffer | string | undefined, at: bigint) {
    const start = name(key);
    const end = name(rangeEnd);
    if (end === '') {
      const kv = this.#at(start, at);
      return kv ? [kv] : [];
    }
    const toEnd = end === '\0';
    const out: IKeyValue[] = [];
    for (const k of this.#names()) {
      if (k < start) continue;
      if (!toEnd && k >= end) break;
      const kv = this.#at(k, at);
      if (kv) out.push(kv);
    }
    return out;
  }

  #current(at: bigint): IKeyValue[] {
    return this.#select(EMPTY, '\0', at);
  }

  #at(key: string, at: bigint): IKeyValue | undefined {
    const versions = this.#keys.get(key);
    if (!versions) return undefined;
    for (let i = versions.length - 1; i >= 0; i--) {
      if (versions[i]!.revision <= at) return versions[i]!.kv;
    }
    return undefined;
  }

  #set(key: string, revision: bigint, kv: IKeyValue | undefined): void {
    let versions = this.#keys.get(key);
    if (!versions) {
      this.#keys.set(key, (versions = []));
      this.#sorted = undefined;
    }
    const last = versions.at(-1);
    // Two writes to one key in one txn: the later one is what the revision holds.
    if (last?.revision === revision) last.kv = kv;
    else versions.push({ revision, kv });
  }

  #names(): string[] {
    this.#sorted ??= [...this.#keys.keys()].sort();
    return this.#sorted;
  }
}
