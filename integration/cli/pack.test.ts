/**
 * The package as users get it: `pnpm pack` of @leasehold/core, @leasehold/cron and @leasehold/cli
 * (which turns their workspace: ranges into versions), `npm install` of the tarballs in an empty directory
 * (dependencies come from the npm registry), then `npx leasehold`. Takes about 15 s, most of it
 * npm install.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import { cleanUpAfter } from './harness.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'leasehold-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function sh(command: string, args: string[], cwd: string, timeout = 120_000) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} (in ${cwd}) exited ${result.status ?? result.signal}: ${result.stderr}${result.stdout}`,
    );
  }
  return result.stdout;
}

it(
  'npx leasehold works from the packed tarballs installed in an empty directory',
  { timeout: 180_000 },
  () => {
    const tarballs = join(work, 'tarballs');
    const app = join(work, 'app');
    for (const pkg of ['core', 'cron', 'cli']) {
      sh('pnpm', ['pack', '--pack-destination', tarballs], join(root, 'packages', pkg));
    }
    const files = readdirSync(tarballs).map((f) => join(tarballs, f));
    expect(files.map((f) => f.replace(/.*\//, '')).sort()).toEqual([
      'leasehold-cli-0.1.0.tgz',
      'leasehold-core-0.1.0.tgz',
      'leasehold-cron-0.1.0.tgz',
    ]);
    const listing = sh('tar', ['tzf', files.find((f) => f.includes('-cli-'))!], work);
    expect(listing).toContain('package/README.md');
    expect(listing).toContain('package/dist/keeper.js');
    expect(listing).not.toMatch(/\.test\./);

    mkdirSync(app);
    sh('npm', ['init', '-y'], app);
    sh('npm', ['install', '--no-audit', '--no-fund', ...files], app, 170_000);

    const help = sh('npx', ['--no-install', 'leasehold', '--help'], app);
    expect(help).toMatch(/^Usage: leasehold \[options\] \[command\]/);
    expect(sh('npx', ['--no-install', 'leasehold', 'run', '--help'], app)).toContain('Examples:');

    // The installed command runs one under a lock (its keeper ships with it).
    const prefix = cleanUpAfter(uniquePrefix('cli-pack'));
    const out = sh(
      'npx',
      [
        '--no-install',
        'leasehold',
        'run',
        '--endpoints',
        sharedEndpoints().join(','),
        '--lock-prefix',
        prefix,
        '--lock',
        'packed',
        '--',
        process.execPath,
        '-e',
        'console.log(`token ${process.env.LEASEHOLD_TOKEN}`)',
      ],
      app,
    );
    expect(out).toMatch(/^token \d+\n$/);
  },
);
