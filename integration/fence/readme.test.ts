/**
 * The fence README's examples are programs, not sketches: every `ts` block that starts with an
 * import must type-check as written against the built package, and the quick start must run
 * against real etcd and PostgreSQL.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sharedEndpoints } from '../setup/etcd.js';
import { runModule, typeErrors } from '../setup/programs.js';
import { describeWith, findPostgres, ownSchema } from './stores.js';

const fenceDir = fileURLToPath(new URL('../../packages/fence/', import.meta.url));
const readme = readFileSync(`${fenceDir}README.md`, 'utf8');
const programs = [...readme.matchAll(/```ts\n(import [\s\S]*?)```/g)].map((m) => m[1]!);

describe('fence README', () => {
  it('has a quick start and examples for Redis, etcd and the conformance suite', () => {
    expect(programs.length).toBeGreaterThanOrEqual(4);
    expect(programs[0]).toContain("from '@leasehold/fence/postgres'");
  });

  it('has a heading for every runtime export of every entry point', async () => {
    const headings = readme.split('\n').filter((line) => line.startsWith('### '));
    const entries = ['', '/memory', '/postgres', '/redis', '/sqlite', '/etcd', '/conformance'];
    const missing: string[] = [];
    for (const entry of entries) {
      const module = (await import(`@leasehold/fence${entry}`)) as Record<string, unknown>;
      for (const name of Object.keys(module)) {
        const named = new RegExp('`' + name + '(\\(|`)');
        if (!headings.some((h) => named.test(h))) missing.push(`@leasehold/fence${entry} ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("names core's real API, and says how to install it, for TypeScript and CommonJS too", () => {
    expect(readme).not.toMatch(/Mutex/);
    expect(readme).toContain('client.withLock(name, fn)');
    expect(readme).toContain('npm install --save-dev typescript @types/node@20 @types/pg');
    expect(readme).toContain('`require()` works too');
    expect(readme).not.toContain('ESM only');
  });

  it.each(programs.map((code, i) => [i, code.split('\n', 1)[0], code] as const))(
    'example %i (%s ...) type-checks as written',
    (_i, _first, code) => {
      expect(typeErrors(code, fenceDir)).toEqual([]);
    },
    30_000,
  );
});

describeWith(await findPostgres(), 'fence README quick start', (url) => {
  // The quick start names its own tables; a schema of this test's own keeps them apart.
  const schema = ownSchema(url, 'readme');

  it('runs as written against etcd and PostgreSQL', async () => {
    const { code, output } = await runModule(programs[0]!, fenceDir, {
      DATABASE_URL: schema.url,
      ETCD_ENDPOINTS: sharedEndpoints().join(','),
    });
    expect(output).toContain('invoice 42 sent');
    expect(code, output).toBe(0);
    const admin = schema.admin();
    const invoices = await admin.query(`SELECT id, sent FROM "${schema.name}".invoices`);
    expect(invoices.rows).toEqual([{ id: 42, sent: true }]);
    const fences = await admin.query(`SELECT resource FROM "${schema.name}".leasehold_fence`);
    expect(fences.rows).toEqual([{ resource: 'invoice-42' }]);
  });
});
