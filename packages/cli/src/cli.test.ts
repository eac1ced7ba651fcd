import { AuthError, ConnectError, isInvalidArgumentError } from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { errorText, main } from './cli.js';
import { CliError, exitCodes } from './exit-codes.js';

/** Runs leasehold with `args`; what it wrote and its exit code. */
async function run(...args: string[]) {
  let stdout = '';
  let stderr = '';
  const stream = (append: (s: string) => void) =>
    ({
      isTTY: false,
      columns: 80,
      write: (s: string, cb?: (err?: Error | null) => void) => (append(s), cb?.(), true),
    }) as unknown as NodeJS.WriteStream;
  const code = await main(['node', 'leasehold', ...args], {
    stdout: stream((s) => (stdout += s)),
    stderr: stream((s) => (stderr += s)),
  });
  return { code, stdout, stderr };
}

/** stderr must be exactly one line starting with `prefix`. */
function oneLine(stderr: string, prefix: string): string {
  expect(stderr.endsWith('\n')).toBe(true);
  expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(stderr.startsWith(prefix)).toBe(true);
  return stderr.trimEnd();
}

describe('help', () => {
  it.each(['run', 'elect', 'observe', 'inspect', 'unlock'])(
    '%s --help shows usage, the connection options and examples, and exits 0',
    async (command) => {
      const { code, stdout, stderr } = await run(command, '--help');
      expect(code).toBe(0);
      expect(stderr).toBe('');
      expect(stdout).toMatch(new RegExp(`^Usage: leasehold ${command} `));
      expect(stdout).toContain('Connection options:');
      expect(stdout).toContain('--endpoints <urls>');
      expect(stdout.replace(/\s+/g, ' ')).toContain('(env: ETCD_ENDPOINTS)');
      expect(stdout).toMatch(/Examples:\n[\s\S]*^ {2}leasehold /m);
    },
  );

  it.each(['run', 'elect', 'observe', 'inspect', 'unlock'])(
    'help %s prints the same help as --help, on stdout, and exits 0',
    async (command) => {
      const viaHelp = await run('help', command);
      const viaFlag = await run(command, '--help');
      expect(viaHelp).toEqual({ code: 0, stdout: viaFlag.stdout, stderr: '' });
    },
  );

  it('help alone prints the overview on stdout and exits 0', async () => {
    const { code, stdout, stderr } = await run('help');
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toMatch(/^Usage: leasehold /);
  });

  it('leasehold --help lists every command', async () => {
    const { code, stdout } = await run('--help');
    expect(code).toBe(0);
    for (const command of ['run', 'elect', 'observe', 'inspect', 'unlock']) {
      expect(stdout).toMatch(new RegExp(`^ {2}${command} `, 'm'));
    }
  });

  it('--version prints the package version', async () => {
    const { code, stdout } = await run('--version');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });
});

describe('bad flags: one line on stderr, exit 64, nothing run', () => {
  it.each([
    [
      ['run', '--', 'true'],
      /^leasehold run: required option '--lock <name>' not specified \(leasehold run --help shows usage\)$/,
    ],
    [['run', '--lock', 'x'], /^leasehold run: missing required argument 'command'/],
    [
      ['run', '--lock', 'x', 'echo', '-n', 'hi'],
      /unknown option '-n'; put the command to run after --/,
    ],
    [
      ['run', '--lock', 'x', '--ttl', '1', '--', 'true'],
      /^leasehold: --ttl must be a whole number of seconds from 2/,
    ],
    [
      ['run', '--lock', 'x', '--wait-timeout', 'soon', '--', 'true'],
      /^leasehold: --wait-timeout must be a whole number of milliseconds/,
    ],
    [
      ['run', '--lock', 'x', '--no-wait', '--wait-timeout', '5', '--', 'true'],
      /^leasehold: --wait-timeout and --no-wait exclude each other/,
    ],
    [['run', '--lock', 'x', '--grace', '-1', '--', 'true'], /^leasehold: --grace must be/],
    [
      ['run', '--lock', 'x', '--endpoints', 'ftp://h:1', '--', 'true'],
      /^leasehold: --endpoints "ftp:\/\/h:1" has scheme ftp; only http and https are allowed/,
    ],
    [
      ['run', '--lock', 'x', '--lock-prefix', '/a/', '--election-prefix', '/a/b/', '--', 'true'],
      /^leasehold: --election-prefix must be a prefix that neither contains nor is contained in lockPrefix/,
    ],
    [
      ['run', '--lock', 'x', '--cacert', '/nonexistent/ca.pem', '--', 'true'],
      /^leasehold: --cacert "\/nonexistent\/ca.pem" cannot be read \(ENOENT\)$/,
    ],
    [
      ['run', '--lock', 'x', '--user', 'u', '--', 'true'],
      /^leasehold: --user "u" needs a password/,
    ],
    [['elect', 'e'], /^leasehold elect: missing required argument 'command'/],
    [['elect', 'e', '--no-wait', '--', 'true'], /^leasehold elect: unknown option '--no-wait'/],
    [['observe'], /^leasehold observe: missing required argument 'name'/],
    [['inspect', '--interval', '0'], /^leasehold: --interval must be a whole number/],
    [['inspect', '--json', '--table'], /^leasehold: --json and --table exclude each other/],
    [
      ['inspect', '--interval', '500'],
      /^leasehold: --interval 500 sets how often --watch refreshes: add --watch, or leave --interval out$/,
    ],
    [['unlock', 'x'], /^leasehold unlock: required option '--key <key>' not specified/],
    [
      ['unlock', 'x', '--key', 'ab'],
      /^leasehold: unlock deletes a key: pass --yes to confirm when stdin is not a terminal$/,
    ],
    [['lock', 'x'], /^leasehold: unknown command 'lock'/],
  ])('%j', async (args, pattern) => {
    const { code, stdout, stderr } = await run(...args);
    expect(stdout).toBe('');
    expect(oneLine(stderr, 'leasehold')).toMatch(pattern);
    expect(code).toBe(exitCodes.usage);
  });

  it('suggests the flag that was probably meant', async () => {
    const { code, stderr } = await run('run', '--lock', 'x', '--tll', '5', '--', 'true');
    expect(oneLine(stderr, 'leasehold run:')).toMatch(
      /unknown option '--tll' \(Did you mean --ttl\?\)/,
    );
    expect(code).toBe(exitCodes.usage);
  });
});

describe('main() called wrong by a program that embeds it', () => {
  const io = { stdout: process.stdout, stderr: process.stderr };
  it.each([['run --lock x'], [undefined], [['node', 'leasehold', 5]], [{}]])(
    'refuses argv %j with InvalidArgumentError',
    async (argv) => {
      await expect(main(argv as never, io)).rejects.toSatisfy(
        (err) =>
          isInvalidArgumentError(err) &&
          /^argv must be an array of strings, as process.argv/.test(err.message),
      );
    },
  );
  it.each([['stdout'], [null], [{ stdout: process.stdout }], [{ stdout: 1, stderr: 2 }]])(
    'refuses io %j with InvalidArgumentError',
    async (bad) => {
      await expect(main(['node', 'leasehold', '--version'], bad as never)).rejects.toSatisfy(
        (err) =>
          isInvalidArgumentError(err) &&
          /^io must be an object \{ stdout, stderr \} of writable streams, got /.test(err.message),
      );
    },
  );
});

describe('connection flags before the command name', () => {
  it.each([
    [['--endpoints', 'ftp://h:1', 'run', '--lock', 'x', '--', 'true']],
    [['--endpoints', 'ftp://h:1', 'inspect']],
    [['--endpoints=ftp://h:1', 'observe', 'e']],
    [['--debug', '--endpoints', 'ftp://h:1', 'unlock', 'x', '--key', 'ab', '--yes']],
  ])('%j: read as if they came after it', async (args) => {
    const { code, stderr } = await run(...args);
    // (With --debug, a line saying where it connects comes first.)
    expect(stderr.split('\n').find((line) => !line.startsWith('leasehold: debug:'))).toMatch(
      /^leasehold: --endpoints "ftp:\/\/h:1" has scheme ftp; only http and https are allowed/,
    );
    expect(code).toBe(exitCodes.usage);
  });

  it('after the command name, a flag wins over the same flag before it', async () => {
    const { stderr } = await run(
      '--endpoints',
      'ftp://before:1',
      'inspect',
      '--endpoints',
      'ftp://after:1',
    );
    expect(oneLine(stderr, 'leasehold')).toMatch(/"ftp:\/\/after:1"/);
  });

  it("nothing after -- is read: it is the command's", async () => {
    const { stderr } = await run(
      '--endpoints',
      'ftp://ours:1',
      'run',
      '--lock',
      'x',
      '--',
      'sh',
      '--endpoints',
      'ftp://theirs:1',
    );
    expect(oneLine(stderr, 'leasehold')).toMatch(/"ftp:\/\/ours:1"/);
  });
});

describe('errors', () => {
  it('are one line without a stack trace', () => {
    const err = new ConnectError(
      'could not reach etcd at http://h:1 within 500 ms (dialTimeoutMs): x',
      [],
    );
    expect(errorText(err, false)).toBe(
      'leasehold: could not reach etcd at http://h:1 within 500 ms (--dial-timeout): x\n',
    );
  });
  it('keep multi-line messages on one line', () => {
    expect(errorText(new AuthError('refused\n  check the user'), false)).toBe(
      'leasehold: refused check the user\n',
    );
  });
  it('say when they are unexpected', () => {
    expect(errorText(new TypeError('x is undefined'), false)).toBe(
      'leasehold: x is undefined (an unexpected error: run with --debug for details)\n',
    );
  });
  it('carry the stack and causes with --debug', () => {
    const text = errorText(new CliError('outer', 69, { cause: new Error('inner') }), true);
    expect(text.split('\n')[0]).toBe('leasehold: outer');
    expect(text).toMatch(/CliError: outer\n\s+at /);
    expect(text).toMatch(/Error: inner\n\s+at /);
  });
});
