/**
 * leasehold on a terminal, in a pseudo-terminal made by util-linux `script`: the status line
 * while waiting, Ctrl-C while the command runs, the live `inspect --watch` table, and `unlock`'s
 * confirmation prompt. Keys typed are written to script's stdin, which it passes to the terminal.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect } from '@leasehold/core';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { bin, child, cleanUpAfter, Cli, Probe } from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());
const haveScript = spawnSync('script', ['--version']).status === 0;
if (!haveScript) console.log('[cli tty] skipped: util-linux script not found');

/** Carriage return + erase line, and cursor home + clear screen, as regular expressions. */
const ERASE = '\\r\\x1b\\[2K';
const CLEAR = '\\x1b\\[H\\x1b\\[2J';

const quote = (w: string) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);

/** leasehold with `args` on a terminal of its own. */
class Terminal {
  output = '';
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;

  constructor(args: string[], env: Record<string, string> = {}) {
    const command = [process.execPath, bin, ...args].map(quote).join(' ');
    this.proc = spawn('script', ['-qfec', command, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, COLUMNS: '160', LINES: '40', ...env },
    });
    terminals.add(this);
    this.proc.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    this.exited = new Promise((resolve) =>
      this.proc.once('close', (code) => {
        terminals.delete(this);
        resolve(code);
      }),
    );
  }

  type(keys: string): void {
    this.proc.stdin!.write(keys);
  }

  shows(text: string | RegExp, what: string): Promise<true> {
    const has = () =>
      typeof text === 'string' ? this.output.includes(text) : text.test(this.output);
    return waitFor(() => has() || undefined, {
      what: `${what}; screen so far: ${JSON.stringify(this.output)}`,
    });
  }
}
const terminals = new Set<Terminal>();
afterEach(async () => {
  const left = [...terminals];
  for (const t of left) t.proc.kill('SIGKILL');
  await Promise.all(left.map((t) => t.exited));
});

describe.skipIf(!haveScript)('on a terminal', () => {
  it('run shows who holds the lock while waiting, then the token; Ctrl-C reaches the command once; quiet without a terminal', async () => {
    const lockPrefix = cleanUpAfter(uniquePrefix('cli-tty-run'));
    const connection = ['--endpoints', endpoints.join(','), '--lock-prefix', lockPrefix];
    await using probe = await Probe.start();
    await using client = await connect({ endpoints, lockPrefix });
    const held = await client.acquire('deploy', { value: 'sdk-holder' });

    // Without a terminal: nothing on stderr while waiting.
    const quiet = new Cli(
      ['run', '--lock', 'deploy', ...connection, '--', ...child()],
      probe.env('quiet'),
    );
    await waitFor(async () => (await admin.getAll().prefix(lockPrefix).keys()).length === 2, {
      what: 'the quiet one queued',
    });
    const term = new Terminal(
      ['run', '--lock', 'deploy', ...connection, '--', ...child()],
      probe.env('tty'),
    );
    await term.shows(
      new RegExp(
        `waiting for lock "deploy": held by "sdk-holder" \\(token ${held.token}\\)[^\\r]*; 2 ahead of us in the queue`,
      ),
      'the status line',
    );
    // Redrawn in place (carriage return, erase line) as time passes.
    await term.shows(
      new RegExp(
        `${ERASE}waiting for lock "deploy": held by "sdk-holder" \\(token \\d+\\) for at least 1s`,
      ),
      'a redraw',
    );
    await held.release();

    // quiet joined first, so it runs first; the terminal one follows.
    const first = await probe.started('quiet');
    first.exit(0);
    expect((await quiet.exit()).code).toBe(0);
    expect(quiet.stderr).toBe('');
    const c = await probe.started('tty');
    await term.shows(
      new RegExp(`leasehold: lock "deploy": token ${c.token}; running `),
      'the token line',
    );
    term.type('\x03'); // Ctrl-C: the terminal signals leasehold, which forwards it
    expect(await term.exited).toBe(130);
    expect(c.signals()).toEqual(['SIGINT']);
  });

  it('run --permits shows, while waiting, the semaphore with its limit, its oldest holder and our place in its queue', async () => {
    const lockPrefix = cleanUpAfter(uniquePrefix('cli-tty-permits'));
    const connection = ['--endpoints', endpoints.join(','), '--lock-prefix', lockPrefix];
    const args = ['run', '--permits', '2', '--lock', 'api', ...connection, '--', ...child()];
    await using probe = await Probe.start();
    await using client = await connect({ endpoints, lockPrefix });
    const held = [
      await client.acquirePermit('api', { permits: 2, value: 'sdk-0' }),
      await client.acquirePermit('api', { permits: 2, value: 'sdk-1' }),
    ];
    // A plain lock of the same name, contended: its queue is not the semaphore's.
    const lock = await client.acquire('api', { value: 'plain' });
    const queued = (n: number) =>
      waitFor(
        async () => (await admin.getAll().prefix(`${lockPrefix}api%sem/`).keys()).length === n,
        {
          what: `${n} keys in the semaphore's queue`,
        },
      );
    const quiet = new Cli(args, probe.env('quiet'));
    await queued(3);
    const term = new Terminal(args, probe.env('tty'));
    await term.shows(
      new RegExp(
        `waiting for a permit of semaphore "api" \\(2 permits\\): held by "sdk-0" \\(token ${held[0]!.token}\\)[^\\r]*; 3 ahead of us in the queue`,
      ),
      'the status line',
    );
    await lock.release();
    for (const p of held) await p.release();
    const first = await probe.started('quiet');
    const second = await probe.started('tty');
    await term.shows(
      new RegExp(`leasehold: a permit of semaphore "api": token ${second.token}; running `),
      'the token line',
    );
    first.exit(0);
    second.exit(0);
    expect((await quiet.exit()).code).toBe(0);
    expect(await term.exited).toBe(0);
  });

  it('inspect --watch redraws a table until Ctrl-C', async () => {
    const lockPrefix = cleanUpAfter(uniquePrefix('cli-tty-inspect'));
    await using client = await connect({ endpoints, lockPrefix });
    const lock = await client.acquire('nightly', { value: 'host-b' });
    const term = new Terminal([
      'inspect',
      '--watch',
      '--interval',
      '200',
      '--endpoints',
      endpoints.join(','),
      '--lock-prefix',
      lockPrefix,
    ]);
    await term.shows(new RegExp(`${CLEAR}.*Ctrl-C to stop`), 'the first screen');
    await term.shows(
      new RegExp(
        `nightly +"host-b" +${lock.token} +${lock.session.leaseId.toString(16)} +\\d+s +0`,
      ),
      'the lock row',
    );
    const screens = () => term.output.split('\x1b[2J').length - 1;
    await waitFor(() => screens() >= 3, { what: 'redraws' });
    term.type('\x03');
    expect(await term.exited).toBe(130);
    await lock.release();
  });

  it("unlock asks first: 'n' removes nothing (exit 1), 'y' removes the key", async () => {
    const lockPrefix = cleanUpAfter(uniquePrefix('cli-tty-unlock'));
    const connection = ['--endpoints', endpoints.join(','), '--lock-prefix', lockPrefix];
    await using client = await connect({ endpoints, lockPrefix });
    const lock = await client.acquire('deploy', { value: 'gone-host:1' });
    const hex = lock.session.leaseId.toString(16);

    const no = new Terminal(['unlock', 'deploy', '--key', hex, ...connection]);
    await no.shows(
      `Delete ${lock.key} (lock "deploy", the holder, value "gone-host:1", token ${lock.token}, lease ${hex})?`,
      'the question',
    );
    await no.shows('[y/N] ', 'the prompt');
    no.type('n\r');
    expect(await no.exited).toBe(1);
    expect(no.output).toContain('nothing removed');
    expect(lock.isHeld).toBe(true);

    const yes = new Terminal(['unlock', 'deploy', '--key', hex, ...connection]);
    await yes.shows('[y/N] ', 'the prompt');
    yes.type('y\r');
    expect(await yes.exited).toBe(0);
    expect(yes.output).toContain(`removed ${lock.key}`);
    await waitFor(() => !lock.isHeld, { what: 'the holder lost its lock' });
  });
});
