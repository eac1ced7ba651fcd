/**
 * examples/payment-permits.ts does what its comments say, for real against the run's etcd and
 * PostgreSQL: eight workers, three at a time, each call recorded under its slot's fence.
 * (examples.test.ts type-checks it with every other example.)
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import { runModule } from '../setup/programs.js';
import { describeWith, findPostgres, ownSchema } from '../fence/stores.js';

const dir = fileURLToPath(new URL('../../examples/', import.meta.url));

describeWith(await findPostgres(), 'examples/payment-permits.ts', (url) => {
  const schema = ownSchema(url, 'permits_example');

  it('eight workers, at most three at once, each call fenced by its slot and token', async () => {
    const prefix = uniquePrefix('example-permits');
    const { code, output } = await runModule(
      readFileSync(`${dir}payment-permits.ts`, 'utf8'),
      dir,
      {
        ETCD_ENDPOINTS: sharedEndpoints().join(','),
        LOCK_PREFIX: prefix,
        DATABASE_URL: schema.url,
      },
    );
    expect(code, output).toBe(0);
    const calls = [
      ...output.matchAll(/worker (\d) called the payment API in slot (\d) under token (\d+)/g),
    ];
    expect(calls.map((m) => Number(m[1])).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(new Set(calls.map((m) => m[2]))).toEqual(new Set(['0', '1', '2']));
    const { rows } = await schema
      .admin()
      .query<{ slot: number; token: string }>(
        `SELECT slot, token::text AS token FROM "${schema.name}".payment_calls`,
      );
    expect(rows).toHaveLength(8);
    // Each slot's fence holds its last holder's token: the highest of the slot's calls.
    const fences = await schema
      .admin()
      .query<{ resource: string; token: string }>(
        `SELECT resource, token::text AS token FROM "${schema.name}".leasehold_fence`,
      );
    for (const slot of [0, 1, 2]) {
      const tokens = rows.filter((r) => r.slot === slot).map((r) => BigInt(r.token));
      const fence = fences.rows.find((r) => r.resource === `payment-api#${slot}`);
      expect(BigInt(fence!.token)).toBe(tokens.reduce((a, b) => (a > b ? a : b)));
    }
    const admin = etcdClient(sharedEndpoints());
    try {
      expect(await admin.getAll().prefix(`${prefix}payment-api%sem/`).keys()).toEqual([]);
    } finally {
      admin.close();
    }
  });
});
