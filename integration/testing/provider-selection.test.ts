import { execFile } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
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
        expect(message).toMatch(/pnpm add -D testcontainers@~12\.0\.4/);
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
