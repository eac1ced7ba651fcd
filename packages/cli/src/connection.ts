/**
 * Connection flags and environment, shared by every command, mapped onto `connect()`'s options
 * so that the SDK validates them exactly as it validates a program's options.
 *
 * The flags belong to the program, not to each command, so they may come before or after the
 * command's name (`leasehold --endpoints X run …` and `leasehold run --endpoints X …`); nothing
 * after `--` is read. A flag wins over leasehold's own variable (`ETCD_ENDPOINTS`, …), which wins
 * over etcdctl's (`ETCDCTL_ENDPOINTS`, …), read here with etcdctl's formats.
 *
 * Secrets never come from a flag alone (flags show in `ps` and shell history): the password is
 * read from `ETCD_PASSWORD`, etcdctl's `ETCDCTL_PASSWORD` or `ETCDCTL_USER` (`user:password`), or
 * from the file named by `--password-file`.
 */
import { readFileSync } from 'node:fs';
import { connect, defaults, type ConnectOptions, type Leasehold } from '@leasehold/core';
import { redactEndpoint } from '@leasehold/core/internal';
import { Option, type Command } from 'commander';
import { usageError } from './exit-codes.js';
import { parseDurationMs, parseGoDurationMs } from './parse.js';
import { debugLine, debugNote } from './warnings.js';

export const DEFAULT_ENDPOINTS = 'http://127.0.0.1:2379';

/** What commander hands over for the connection flags. */
export interface ConnectionFlags {
  endpoints?: string;
  lockPrefix?: string;
  electionPrefix?: string;
  cacert?: string;
  cert?: string;
  certKey?: string;
  user?: string;
  passwordFile?: string;
  dialTimeout?: string;
  callTimeout?: string;
}

export const CONNECTION_GROUP = 'Connection options:';

/** Adds the connection flags (and `--debug`) to `command`, each with its environment variable. */
export function addConnectionOptions(command: Command): Command {
  const option = (flags: string, description: string, env?: string) => {
    const o = new Option(flags, description).helpGroup(CONNECTION_GROUP);
    return env === undefined ? o : o.env(env);
  };
  return command
    .addOption(
      option(
        '--endpoints <urls>',
        `etcd members, comma-separated http(s)://host:port (default: ${DEFAULT_ENDPOINTS}; also ETCDCTL_ENDPOINTS)`,
        'ETCD_ENDPOINTS',
      ),
    )
    .addOption(
      option(
        '--lock-prefix <prefix>',
        `key prefix of locks (default: ${defaults.lockPrefix})`,
        'LEASEHOLD_LOCK_PREFIX',
      ),
    )
    .addOption(
      option(
        '--election-prefix <prefix>',
        `key prefix of elections (default: ${defaults.electionPrefix})`,
        'LEASEHOLD_ELECTION_PREFIX',
      ),
    )
    .addOption(
      option(
        '--cacert <file>',
        'CA certificate (PEM) to verify etcd (also ETCDCTL_CACERT)',
        'ETCD_CACERT',
      ),
    )
    .addOption(
      option(
        '--cert <file>',
        'client certificate (PEM) for mutual TLS (also ETCDCTL_CERT)',
        'ETCD_CERT',
      ),
    )
    .addOption(
      option(
        '--cert-key <file>',
        'private key (PEM) of --cert (also ETCDCTL_KEY)',
        'ETCD_CERT_KEY',
      ),
    )
    .addOption(
      option(
        '--user <name>',
        'etcd user; the password comes from ETCD_PASSWORD (also ETCDCTL_USER, ETCDCTL_PASSWORD)',
        'ETCD_USERNAME',
      ),
    )
    .addOption(
      option(
        '--password-file <file>',
        "file holding the user's password (instead of ETCD_PASSWORD)",
        'ETCD_PASSWORD_FILE',
      ),
    )
    .addOption(
      option(
        '--dial-timeout <ms>',
        `how long to keep trying to reach etcd (default: ${defaults.dialTimeoutMs}; also ETCDCTL_DIAL_TIMEOUT, as "2s")`,
      ),
    )
    .addOption(
      option(
        '--call-timeout <ms>',
        `deadline of each etcd call (default: ${defaults.callTimeoutMs})`,
      ),
    )
    .addOption(
      new Option(
        '--debug',
        'print stack traces and causes with errors, and what leasehold does',
      ).helpGroup(CONNECTION_GROUP),
    );
}

/**
 * `connect()`'s options for the flags (environment variables were merged in by commander;
 * `ETCD_PASSWORD` is read from `env`). Reads the TLS and password files; a file that cannot be
 * read is a usage error naming the flag.
 */
export function connectOptions(
  flags: ConnectionFlags,
  processEnv: NodeJS.ProcessEnv = process.env,
  read: (path: string) => Buffer = readFileSync,
): ConnectOptions {
  const env = etcdctlUnsetWhenEmpty(processEnv);
  const file = (flag: string, path: string) => {
    try {
      return read(path);
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw usageError(`${flag} ${JSON.stringify(path)} cannot be read (${why})`, { cause: err });
    }
  };
  const cacert = flags.cacert ?? env.ETCDCTL_CACERT;
  const cert = flags.cert ?? env.ETCDCTL_CERT;
  const certKey = flags.certKey ?? env.ETCDCTL_KEY;
  const options: ConnectOptions = {
    endpoints: endpointList(flags.endpoints ?? env.ETCDCTL_ENDPOINTS, cacert !== undefined),
  };
  if (flags.lockPrefix !== undefined) options.lockPrefix = flags.lockPrefix;
  if (flags.electionPrefix !== undefined) options.electionPrefix = flags.electionPrefix;
  if (flags.dialTimeout !== undefined) {
    options.dialTimeoutMs = parseDurationMs('--dial-timeout', flags.dialTimeout);
  } else if (env.ETCDCTL_DIAL_TIMEOUT !== undefined) {
    options.dialTimeoutMs = parseGoDurationMs('ETCDCTL_DIAL_TIMEOUT', env.ETCDCTL_DIAL_TIMEOUT);
  }
  if (flags.callTimeout !== undefined) {
    options.callTimeoutMs = parseDurationMs('--call-timeout', flags.callTimeout);
  }

  if ((cert === undefined) !== (certKey === undefined)) {
    const etcdctl = flags.cert === undefined && flags.certKey === undefined;
    throw usageError(
      `--cert and --cert-key go together (mutual TLS), or neither${etcdctl ? ' (here: ETCDCTL_CERT and ETCDCTL_KEY)' : ''}`,
    );
  }
  if (cert !== undefined && cacert === undefined) {
    throw usageError('--cert needs --cacert too (the CA that signed the etcd members)');
  }
  if (cacert !== undefined) {
    options.tls = { caCert: file(flags.cacert ? '--cacert' : 'ETCDCTL_CACERT', cacert) };
    if (cert !== undefined && certKey !== undefined) {
      options.tls.clientCert = file(flags.cert ? '--cert' : 'ETCDCTL_CERT', cert);
      options.tls.clientKey = file(flags.certKey ? '--cert-key' : 'ETCDCTL_KEY', certKey);
    }
  }

  const { user, password, userFrom } = credentials(flags, env, () =>
    stripNewline(file('--password-file', flags.passwordFile!).toString('utf8')),
  );
  if (user !== undefined) {
    if (password === undefined) {
      throw usageError(
        userFrom === 'ETCDCTL_USER'
          ? `ETCDCTL_USER ${JSON.stringify(user)} has no password: write it as user:password, or set ETCDCTL_PASSWORD or ETCD_PASSWORD, or pass --password-file (never a flag)`
          : `--user ${JSON.stringify(user)} needs a password: set ETCD_PASSWORD or pass --password-file (never a flag)`,
      );
    }
    options.auth = { username: user, password };
  } else if (flags.passwordFile !== undefined) {
    throw usageError('--password-file needs --user (or ETCD_USERNAME, ETCDCTL_USER)');
  }
  return options;
}

/**
 * etcdctl reads an empty `ETCDCTL_*` variable as not set (`export ETCDCTL_ENDPOINTS=` in a
 * profile); so does leasehold, instead of failing on an empty value the operator never typed.
 */
function etcdctlUnsetWhenEmpty(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const [name, value] of Object.entries(env)) {
    if (name.startsWith('ETCDCTL_') && value === '') delete out[name];
  }
  return out;
}

/**
 * The endpoints, comma-separated. As etcdctl does, `host:port` without a scheme means https://
 * when a CA certificate is given (http:// otherwise: the SDK's reading).
 */
function endpointList(text: string | undefined, tls: boolean): string {
  if (text === undefined) return DEFAULT_ENDPOINTS;
  if (!tls) return text;
  return text
    .split(',')
    .map((e) =>
      e.trim() === '' || /^[a-z][a-z0-9+.-]*:\/\//i.test(e.trim()) ? e : `https://${e.trim()}`,
    )
    .join(',');
}

/**
 * The user and password, from the first place that names each: `--user`, `ETCD_USERNAME`, then
 * etcdctl's `ETCDCTL_USER`; the password from `--password-file`, `ETCD_PASSWORD`,
 * `ETCDCTL_PASSWORD`, then the `:password` part of `ETCDCTL_USER`. As in etcdctl, `ETCDCTL_USER`
 * is split at its first colon only when `ETCDCTL_PASSWORD` is not set (a user name may hold a
 * colon then), and its password part goes only with its own user name.
 */
function credentials(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv,
  passwordFile: () => string,
): { user?: string; password?: string; userFrom?: 'flag' | 'ETCDCTL_USER' } {
  let password =
    flags.passwordFile !== undefined ? passwordFile() : (env.ETCD_PASSWORD ?? env.ETCDCTL_PASSWORD);
  if (flags.user !== undefined) {
    return { user: flags.user, userFrom: 'flag', ...(password === undefined ? {} : { password }) };
  }
  const etcdctlUser = env.ETCDCTL_USER;
  if (etcdctlUser === undefined) return password === undefined ? {} : { password };
  let user = etcdctlUser;
  const colon = etcdctlUser.indexOf(':');
  if (env.ETCDCTL_PASSWORD === undefined && colon >= 0) {
    user = etcdctlUser.slice(0, colon);
    password ??= etcdctlUser.slice(colon + 1);
  }
  return { user, userFrom: 'ETCDCTL_USER', ...(password === undefined ? {} : { password }) };
}

/** A password file usually ends with a newline that is not part of the password. */
function stripNewline(text: string): string {
  return text.replace(/\r?\n$/, '');
}

/**
 * Connects with the flags. Option names in the SDK's validation messages are replaced by the
 * flags that set them, so the message tells the operator what to change.
 */
export async function connectWith(
  flags: ConnectionFlags,
  extra: Partial<ConnectOptions> = {},
): Promise<Leasehold> {
  const options = { ...connectOptions(flags), ...extra };
  // Before validation: an endpoint may still carry credentials, which the log must not repeat.
  const endpoints = [options.endpoints]
    .flat()
    .map((e) => (typeof e === 'string' ? e.split(',').map(redactEndpoint).join(',') : String(e)))
    .join(',');
  const dialMs = options.dialTimeoutMs ?? defaults.dialTimeoutMs;
  // Written as the dial starts (a pipe write is synchronous): when it began, for the operator.
  debugNote(`connecting to ${endpoints}, for at most ${dialMs} ms (--dial-timeout)`);
  const client = await connect(options);
  // Background clean-up (a release or revoke retried while etcd is unreachable) is the SDK's
  // business; without a listener it would print process warnings. --debug shows them.
  client.onCleanupError((err) => debugLine(`clean-up: ${err.message}`));
  return client;
}

/** SDK option names as the flags that set them, for messages. */
export const FLAG_OF: Record<string, string> = {
  endpoints: '--endpoints',
  endpoint: '--endpoints',
  lockPrefix: '--lock-prefix',
  electionPrefix: '--election-prefix',
  dialTimeoutMs: '--dial-timeout',
  callTimeoutMs: '--call-timeout',
  ttlSeconds: '--ttl',
  'session.ttlSeconds': '--ttl',
  timeoutMs: '--wait-timeout',
  value: '--value',
  name: 'the lock name',
  election: 'the election name',
  'auth.username': '--user',
};

/**
 * connect()'s ConnectError says where and how long, then repeats it in the last dial's error
 * (`…: etcd connect failed: could not reach etcd at X (14 UNAVAILABLE: …)`): one sentence.
 */
export function connectMessage(message: string): string {
  const m =
    /^(could not reach etcd at .*? within \d+ ms \([\w-]+\)): etcd connect failed: (?:could not reach etcd at .*? \((.*)\)|(.*))$/s.exec(
      message,
    );
  if (!m) return message;
  const why = m[2] ?? m[3]!;
  // gRPC's "14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED
  // 10.0.0.5:2379. Resolution note: " says it in its last error.
  const last = /Last error: (?:\w*Error: )?(.*?)\.?(?: Resolution note:.*)?$/s.exec(why)?.[1];
  return `${m[1]}: ${last || why}`;
}

/**
 * An SDK message with option names as the flags that set them: the leading name of a
 * validation message, and the "(dialTimeoutMs)" of a timeout.
 */
export function withFlagNames(message: string, validation = true): string {
  const m = validation ? /^([\w.]+)( .*)$/s.exec(message) : null;
  const flag = m && FLAG_OF[m[1]!];
  const named = flag ? `${flag}${m[2]}` : message;
  return named.replace(/\((dialTimeoutMs|callTimeoutMs)\)/g, (all, name: string) =>
    FLAG_OF[name] ? `(${FLAG_OF[name]})` : all,
  );
}
