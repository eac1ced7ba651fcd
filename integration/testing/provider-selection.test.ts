import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { resolveEtcdProvider, startEtcd, type EtcdProviderName } from '@leasehold/testing';
import { describe, expect, inject, it } from 'vitest';
import { deadlineIn, etcdClient } from '../setup/etcd.js';

async function available(provider: EtcdProviderName): Promise<boolean> {
  try {
    await resolveEtcdProvider({ provider });
    return true;
  } catch (error) {
    console.warn(
      `[leasehold] ${provider} provider missing: ${error instanceof Error ? error.message : String(error)}`,
    );
    return false;
  }
}

const hasContainer = await available('container');
const hasBinary = await available('binary');
const distDir = fileURLToPath(new URL('../../packages/testing/dist/', import.meta.url));

/** Runs `script` (an ES module) with env overrides; resolves with its stdout, parsed as JSON. */
async function runNode(cwd: string, script: string, env: NodeJS.ProcessEnv): Promise<unknown> {
  await writeFile(join(cwd, 'probe.mjs'), script);
  const { stdout } = await promisify(execFile)(process.execPath, ['probe.mjs'], {
    cwd,
    env,
    timeout: 60_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop() ?? 'null');
}

describe('provider selection without testcontainers', () => {
  it.skipIf(!hasContainer || !hasBinary)(
    "'auto' and 'local' fall back to the binary although an engine answers; 'container' names the missing package",
    async () => {
      // A copy of the built package where `import('testcontainers')` cannot resolve.
      const dir = await mkdtemp(join(tmpdir(), 'leasehold-no-tc-'));
      try {
        await cp(distDir, join(dir, 'dist'), { recursive: true });
        await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
        const env = { ...process.env };
        delete env.ETCD_ENDPOINTS;
        delete env.LEASEHOLD_ETCD_PROVIDER;
        // The engine is there: DOCKER_HOST points at the socket the container tests use.
        const result = await runNode(
          dir,
          `
          import { resolveEtcdProvider, startEtcd } from './dist/index.js';
          const out = {};
          out.importable = await import('testcontainers').then(() => true, () => false);
          out.auto = await resolveEtcdProvider();
          out.local = await resolveEtcdProvider({ provider: 'local' });
          const cluster = await startEtcd();
          out.started = cluster.provider;
          await cluster.close();
          out.container = await startEtcd({ provider: 'container' }).then(
            (c) => c.close().then(() => 'started'),
            (e) => ({ name: e.name, code: e.code, message: e.message }),
          );
          console.log(JSON.stringify(out));
          `,
          env,
        );
        expect(result).toMatchObject({
          importable: false,
          auto: 'binary',
          local: 'binary',
          started: 'binary',
          container: { name: 'EtcdHarnessError', code: 'ETCD_UNAVAILABLE' },
        });
        const message = (result as { container: { message: string } }).container.message;
        expect(message).toMatch(/optional peer dependency testcontainers/);
        expect(message).toMatch(/pnpm add -D testcontainers@12\.0\.1/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});

describe('provider selection with a testcontainers that throws on import', () => {
  it.skipIf(!hasContainer || !hasBinary)(
    "'auto' says why it uses the binary (log and one process warning); 'container' rethrows the import error as cause and in the message",
    async () => {
      // What testcontainers 12.0.4 does on Node 20 (its undici 8 needs Node 22): installed, and
      // throwing while it is imported.
      const dir = await mkdtemp(join(tmpdir(), 'leasehold-broken-tc-'));
      try {
        await cp(distDir, join(dir, 'dist'), { recursive: true });
        await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
        const broken = join(dir, 'node_modules', 'testcontainers');
        await mkdir(broken, { recursive: true });
        await writeFile(
          join(broken, 'package.json'),
          JSON.stringify({ name: 'testcontainers', type: 'module', main: 'index.js' }),
        );
        await writeFile(
          join(broken, 'index.js'),
          'throw new TypeError("Cannot read properties of undefined (reading \'bind\')");\n',
        );
        const env = { ...process.env };
        delete env.ETCD_ENDPOINTS;
        delete env.LEASEHOLD_ETCD_PROVIDER;
        const result = await runNode(
          dir,
          `
          import { startEtcd } from './dist/index.js';
          const out = { warnings: [], log: [] };
          process.on('warning', (w) => out.warnings.push({ code: w.code, message: w.message }));
          const log = (line) => { if (line.startsWith('[leasehold/testing]')) out.log.push(line); };
          for (let i = 0; i < 2; i++) {
            const cluster = await startEtcd({ log });
            out.started = cluster.provider;
            await cluster.close();
          }
          out.container = await startEtcd({ provider: 'container' }).then(
            (c) => c.close().then(() => 'started'),
            (e) => ({ code: e.code, message: e.message, cause: e.cause?.message }),
          );
          await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on a tick
          console.log(JSON.stringify(out));
          `,
          env,
        );
        const out = result as {
          started: string;
          warnings: { code: string; message: string }[];
          log: string[];
          container: { code: string; message: string; cause: string };
        };
        expect(out.started).toBe('binary');
        const why =
          /provider 'auto' uses the etcd binary: a container engine answered, but .*TypeError: Cannot read properties of undefined \(reading 'bind'\)/;
        // Once per process as a warning, every time through log, with the provider chosen.
        expect(out.warnings.filter((w) => w.code === 'LEASEHOLD_TESTING_PROVIDER')).toHaveLength(1);
        expect(out.warnings[0]?.message).toMatch(why);
        expect(out.log.filter((l) => why.test(l))).toHaveLength(2);
        expect(
          out.log.filter((l) => /etcd provider: binary \(requested 'auto'\)/.test(l)),
        ).toHaveLength(2);
        expect(out.container.code).toBe('ETCD_UNAVAILABLE');
        expect(out.container.cause).toBe("Cannot read properties of undefined (reading 'bind')");
        expect(out.container.message).toMatch(/installed but throws on import/);
        expect(out.container.message).not.toMatch(
          /cannot be imported \(|Install it in the package/,
        );
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});

describe("provider 'local'", () => {
  it.skipIf(!hasContainer && !hasBinary)(
    'starts a cluster of its own while ETCD_ENDPOINTS points at another one',
    async () => {
      const shared = inject('etcdEndpoints');
      const saved = process.env.ETCD_ENDPOINTS;
      process.env.ETCD_ENDPOINTS = shared.join(',');
      try {
        expect(await resolveEtcdProvider()).toBe('external');
        const expected = hasContainer ? 'container' : 'binary';
        expect(await resolveEtcdProvider({ provider: 'local' })).toBe(expected);

        await using own = await startEtcd({ provider: 'local' });
        expect(own.provider).toBe(expected);
        expect(own.members).toHaveLength(1);
        expect(own.endpoints).not.toEqual(shared);

        const ownClient = etcdClient(own.endpoints);
        const sharedClient = etcdClient(shared);
        try {
          const [a, b] = await Promise.all([
            ownClient.maintenance.status().then((s) => s.header.cluster_id),
            sharedClient.maintenance.status().then((s) => s.header.cluster_id),
          ]);
          expect(a).not.toBe(b);
          await ownClient.put('/local-only').value('1').options(deadlineIn(2000));
        } finally {
          ownClient.close();
          sharedClient.close();
        }
      } finally {
        if (saved === undefined) delete process.env.ETCD_ENDPOINTS;
        else process.env.ETCD_ENDPOINTS = saved;
      }
    },
  );
});
