/**
 * Every program in examples/ type-checks and runs against real etcd (and PostgreSQL where it
 * needs it), and the README's quick start is examples/quick-start.ts, byte for byte.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import { runModule, typeErrors } from '../setup/programs.js';
import { describeWith, findPostgres, ownSchema } from '../fence/stores.js';

const dir = fileURLToPath(new URL('../../examples/', import.meta.url));
const source = (name: string) => readFileSync(`${dir}${name}`, 'utf8');
const typed = readdirSync(dir).filter((name) => name.endsWith('.ts'));
const readmeBlocks = (path: string) =>
  [
    ...readFileSync(fileURLToPath(new URL(path, import.meta.url)), 'utf8').matchAll(
      /```ts\n([\s\S]*?)```/g,
    ),
  ].map((m) => m[1]!);
const etcd = () => ({ ETCD_ENDPOINTS: sharedEndpoints().join(',') });

describe('examples', () => {
  it.each(typed)(
    '%s type-checks as written',
    (name) => {
      expect(typeErrors(source(name), dir)).toEqual([]);
    },
    30_000,
  );

  it('the README quick start is examples/quick-start.ts', () => {
    expect(readmeBlocks('../../README.md')).toContain(source('quick-start.ts'));
  });

  const coreDir = fileURLToPath(new URL('../../packages/core/', import.meta.url));
  it.each(readmeBlocks('../../packages/core/README.md').map((code, i) => [i, code] as const))(
    'core README example %i type-checks as written',
    (_i, code) => {
      expect(typeErrors(code, coreDir)).toEqual([]);
    },
    30_000,
  );

  it('plain-javascript.mjs takes the lock, or names the holder', async () => {
    const { code, output } = await runModule(source('plain-javascript.mjs'), dir, etcd());
    expect(output).toMatch(
      /holding \/leasehold\/lock\/nightly-report\/[0-9a-f]+ with token \d+|someone else runs it/,
    );
    expect(code, output).toBe(0);
  });

  it('fenced-etcd-write.ts writes under the lock', async () => {
    const prefix = uniquePrefix('example-etcd');
    const key = `${prefix}config`;
    const { code, output } = await runModule(source('fenced-etcd-write.ts'), dir, {
      ...etcd(),
      LOCK_PREFIX: prefix,
      CONFIG_KEY: key,
    });
    expect(output).toMatch(/config written at revision \d+ by token \d+/);
    expect(code, output).toBe(0);
    const admin = etcdClient(sharedEndpoints());
    try {
      expect(await admin.get(key).string()).toBe('on');
      expect(await admin.getAll().prefix(`${prefix}config/`).keys()).toEqual([]); // lock released
    } finally {
      admin.close();
    }
  });
});

describeWith(await findPostgres(), 'examples with PostgreSQL', (url) => {
  const schema = ownSchema(url, 'examples');

  it('quick-start.ts writes the invoice under its fencing token', async () => {
    const { code, output } = await runModule(source('quick-start.ts'), dir, {
      ...etcd(),
      DATABASE_URL: schema.url,
    });
    expect(output).toMatch(/invoice 42 written under fencing token \d+/);
    expect(code, output).toBe(0);
    const { rows } = await schema
      .admin()
      .query(`SELECT id, total, fence::text FROM "${schema.name}".invoice`);
    const token = /token (\d+)/.exec(output)![1];
    expect(rows).toEqual([{ id: 42, total: 250, fence: token }]);
  });
});
