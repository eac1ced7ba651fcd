import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { findPostgres, findRedis } from '../fence/stores.js';

const demo = fileURLToPath(new URL('./demo.mjs', import.meta.url));

/** Runs `pnpm demo`'s script against one store; resolves to its exit code and output. */
function runDemo(store: string | undefined): Promise<{ code: number | null; output: string }> {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  if (store) env.LEASEHOLD_DEMO_STORE = store;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [demo], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
}

const [postgres, redis] = await Promise.all([findPostgres(), findRedis()]);
const stores: [string, string | undefined, string | undefined][] = [
  ['SQLite (default)', undefined, undefined],
  [
    'PostgreSQL',
    'url' in postgres ? postgres.url : undefined,
    'skip' in postgres ? postgres.skip : undefined,
  ],
  ['Redis', 'url' in redis ? redis.url : undefined, 'skip' in redis ? redis.skip : undefined],
];

describe('the demo: a paused holder with real processes, locks and stores', () => {
  for (const [name, url, skip] of stores) {
    if (skip !== undefined) console.log(`[demo] ${name} skipped: ${skip}`);
    it.skipIf(skip !== undefined)(
      `${name}: rejects the stale write with fencing, loses data without`,
      async () => {
        const { code, output } = await runDemo(url);
        expect(output).toContain(`store: ${name.split(' ')[0]}`);
        expect(output).toMatch(/store REJECTED A's write: StaleTokenError/);
        expect(output).toMatch(/store ACCEPTED A's write with old token/);
        expect(output).toContain("A's stale write was rejected; B's data survived.");
        expect(code, output).toBe(0);
      },
      60_000,
    );
  }
});
