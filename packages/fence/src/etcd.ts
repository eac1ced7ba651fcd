/**
 * Fencing for data that lives in etcd itself.
 *
 * A lock's own guard (`lock.fencedWrite`) proves "this hold still owns its key". That is not
 * enough when one resource is written under several lock names, or outlives the lock's key
 * history: then the resource needs its own "highest token seen", as every other store does.
 * Here that is a fence key per resource holding the highest accepted token, compared and
 * advanced in the same etcd transaction as the user's puts and deletes.
 *
 * etcd compares values as bytes, so tokens are stored zero-padded to 20 digits: for such
 * strings byte order is numeric order, exact for all int64 tokens.
 */
import type { Leasehold } from '@leasehold/core';
import { kvCall } from '@leasehold/core/internal';
import { checkResource, type FencedStore, type FencedValue } from './contract.js';
import { InvalidArgumentError, StaleTokenError } from './errors.js';
import { parseToken, type TokenInput } from './token.js';

export interface EtcdFenceOptions {
  /** Key prefix for fence keys and for values written with `write`. Default `/leasehold/fence/`. */
  prefix?: string;
  /** Deadline of each etcd call. Default: the client's `callTimeoutMs`. */
  timeoutMs?: number;
}

/** A put or delete applied only if the token is accepted. */
export type EtcdFencedOp =
  { type: 'put'; key: string; value: string | Uint8Array } | { type: 'delete'; key: string };

const WIDTH = 20;
export const padToken = (token: bigint): string => token.toString().padStart(WIDTH, '0');

export class EtcdFence implements FencedStore {
  readonly prefix: string;

  /** No I/O here: the client is already connected. */
  constructor(
    private readonly client: Leasehold,
    private readonly options: EtcdFenceOptions = {},
  ) {
    const prefix = options.prefix ?? '/leasehold/fence/';
    if (typeof prefix !== 'string' || prefix.includes('\0')) {
      throw new InvalidArgumentError(`prefix must be a string without NUL, got ${typeof prefix}`);
    }
    this.prefix = prefix;
  }

  /** The key holding the highest accepted token of `resource`. */
  fenceKey(resource: string): string {
    return `${this.prefix}token/${encodeURIComponent(checkResource(resource))}`;
  }

  /** The key `write` stores the value of `resource` under. */
  valueKey(resource: string): string {
    return `${this.prefix}value/${encodeURIComponent(checkResource(resource))}`;
  }

  /**
   * Applies `ops` iff `token` >= the highest token accepted for `resource`, recording `token`
   * as the highest, in one transaction. Rejects with `StaleTokenError` (and changes nothing)
   * otherwise. Resolves to the etcd revision of the write. Not retried: a timed-out write may
   * have landed.
   */
  async apply(resource: string, token: TokenInput, ops: readonly EtcdFencedOp[]): Promise<bigint> {
    const fenceKey = Buffer.from(this.fenceKey(resource));
    const t = parseToken(token);
    const writes = [
      { request_put: { key: fenceKey, value: Buffer.from(padToken(t)) } },
      ...toRequests(ops),
    ];
    const res = await kvCall(
      this.client,
      'fenced write',
      (kv, o) =>
        kv.txn(
          {
            // Absent fence: any valid token is accepted. Present: accepted iff stored < token+1.
            compare: [{ key: fenceKey, target: 'Create', result: 'Equal', create_revision: '0' }],
            success: writes,
            failure: [
              {
                request_txn: {
                  compare: [
                    {
                      key: fenceKey,
                      target: 'Value',
                      result: 'Less',
                      value: Buffer.from(padToken(t + 1n)),
                    },
                  ],
                  success: writes,
                  failure: [{ request_range: { key: fenceKey } }],
                },
              },
            ],
          },
          o,
        ),
      {
        idempotent: false,
        ...(this.options.timeoutMs ? { timeoutMs: this.options.timeoutMs } : {}),
      },
    );
    const inner = res.responses[0]?.response_txn;
    if (!res.succeeded && inner && !inner.succeeded) {
      const stored = inner.responses[0]?.response_range.kvs[0]?.value.toString();
      throw new StaleTokenError(resource, t, stored === undefined ? undefined : BigInt(stored));
    }
    return BigInt(res.header.revision);
  }

  async write(resource: string, token: TokenInput, value: string): Promise<void> {
    await this.apply(resource, token, [{ type: 'put', key: this.valueKey(resource), value }]);
  }

  async read(resource: string): Promise<FencedValue | undefined> {
    const [value, fence] = await this.#get([this.valueKey(resource), this.fenceKey(resource)]);
    if (value === undefined || fence === undefined) return undefined;
    return { value: value.toString(), token: BigInt(fence.toString()) };
  }

  async highestToken(resource: string): Promise<bigint | undefined> {
    const [fence] = await this.#get([this.fenceKey(resource)]);
    return fence === undefined ? undefined : BigInt(fence.toString());
  }

  /** Reads keys at one revision (one read-only txn), so a value and its token agree. */
  async #get(keys: string[]): Promise<(Buffer | undefined)[]> {
    const res = await kvCall(
      this.client,
      'fence read',
      (kv, o) =>
        kv.txn(
          {
            compare: [],
            success: keys.map((k) => ({ request_range: { key: Buffer.from(k) } })),
            failure: [],
          },
          o,
        ),
      { idempotent: true },
    );
    return keys.map((_, i) => res.responses[i]?.response_range.kvs[0]?.value);
  }
}

function toRequests(ops: unknown) {
  if (!Array.isArray(ops) || ops.length === 0) {
    throw new InvalidArgumentError(
      'ops must be a non-empty array of { type: "put" | "delete", key }',
    );
  }
  return ops.map((op: Partial<{ type: unknown; key: unknown; value: unknown }>, i) => {
    if (typeof op?.key !== 'string' || op.key === '') {
      throw new InvalidArgumentError(`ops[${i}].key must be a non-empty string`);
    }
    const key = Buffer.from(op.key);
    if (op.type === 'delete') return { request_delete_range: { key } };
    if (op.type === 'put' && (typeof op.value === 'string' || op.value instanceof Uint8Array)) {
      return { request_put: { key, value: Buffer.from(op.value) } };
    }
    throw new InvalidArgumentError(
      `ops[${i}] must be { type: "put", key, value: string | Uint8Array } or { type: "delete", key }`,
    );
  });
}
