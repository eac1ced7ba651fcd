import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  addConnectionOptions,
  connectMessage,
  connectOptions,
  DEFAULT_ENDPOINTS,
  withFlagNames,
  type ConnectionFlags,
} from './connection.js';
import { CliError, exitCodes } from './exit-codes.js';

const files: Record<string, string> = {
  '/ca.pem': 'CA',
  '/cert.pem': 'CERT',
  '/key.pem': 'KEY',
  '/pw': 's3cret\n',
};
const read = (path: string) => {
  if (path in files) return Buffer.from(files[path]!);
  throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
};
const resolve = (flags: ConnectionFlags, env: NodeJS.ProcessEnv = {}) =>
  connectOptions(flags, env, read);

function usage(fn: () => unknown, pattern: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(CliError);
  expect((thrown as CliError).exitCode).toBe(exitCodes.usage);
  expect((thrown as Error).message).toMatch(pattern);
}

/** The flags commander parses from `args` with `env` as the environment. */
function parse(args: string[], env: Record<string, string> = {}): ConnectionFlags {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const command = addConnectionOptions(new Command('x')).exitOverride();
    command.parse(args, { from: 'user' });
    return command.opts<ConnectionFlags>();
  } finally {
    for (const name of Object.keys(env)) delete process.env[name];
    Object.assign(process.env, saved);
  }
}

describe('connection flags → connect() options', () => {
  it('defaults to etcd on localhost, like etcdctl', () => {
    expect(resolve({})).toEqual({ endpoints: DEFAULT_ENDPOINTS });
  });

  it('maps every flag onto its SDK option', () => {
    const flags = parse([
      '--endpoints',
      'https://a:2379,https://b:2379',
      '--lock-prefix',
      '/l/',
      '--election-prefix',
      '/e/',
      '--cacert',
      '/ca.pem',
      '--cert',
      '/cert.pem',
      '--cert-key',
      '/key.pem',
      '--user',
      'ops',
      '--password-file',
      '/pw',
      '--dial-timeout',
      '1500',
      '--call-timeout',
      '2500',
    ]);
    expect(resolve(flags)).toEqual({
      endpoints: 'https://a:2379,https://b:2379',
      lockPrefix: '/l/',
      electionPrefix: '/e/',
      dialTimeoutMs: 1500,
      callTimeoutMs: 2500,
      tls: {
        caCert: Buffer.from('CA'),
        clientCert: Buffer.from('CERT'),
        clientKey: Buffer.from('KEY'),
      },
      auth: { username: 'ops', password: 's3cret' },
    });
  });

  it('reads the environment variables of the flags', () => {
    const flags = parse([], {
      ETCD_ENDPOINTS: 'http://e:1',
      LEASEHOLD_LOCK_PREFIX: '/lp/',
      LEASEHOLD_ELECTION_PREFIX: '/ep/',
      ETCD_CACERT: '/ca.pem',
      ETCD_USERNAME: 'ops',
    });
    expect(resolve(flags, { ETCD_PASSWORD: 'pw' })).toEqual({
      endpoints: 'http://e:1',
      lockPrefix: '/lp/',
      electionPrefix: '/ep/',
      tls: { caCert: Buffer.from('CA') },
      auth: { username: 'ops', password: 'pw' },
    });
  });

  it('a flag wins over its environment variable', () => {
    expect(
      parse(['--endpoints', 'http://flag:1'], { ETCD_ENDPOINTS: 'http://env:1' }).endpoints,
    ).toBe('http://flag:1');
  });

  it('has no flag for the password itself', () => {
    expect(() => parse(['--password', 'x'])).toThrow(/unknown option '--password'/);
  });

  it('prefers --password-file to ETCD_PASSWORD and strips its final newline only', () => {
    expect(resolve({ user: 'u', passwordFile: '/pw' }, { ETCD_PASSWORD: 'env' }).auth).toEqual({
      username: 'u',
      password: 's3cret',
    });
  });

  it('refuses a user without a password, and a password file without a user', () => {
    usage(
      () => resolve({ user: 'ops' }),
      /--user "ops" needs a password: set ETCD_PASSWORD or pass --password-file/,
    );
    usage(() => resolve({ passwordFile: '/pw' }), /--password-file needs --user/);
  });

  it('needs --cert and --cert-key together, and --cacert with them', () => {
    usage(
      () => resolve({ cacert: '/ca.pem', cert: '/cert.pem' }),
      /--cert and --cert-key go together/,
    );
    usage(
      () => resolve({ cacert: '/ca.pem', certKey: '/key.pem' }),
      /--cert and --cert-key go together/,
    );
    usage(() => resolve({ cert: '/cert.pem', certKey: '/key.pem' }), /--cert needs --cacert/);
  });

  it('names the flag of a file that cannot be read', () => {
    usage(
      () => resolve({ cacert: '/missing.pem' }),
      /^--cacert "\/missing.pem" cannot be read \(ENOENT\)$/,
    );
  });

  it('checks timeouts as whole milliseconds', () => {
    usage(() => resolve({ dialTimeout: '5s' }), /^--dial-timeout must be a whole number/);
  });
});

describe("etcdctl's environment variables", () => {
  it('reads ETCDCTL_ENDPOINTS, ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY and ETCDCTL_DIAL_TIMEOUT', () => {
    expect(
      resolve(parse([]), {
        ETCDCTL_ENDPOINTS: 'https://a:2379,https://b:2379',
        ETCDCTL_CACERT: '/ca.pem',
        ETCDCTL_CERT: '/cert.pem',
        ETCDCTL_KEY: '/key.pem',
        ETCDCTL_DIAL_TIMEOUT: '1500ms',
      }),
    ).toEqual({
      endpoints: 'https://a:2379,https://b:2379',
      dialTimeoutMs: 1500,
      tls: {
        caCert: Buffer.from('CA'),
        clientCert: Buffer.from('CERT'),
        clientKey: Buffer.from('KEY'),
      },
    });
  });

  it('takes an empty ETCDCTL_* variable as not set, as etcdctl does', () => {
    const empty = {
      ETCDCTL_ENDPOINTS: '',
      ETCDCTL_USER: '',
      ETCDCTL_DIAL_TIMEOUT: '',
      ETCDCTL_CACERT: '',
    };
    expect(resolve({}, empty)).toEqual({ endpoints: DEFAULT_ENDPOINTS });
  });

  it('takes host:port endpoints as https:// when a CA certificate is given, as etcdctl does', () => {
    const env = { ETCDCTL_ENDPOINTS: '10.0.0.5:2379, 10.0.0.6:2379', ETCDCTL_CACERT: '/ca.pem' };
    expect(resolve(parse([]), env).endpoints).toBe('https://10.0.0.5:2379,https://10.0.0.6:2379');
    expect(resolve(parse(['--endpoints', '10.0.0.5:2379', '--cacert', '/ca.pem'])).endpoints).toBe(
      'https://10.0.0.5:2379',
    );
    // Without TLS the SDK's reading stands: http://.
    expect(resolve(parse([]), { ETCDCTL_ENDPOINTS: '10.0.0.5:2379' }).endpoints).toBe(
      '10.0.0.5:2379',
    );
  });

  it("a flag wins over leasehold's own variable, which wins over etcdctl's", () => {
    const env = { ETCD_ENDPOINTS: 'http://own:1' };
    const etcdctl = { ETCDCTL_ENDPOINTS: 'http://etcdctl:1', ETCDCTL_DIAL_TIMEOUT: '9s' };
    expect(resolve(parse(['--endpoints', 'http://flag:1'], env), etcdctl).endpoints).toBe(
      'http://flag:1',
    );
    expect(resolve(parse([], env), etcdctl).endpoints).toBe('http://own:1');
    expect(resolve(parse([]), etcdctl).endpoints).toBe('http://etcdctl:1');
    expect(resolve(parse(['--dial-timeout', '700']), etcdctl).dialTimeoutMs).toBe(700);
    expect(resolve(parse([], { ETCD_CACERT: '/ca.pem' }), { ETCDCTL_CACERT: '/x' }).tls).toEqual({
      caCert: Buffer.from('CA'),
    });
  });

  it('ETCDCTL_USER is user:password, split at the first colon, unless ETCDCTL_PASSWORD is set', () => {
    expect(resolve({}, { ETCDCTL_USER: 'ops:pa:ss' }).auth).toEqual({
      username: 'ops',
      password: 'pa:ss',
    });
    expect(resolve({}, { ETCDCTL_USER: 'ops:x', ETCDCTL_PASSWORD: 'pw' }).auth).toEqual({
      username: 'ops:x',
      password: 'pw',
    });
    // leasehold's own password variable and file come first.
    expect(resolve({}, { ETCDCTL_USER: 'ops:x', ETCD_PASSWORD: 'own' }).auth).toEqual({
      username: 'ops',
      password: 'own',
    });
    expect(resolve({ passwordFile: '/pw' }, { ETCDCTL_USER: 'ops' }).auth).toEqual({
      username: 'ops',
      password: 's3cret',
    });
  });

  it('--user wins over ETCDCTL_USER, whose password part never goes with another user', () => {
    expect(resolve({ user: 'me' }, { ETCDCTL_USER: 'ops:x', ETCDCTL_PASSWORD: 'pw' }).auth).toEqual(
      { username: 'me', password: 'pw' },
    );
    usage(
      () => resolve({ user: 'me' }, { ETCDCTL_USER: 'ops:x' }),
      /^--user "me" needs a password/,
    );
  });

  it('refuses ETCDCTL_USER without a password, and a half pair of ETCDCTL_CERT and ETCDCTL_KEY', () => {
    usage(
      () => resolve({}, { ETCDCTL_USER: 'ops' }),
      /^ETCDCTL_USER "ops" has no password: write it as user:password, or set ETCDCTL_PASSWORD/,
    );
    usage(
      () => resolve({}, { ETCDCTL_CACERT: '/ca.pem', ETCDCTL_CERT: '/cert.pem' }),
      /go together \(mutual TLS\), or neither \(here: ETCDCTL_CERT and ETCDCTL_KEY\)$/,
    );
    usage(
      () => resolve({}, { ETCDCTL_CACERT: '/nope' }),
      /^ETCDCTL_CACERT "\/nope" cannot be read/,
    );
    usage(
      () => resolve({}, { ETCDCTL_DIAL_TIMEOUT: '300' }),
      /^ETCDCTL_DIAL_TIMEOUT must be a duration as etcdctl takes it/,
    );
  });
});

describe('SDK messages in terms of flags', () => {
  it('renames the option a validation message starts with', () => {
    expect(withFlagNames('lockPrefix must be a non-empty string, got ""')).toBe(
      '--lock-prefix must be a non-empty string, got ""',
    );
    expect(withFlagNames('electionPrefix must be a prefix that ...')).toBe(
      '--election-prefix must be a prefix that ...',
    );
  });
  it('renames timeouts anywhere, and leaves other messages alone', () => {
    expect(withFlagNames('could not reach etcd within 500 ms (dialTimeoutMs): x', false)).toBe(
      'could not reach etcd within 500 ms (--dial-timeout): x',
    );
    expect(withFlagNames('election "x" was not won', false)).toBe('election "x" was not won');
    expect(withFlagNames('lock "x" is held')).toBe('lock "x" is held');
  });
});

describe('the unreachable-etcd message', () => {
  it('is one sentence: where, how long, and the last dial error once', () => {
    expect(
      connectMessage(
        'could not reach etcd at http://10.0.0.5:2379 within 1000 ms (--dial-timeout): etcd connect failed: could not reach etcd at http://10.0.0.5:2379 (14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 10.0.0.5:2379. Resolution note: )',
      ),
    ).toBe(
      'could not reach etcd at http://10.0.0.5:2379 within 1000 ms (--dial-timeout): connect ECONNREFUSED 10.0.0.5:2379',
    );
    expect(
      connectMessage(
        'could not reach etcd at http://a:1 within 700 ms (--dial-timeout): etcd connect failed: no answer from http://a:1 within 700 ms (callTimeoutMs)',
      ),
    ).toBe(
      'could not reach etcd at http://a:1 within 700 ms (--dial-timeout): no answer from http://a:1 within 700 ms (callTimeoutMs)',
    );
    expect(connectMessage('something else')).toBe('something else');
  });
});
