/**
 * Errors as an operator meets them: one line on stderr, no stack trace unless --debug, and the
 * documented exit code, from the real executable.
 */
import { spawnSync } from 'node:child_process';
import { freePort } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { sharedEndpoints } from '../setup/etcd.js';
import { Cli, now, runCli } from './harness.js';

const endpoints = sharedEndpoints();

function oneLine(stderr: string): string {
  const lines = stderr.split('\n');
  expect(lines, stderr).toHaveLength(2);
  expect(lines[1]).toBe('');
  expect(stderr).not.toMatch(/^\s+at /m);
  return lines[0]!;
}

describe('errors', () => {
  it.each([
    [['run', '--', 'true'], /^leasehold run: required option '--lock <name>' not specified/],
    [
      ['run', '--lock', 'x', '--ttl', '1', '--', 'true'],
      /^leasehold: --ttl must be a whole number of seconds from 2/,
    ],
    [
      ['run', '--lock', 'x', '--no-wait', '--wait-timeout', '10', '--', 'true'],
      /^leasehold: --wait-timeout and --no-wait exclude each other/,
    ],
    [['elect', 'e', '--bogus', '--', 'true'], /^leasehold elect: unknown option '--bogus'/],
    [
      ['inspect', '--lock-prefix', '', '--endpoints', endpoints.join(',')],
      /^leasehold: --lock-prefix must be a non-empty string/,
    ],
    [
      ['observe', 'e', '--endpoints', 'http://127.0.0.1:2379/v3'],
      /^leasehold: --endpoints "http:\/\/127.0.0.1:2379\/v3" has a path/,
    ],
    [
      ['unlock', 'x', '--key', 'ab'],
      /^leasehold: unlock deletes a key: pass --yes to confirm when stdin is not a terminal$/,
    ],
    [['frobnicate'], /^leasehold: unknown command 'frobnicate'/],
  ])('bad flags %j: one line, exit 64', async (args, pattern) => {
    const { code, stdout, stderr } = await runCli(args);
    expect(oneLine(stderr)).toMatch(pattern);
    expect(stdout).toBe('');
    expect(code).toBe(64);
  });

  /**
   * How long a leasehold process takes that does no etcd work (`--version`: the same modules are
   * loaded, the same exit): what a run's wall time may hold besides the dial.
   */
  async function startupMs(): Promise<number> {
    const started = now();
    const { code } = await runCli(['--version']);
    expect(code).toBe(0);
    return now() - started;
  }

  /** The most a 10 ms timer of this process ran late while `work` ran: the machine's wake-up lag. */
  async function withLag<T>(work: () => Promise<T>): Promise<[T, number]> {
    let lagMs = 0;
    let last = now();
    const timer = setInterval(() => {
      const t = now();
      lagMs = Math.max(lagMs, t - last - 10);
      last = t;
    }, 10);
    try {
      return [await work(), lagMs];
    } finally {
      clearInterval(timer);
    }
  }

  const DIAL_MS = 700;
  /** `--call-timeout` bounds one attempt (one endpoint: an attempt may take the whole call). */
  const ATTEMPT_MS = 1_000;

  it.each([
    ['run', '--lock', 'x', '--', 'true'],
    ['elect', 'e', '--', 'true'],
    ['observe', 'e'],
    ['inspect'],
    ['unlock', 'x', '--key', 'ab', '--yes'],
  ])(
    'unreachable etcd (%s): one line naming the endpoint, exit 69 after --dial-timeout',
    async (...args) => {
      const port = await freePort();
      const connection = [
        '--endpoints',
        `http://127.0.0.1:${port}`,
        '--dial-timeout',
        String(DIAL_MS),
        '--call-timeout',
        String(ATTEMPT_MS),
      ];
      // Before "--": what follows it is the command's.
      const dash = args.indexOf('--');
      const withConnection = (extra: string[]) =>
        dash < 0
          ? [...args, ...connection, ...extra]
          : [...args.slice(0, dash), ...connection, ...extra, ...args.slice(dash)];
      const { code, stdout, stderr } = await runCli(withConnection([]));
      expect(oneLine(stderr)).toMatch(
        new RegExp(
          `^leasehold: could not reach etcd at http://127.0.0.1:${port} within ${DIAL_MS} ms \\(--dial-timeout\\)`,
        ),
      );
      expect(stdout).toBe('');
      expect(code).toBe(69);

      // With --debug, leasehold says when its dial starts (the process's own start, the noisy
      // part on a loaded host, 0.3 to 1.6 s measured, is before it). From then to its exit it
      // keeps trying for the whole --dial-timeout: a dial that gave up early was measured here at
      // half of it. Slack: the wake-up lag of this process, which sees both, measured meanwhile.
      const overhead = await startupMs();
      const [[exit, dialFrom], lagMs] = await withLag(async () => {
        const cli = new Cli(withConnection(['--debug']));
        const started = new Promise<number>((resolve) =>
          cli.proc.stderr!.once('data', () => resolve(now())),
        );
        const exited = await cli.exit();
        expect(cli.stderr).toMatch(
          new RegExp(
            `^leasehold: debug: connecting to http://127.0.0.1:${port}, for at most ${DIAL_MS} ms \\(--dial-timeout\\)\n`,
          ),
        );
        return [exited, await started] as const;
      });
      expect(exit.code).toBe(69);
      const dialMs = exit.at - dialFrom;
      const figures = `dial ${Math.round(dialMs)} ms, lag ${Math.round(lagMs)} ms, --version ${Math.round(overhead)} ms`;
      expect(dialMs, figures).toBeGreaterThanOrEqual(DIAL_MS - lagMs);
      // …and at most one attempt more (the one made at the deadline), and the process's exit,
      // which takes no longer than a whole `--version` run.
      expect(dialMs, figures).toBeLessThanOrEqual(DIAL_MS + ATTEMPT_MS + overhead);
    },
  );

  it('never repeats credentials given in --endpoints, in its error or its --debug lines', async () => {
    const port = await freePort();
    const { code, stderr } = await runCli([
      'inspect',
      '--endpoints',
      `http://127.0.0.1:${port}, http://root:hunter2@127.0.0.1:${port}`,
      '--dial-timeout',
      '300',
      '--debug',
    ]);
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/carries credentials/);
    expect(stderr).toMatch(/\*\*\*@127\.0\.0\.1/);
    expect(stderr).not.toMatch(/hunter2/);
  });

  it('--debug adds the stack trace and causes', async () => {
    const port = await freePort();
    const { code, stderr } = await runCli([
      'inspect',
      '--endpoints',
      `127.0.0.1:${port}`,
      '--dial-timeout',
      '300',
      '--debug',
    ]);
    expect(code).toBe(69);
    const lines = stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^leasehold: debug: connecting to 127\.0\.0\.1:\d+, for at most 300 ms/,
    );
    expect(lines[1]).toMatch(/^leasehold: could not reach etcd/);
    expect(lines.length).toBeGreaterThan(3);
    expect(stderr).toMatch(/^ConnectError: could not reach etcd/m);
    expect(stderr).toMatch(/^\s+at /m);
  });
});

describe('@leasehold/core, as the CLI found it', () => {
  // leasehold keeps its process alive while it waits (cli.ts); a plain program does not. While
  // etcd refuses connections, connect() waits between dials on unref'd timers only, so a program
  // whose only work is `await connect()` exits (code 13, "unsettled top-level await") without
  // the ConnectError it should get after dialTimeoutMs.
  it('connect() to an unreachable etcd rejects with ConnectError in a process with nothing else to do', async () => {
    const port = await freePort();
    const program = `
      import { connect } from '@leasehold/core';
      try {
        await connect({ endpoints: 'http://127.0.0.1:${port}', dialTimeoutMs: 500 });
        console.log('connected?');
      } catch (err) {
        console.log(err.code);
      }`;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', program], {
      cwd: new URL('.', import.meta.url),
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect({ status: result.status, stdout: result.stdout.trim() }).toEqual({
      status: 0,
      stdout: 'CONNECT_FAILED',
    });
  });
});

describe('process warnings', () => {
  // An https:// endpoint given as an IP makes the TLS layer emit DEP0123 (ServerName set to an
  // IP); a plain-http etcd then fails the handshake.
  it('https to an IP endpoint of a plain-http etcd: one line, exit 69; --debug shows the warning as one line', async () => {
    const https = endpoints[0]!.replace(/^http:/, 'https:');
    expect(https).toMatch(/^https:\/\/\d+\.\d+\.\d+\.\d+:\d+$/);
    const args = ['inspect', '--endpoints', https, '--dial-timeout', '1000'];
    const plain = await runCli(args);
    // One line that says the endpoint does not speak TLS and what to change.
    expect(plain.stderr.trim().split('\n')).toHaveLength(1);
    expect(plain.stderr).toMatch(
      new RegExp(
        `^leasehold: could not connect to etcd at ${https} within 1000 ms \\(--dial-timeout\\): TLS failed \\(server-not-tls\\): .*use http:// endpoints`,
      ),
    );
    expect(plain.code).toBe(69);
    const debug = await runCli([...args, '--debug']);
    expect(debug.code).toBe(69);
    expect(debug.stderr).toMatch(/^leasehold: warning: DeprecationWarning \[DEP0123\]: [^\n]+$/m);
    expect(debug.stderr).not.toMatch(/^\(node:\d+\)/m);
  });
});
