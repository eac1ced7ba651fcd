/**
 * A newcomer's first hour, as a test: `pnpm pack` of every package, a fresh `npm init -y` project
 * made an ES module, `npm install` of the tarballs (dependencies from the registry) with
 * TypeScript and the types the READMEs name, and the tsconfig core's Install section gives. Then
 * every ```ts block of the package READMEs compiles with `tsc --strict --module nodenext`, the
 * CommonJS claims hold, and the quick starts and fenced writes run as the plain ES modules tsc
 * emits, against real etcd (a cluster of this file's own, so the snippets' fixed names meet
 * nobody) and PostgreSQL / Redis when they answer. Most of its time (about a minute with a warm
 * npm cache) is npm install.
 */
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEtcd, type EtcdCluster } from '@leasehold/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient } from '../setup/etcd.js';
import { describeWith, findPostgres, findRedis, ownSchema } from '../fence/stores.js';
import { allSnippets, installFiles, locateErrors, PACKAGES, type Snippet } from './snippets.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'leasehold-newcomer-'));
const tarballs = join(work, 'tarballs');
const app = join(work, 'app');
afterAll(() => rmSync(work, { recursive: true, force: true }));

// What the READMEs' Install sections tell a newcomer to add besides the packages: TypeScript
// (the version npm picks today), Node 20's types, pg and its types, ioredis, node-cron, etcd3
// (testing's quick start), testcontainers in its peer range, vitest (fence's conformance suite).
const EXTRAS = [
  `typescript@${process.env.NEWCOMER_TYPESCRIPT ?? 'latest'}`,
  '@types/node@20',
  '@types/pg',
  'pg',
  'ioredis',
  'node-cron',
  'etcd3',
  'testcontainers@12.0.1',
  'vitest',
];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end or its deadline (then it is killed and the run fails). */
function run(
  command: string,
  args: readonly string[],
  cwd: string,
  timeoutMs: number,
  env: Record<string, string> = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`${command} ${args.join(' ')} ran past ${timeoutMs} ms:\n${stderr}${stdout}`),
      );
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function ok(
  command: string,
  args: readonly string[],
  cwd: string,
  timeoutMs: number,
  env?: Record<string, string>,
): Promise<string> {
  const result = await run(command, args, cwd, timeoutMs, env);
  if (result.code !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} (in ${cwd}) exited ${result.code}:\n${result.stderr}${result.stdout}`,
    );
  }
  return result.stdout;
}

const { snippets, skipped } = allSnippets();
const postgres = await findPostgres();
const redisFound = await findRedis();

/** The one snippet under `heading` (start of it) in `pkg`'s README. */
function snippet(pkg: Snippet['pkg'], heading: string): Snippet {
  const found = snippets.filter((s) => s.pkg === pkg && s.heading.startsWith(heading));
  if (found.length !== 1) {
    throw new Error(
      `expected one \`\`\`ts block under "${heading}" in ${pkg}'s README, found ${found.length}`,
    );
  }
  return found[0]!;
}

/** Runs a compiled snippet with Node, as the ES module tsc emitted. */
function runSnippet(s: Snippet, env: Record<string, string>): Promise<Run> {
  return run(process.execPath, [join('dist', s.file.replace(/\.ts$/, '.js'))], app, 60_000, env);
}

describe('a newcomer: packed tarballs in a fresh npm project', () => {
  let compiled: Run;

  beforeAll(async () => {
    for (const pkg of PACKAGES) {
      await ok(
        'pnpm',
        ['pack', '--pack-destination', tarballs],
        join(root, 'packages', pkg),
        60_000,
      );
    }
    mkdirSync(app);
    await ok('npm', ['init', '-y'], app, 30_000);
    // What core's Install section says to set: an ES module.
    const { packageJson, tsconfig } = installFiles();
    await ok('npm', ['pkg', 'set', `type=${String(packageJson.type)}`], app, 30_000);
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
    const files = readdirSync(tarballs).map((f) => join(tarballs, f));
    await ok('npm', ['install', '--no-audit', '--no-fund', ...files, ...EXTRAS], app, 240_000);

    mkdirSync(join(app, 'src'));
    for (const s of snippets) writeFileSync(join(app, 'src', s.file), s.code);
    compiled = await run(
      'npx',
      ['--no-install', 'tsc', '-p', '.', '--strict', '--module', 'nodenext'],
      app,
      120_000,
    );
  }, 420_000);

  it('the tarballs ship dist and the README, with metadata, but no build info or source maps', async () => {
    for (const pkg of PACKAGES) {
      const tgz = readdirSync(tarballs).find((f) => f.startsWith(`leasehold-${pkg}-`))!;
      const listing = (await ok('tar', ['tzf', join(tarballs, tgz)], work, 30_000)).split('\n');
      expect(listing, pkg).toContain('package/README.md');
      expect(listing, pkg).toContain('package/dist/index.d.ts');
      expect(
        listing.filter((f) => /\.tsbuildinfo$|\.map$|\.test\.|^package\/src\//.test(f)),
        pkg,
      ).toEqual([]);
      const manifest = JSON.parse(
        readFileSync(join(app, 'node_modules', '@leasehold', pkg, 'package.json'), 'utf8'),
      ) as Record<string, unknown>;
      for (const field of [
        'repository',
        'homepage',
        'bugs',
        'keywords',
        'sideEffects',
        'main',
        'types',
      ]) {
        expect(manifest[field], `${pkg}: ${field}`).toBeDefined();
      }
    }
  });

  it('has something to check: every package README has ```ts blocks, and skips say why', () => {
    for (const pkg of PACKAGES)
      expect(
        snippets.some((s) => s.pkg === pkg),
        pkg,
      ).toBe(true);
    for (const s of skipped) expect(s.reason.length, `${s.readme}:${s.line}`).toBeGreaterThan(10);
  });

  it('every ```ts block of the package READMEs compiles as written (tsc --strict --module nodenext)', () => {
    const errors = locateErrors(`${compiled.stdout}${compiled.stderr}`, snippets);
    expect(errors).toEqual([]);
    expect(compiled.code).toBe(0);
  });

  it('require() of every entry point works from CommonJS (Node >= 20.19)', async () => {
    const cjs = join(app, 'cjs');
    mkdirSync(cjs, { recursive: true });
    writeFileSync(join(cjs, 'package.json'), '{ "type": "commonjs" }\n');
    const entries = PACKAGES.flatMap((pkg) => {
      const manifest = JSON.parse(
        readFileSync(join(app, 'node_modules', '@leasehold', pkg, 'package.json'), 'utf8'),
      ) as { exports: Record<string, unknown> };
      return Object.keys(manifest.exports).map((sub) => `@leasehold/${pkg}${sub.slice(1)}`);
    });
    writeFileSync(
      join(cjs, 'require-all.js'),
      `for (const name of ${JSON.stringify(entries)}) {\n` +
        '  const exported = Object.keys(require(name));\n' +
        "  if (exported.length === 0) throw new Error(name + ' exports nothing');\n" +
        "  console.log(name + ': ' + exported.length);\n}\n",
    );
    const out = await ok(process.execPath, ['require-all.js'], cjs, 30_000);
    expect(out.trim().split('\n')).toHaveLength(entries.length);
  });

  it('CommonJS TypeScript imports the packages with module nodenext, and node16 refuses (TS1479), as the README says', async () => {
    const cjs = join(app, 'cjs');
    mkdirSync(cjs, { recursive: true });
    writeFileSync(join(cjs, 'package.json'), '{ "type": "commonjs" }\n');
    writeFileSync(
      join(cjs, 'main.ts'),
      "import { connect } from '@leasehold/core';\nimport { withFence } from '@leasehold/fence/postgres';\nexport const used = [connect, withFence];\n",
    );
    const tsc = (module: string) =>
      run(
        'npx',
        [
          '--no-install',
          'tsc',
          '--ignoreConfig',
          '--strict',
          '--module',
          module,
          '--target',
          'es2022',
          '--types',
          'node',
          '--noEmit',
          'cjs/main.ts',
        ],
        app,
        60_000,
      );
    // --ignoreConfig is TypeScript 6's; 5.x has no tsconfig question for files on the command line.
    let nodenext = await tsc('nodenext');
    const legacy = /ignoreConfig/.test(nodenext.stdout + nodenext.stderr);
    const compile = legacy
      ? (module: string) =>
          run(
            'npx',
            [
              '--no-install',
              'tsc',
              '--strict',
              '--module',
              module,
              '--target',
              'es2022',
              '--types',
              'node',
              '--noEmit',
              'cjs/main.ts',
            ],
            app,
            60_000,
          )
      : tsc;
    if (legacy) nodenext = await compile('nodenext');
    expect(nodenext.stdout + nodenext.stderr).toBe('');
    const node16 = await compile('node16');
    expect(node16.stdout).toMatch(/cjs\/main\.ts\(1,25\): error TS1479/);
  });

  describe('the quick starts and fenced writes run in plain ESM against real servers', () => {
    let etcd: EtcdCluster;
    let env: Record<string, string>;
    beforeAll(async () => {
      // A cluster of its own: the snippets use the default prefixes and fixed names.
      etcd = await startEtcd({ provider: 'local' });
      env = { ETCD_ENDPOINTS: etcd.endpoints.join(',') };
    }, 120_000);
    afterAll(async () => {
      await etcd?.close();
    });

    const read = async (key: string) => {
      const client = etcdClient(etcd.endpoints);
      try {
        return await client.get(key).string();
      } finally {
        client.close();
      }
    };

    it("core's quick start takes the lock and writes under it", async () => {
      const result = await runSnippet(snippet('core', 'Quick start'), env);
      expect(result.code, result.stderr + result.stdout).toBe(0);
      expect(await read('/reports/daily/status')).toMatch(/^running under token \d+$/);
    });

    it("core's migration from etcd3 holds both locks, the old one first", async () => {
      const result = await runSnippet(snippet('core', 'Moving from etcd3'), env);
      expect(result.code, result.stderr + result.stdout).toBe(0);
      expect(result.stdout).toMatch(/^invoice 42 under both locks, token \d+$/m);
    });

    it("fence's etcd snippet writes through fencedTxn under the lock's token", async () => {
      const result = await runSnippet(snippet('fence', '`fencedTxn'), env);
      expect(result.code, result.stderr + result.stdout).toBe(0);
      expect(JSON.parse((await read('/app/config')) ?? 'null')).toEqual({ replicas: 3 });
    });

    describeWith(postgres, 'PostgreSQL', (url) => {
      const schema = ownSchema(url, 'newcomer');

      it("fence's quick start, then its fencedQuery snippet, on the same invoice", async () => {
        const pgEnv = { ...env, DATABASE_URL: schema.url };
        const quick = await runSnippet(snippet('fence', 'Quick start'), pgEnv);
        expect(quick.code, quick.stderr + quick.stdout).toBe(0);
        expect(quick.stdout).toBe('invoice 42 sent\n');
        const query = await runSnippet(snippet('fence', '`fencedQuery'), pgEnv);
        expect(query.code, query.stderr + query.stdout).toBe(0);
        expect(query.stdout).toMatch(/^1 invoice marked sent under token \d+$/m);
        const { rows } = await schema
          .admin()
          .query<{ sent: boolean; token: string }>(
            `SELECT i.sent, f.token::text FROM "${schema.name}".invoices i, "${schema.name}".leasehold_fence f WHERE i.id = 42 AND f.resource = 'invoice-42'`,
          );
        expect(rows).toEqual([{ sent: true, token: /token (\d+)/.exec(query.stdout)![1] }]);
      });
    });

    describeWith(redisFound, 'Redis', (url) => {
      // The snippet's keys are fixed: a database of its own, chosen per run, keeps them apart
      // from other tests and runs; they are deleted before and after.
      const inDb = new URL(url);
      inDb.pathname = `/${randomInt(1, 16)}`;
      const keys = ['{report}', '{report}:fence', '{report}:writes'];
      let redis: Redis;
      beforeAll(async () => {
        redis = new Redis(inDb.toString(), { lazyConnect: true, maxRetriesPerRequest: 1 });
        await redis.connect();
        await redis.del(...keys);
      });
      afterAll(async () => {
        await redis?.del(...keys);
        await redis?.quit();
      });

      it("fence's Redis snippet sets and counts under the lock's token", async () => {
        const result = await runSnippet(snippet('fence', '`fencedExec'), {
          ...env,
          REDIS_URL: inDb.toString(),
        });
        expect(result.code, result.stderr + result.stdout).toBe(0);
        expect(result.stdout).toBe('report written 1 times\n');
        expect(await redis.get('{report}')).toBe('v1');
      });
    });
  });
});
