/**
 * The memory etcd's answers to raw etcd requests, pinned to real etcd's: each script runs the
 * same KV, lease and watch requests against both, and what they answer must match once
 * revisions are replaced by their order (the shared etcd has other tests' writes in between, so
 * only the order of revisions is comparable, and response headers are left out).
 */
import type { WireClient } from '@leasehold/core/internal';
import { describe, expect, it } from 'vitest';
import { memoryEtcd } from '../../packages/testing/src/memory/etcd.js';
import { serverOf } from '../../packages/testing/src/memory/registry.js';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

type Wire = Pick<WireClient, 'kv' | 'leaseClient' | 'watchClient'>;
type Script = (wire: Wire, p: (key: string) => Buffer) => Promise<unknown>;

/** Revisions (any `*revision` field, strings of digits) replaced by their rank among all seen. */
function byRank(value: unknown): unknown {
  const seen = new Set<bigint>();
  const collect = (v: unknown, key = ''): void => {
    if (/revision$/.test(key) && typeof v === 'string' && v !== '0') seen.add(BigInt(v));
    else if (Array.isArray(v)) v.forEach((x) => collect(x));
    else if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
      for (const [k, x] of Object.entries(v)) collect(x, k);
    }
  };
  collect(value);
  const ranks = [...seen].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const map = (v: unknown, key = ''): unknown => {
    if (key === 'header' || key === 'ID' || key === 'lease') return undefined;
    if (/revision$/.test(key) && typeof v === 'string' && v !== '0') {
      return `r${ranks.indexOf(BigInt(v))}`;
    }
    if (Buffer.isBuffer(v)) return v.toString();
    if (Array.isArray(v)) return v.map((x) => map(x));
    if (v && typeof v === 'object') {
      return Object.fromEntries(
        Object.entries(v)
          .map(([k, x]) => [k, map(x, k)])
          .filter(([, x]) => x !== undefined),
      );
    }
    return v;
  };
  return map(value);
}

async function both(script: Script): Promise<[unknown, unknown]> {
  const raw = etcdClient(sharedEndpoints());
  const prefix = uniquePrefix('wire');
  const onReal = await script(raw as unknown as Wire, (key) => Buffer.from(`${prefix}${key}`))
    .catch((err: unknown) => ({ error: String((err as Error).message) }))
    .finally(() => raw.close());
  const etcd = memoryEtcd();
  const server = serverOf(etcd)!;
  const wire = server.wire(server.process());
  const onMemory = await script(wire, (key) => Buffer.from(`${prefix}${key}`)).catch(
    (err: unknown) => ({ error: String((err as Error).message) }),
  );
  wire.close();
  return [byRank(onReal), byRank(onMemory)];
}

const put = (wire: Wire, key: Buffer, value: string, extra = {}) =>
  wire.kv.put({ key, value: Buffer.from(value), ...extra });

describe('memory etcd answers raw requests as etcd does', () => {
  it('range: prefix, limit, count, more, keys only, count only, sorts', async () => {
    const [real, memory] = await both(async (wire, p) => {
      await put(wire, p('c'), '1');
      await put(wire, p('a'), '3');
      await put(wire, p('b'), '2');
      await put(wire, p('a'), '4');
      const all = { key: p(''), range_end: Buffer.from(`${p('').toString().slice(0, -1)}0`) };
      return Promise.all([
        wire.kv.range(all),
        wire.kv.range({ ...all, limit: 2 }),
        wire.kv.range({ ...all, keys_only: true }),
        wire.kv.range({ ...all, count_only: true }),
        wire.kv.range({ ...all, sort_target: 'Create', sort_order: 'Descend' }),
        wire.kv.range({ ...all, sort_target: 'Mod', sort_order: 'Ascend', limit: 2 }),
        wire.kv.range({ ...all, sort_target: 'Value', sort_order: 'Descend' }),
        wire.kv.range({ ...all, sort_target: 'Version' }),
        wire.kv.range({ key: p('zz') }),
      ]);
    });
    expect(memory).toEqual(real);
  });

  it('range at a past revision', async () => {
    const [real, memory] = await both(async (wire, p) => {
      const first = await put(wire, p('k'), 'old');
      await put(wire, p('k'), 'new');
      return wire.kv.range({ key: p('k'), revision: first.header.revision });
    });
    expect(memory).toEqual(real);
  });

  it('txn: compares on create, version, mod, value; both branches; reads after writes', async () => {
    const [real, memory] = await both(async (wire, p) => {
      const created = await put(wire, p('k'), 'v');
      const txns = [
        {
          compare: [
            {
              key: p('k'),
              target: 'Create' as const,
              result: 'Equal' as const,
              create_revision: '0',
            },
          ],
          success: [{ request_put: { key: p('k'), value: Buffer.from('never') } }],
          failure: [{ request_range: { key: p('k') } }],
        },
        {
          compare: [
            { key: p('k'), target: 'Version' as const, result: 'Greater' as const, version: '0' },
            {
              key: p('k'),
              target: 'Mod' as const,
              result: 'Equal' as const,
              mod_revision: created.header.revision,
            },
            {
              key: p('k'),
              target: 'Value' as const,
              result: 'Equal' as const,
              value: Buffer.from('v'),
            },
          ],
          success: [
            { request_put: { key: p('n'), value: Buffer.from('1'), prev_kv: true } },
            { request_delete_range: { key: p('k'), prev_kv: true } },
            {
              request_range: {
                key: p(''),
                range_end: Buffer.from(`${p('').toString().slice(0, -1)}0`),
              },
            },
          ],
        },
        {
          compare: [
            {
              key: p('missing'),
              target: 'Value' as const,
              result: 'NotEqual' as const,
              value: Buffer.from('x'),
            },
          ],
          success: [{ request_put: { key: p('never'), value: Buffer.from('') } }],
        },
      ];
      const out = [];
      for (const txn of txns) out.push(await wire.kv.txn(txn));
      return out;
    });
    expect(memory).toEqual(real);
  });

  it('put and delete with prev_kv; delete of a range', async () => {
    const [real, memory] = await both(async (wire, p) => {
      await put(wire, p('a'), '1');
      const again = await put(wire, p('a'), '2', { prev_kv: true });
      await put(wire, p('b'), '3');
      const gone = await wire.kv.deleteRange({
        key: p(''),
        range_end: Buffer.from(`${p('').toString().slice(0, -1)}0`),
        prev_kv: true,
      });
      const none = await wire.kv.deleteRange({ key: p('a') });
      return [again, gone, none];
    });
    expect(memory).toEqual(real);
  });

  it('leases: minimum TTL, time to live with keys, a put on a revoked lease is refused', async () => {
    const [real, memory] = await both(async (wire, p) => {
      const lease = await wire.leaseClient.leaseGrant({ TTL: 1, ID: 0 });
      await put(wire, p('a'), '1', { lease: lease.ID });
      const ttl = await wire.leaseClient.leaseTimeToLive({ ID: lease.ID, keys: true });
      await wire.leaseClient.leaseRevoke({ ID: lease.ID });
      const after = await wire.leaseClient.leaseTimeToLive({ ID: lease.ID });
      const keys = await wire.kv.range({ key: p('a') });
      const refused = await put(wire, p('b'), '1', { lease: lease.ID }).catch((e: Error) =>
        /requested lease not found/.test(e.message),
      );
      const revokeAgain = await wire.leaseClient
        .leaseRevoke({ ID: lease.ID })
        .catch((e: Error) => /requested lease not found/.test(e.message));
      return {
        granted: lease.TTL,
        ttl: { granted: ttl.grantedTTL, keys: ttl.keys.map(String) },
        after: { TTL: after.TTL, grantedTTL: after.grantedTTL },
        keys,
        refused,
        revokeAgain,
      };
    });
    expect(memory).toEqual(real);
  });

  it('watch from a past revision with prev_kv: history, then live events', async () => {
    const [real, memory] = await both(async (wire, p) => {
      const first = await put(wire, p('a'), '1');
      await put(wire, p('a'), '2');
      await wire.kv.deleteRange({ key: p('a') });
      const stream = await wire.watchClient.watch();
      const got: unknown[] = [];
      const done = new Promise<void>((resolve, reject) => {
        stream.on('error', reject);
        stream.on('data', (res) => {
          got.push({ created: res.created, canceled: res.canceled, events: res.events });
          const events = got.flatMap((g) => (g as { events: unknown[] }).events);
          if (events.length === 4) resolve();
        });
      });
      stream.write({
        create_request: {
          key: p('a'),
          start_revision: first.header.revision,
          prev_kv: true,
        },
      });
      await put(wire, p('a'), '3');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        done,
        new Promise(
          (_, reject) => (timer = setTimeout(() => reject(new Error('no events')), 5_000)),
        ),
      ]).finally(() => clearTimeout(timer));
      stream.cancel();
      // How etcd splits events over responses is its own business: compare the events.
      return {
        created: got.some((g) => (g as { created: boolean }).created),
        events: got.flatMap((g) => (g as { events: unknown[] }).events),
      };
    });
    expect(memory).toEqual(real);
  });
});
