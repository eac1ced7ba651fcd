/**
 * Connection flags and environment, shared by every command, mapped onto `connect()`'s options
 * so that the SDK validates them exactly as it validates a program's options.
 *
 * Secrets never come from a flag alone (flags show in `ps` and shell history): the password is
 * read from `ETCD_PASSWORD` or from the file named by `--password-file`.
 */
import { readFileSync } from 'node:fs';
import { connect, defaults, type ConnectOptions, type Leasehold } from '@leasehold/core';
import { Option, type Command } from 'commander';
import { usageError } from './exit-codes.js';
import { parseDurationMs } from './parse.js';
import { debugLine } from './warnings.js';

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

const GROUP = 'Connection options:';

/** Adds the connection flags (and `--debug`) to `command`, each with its environment variable. */
export function addConnectionOptions(command: Command): Command {
  const option = (flags: string, description: string, env?: string) => {
    const o = new Option(flags, description).helpGroup(GROUP);
    return env === undefined ? o : o.env(env);
  };
  return command
    .addOption(
      option(
        '--endpoints <urls>',
        `etcd members, comma-separated http(s)://host:port (default: ${DEFAULT_ENDPOINTS})`,
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
    .addOption(option('--cacert <file>', 'CA certificate (PEM) to verify etcd', 'ETCD_CACERT'))
    .addOption(option('--cert <file>', 'client certificate (PEM) for mutual TLS', 'ETCD_CERT'))
    .addOption(option('--cert-key <file>', 'private key (PEM) of --cert', 'ETCD_CERT_KEY'))
    .addOption(
      option('--user <name>', 'etcd user; the password comes from ETCD_PASSWORD', 'ETCD_USERNAME'),
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
        `how long to keep trying to reach etcd (default: ${defaults.dialTimeoutMs})`,
      ),
    )
    .addOption(
      option(
        '--call-timeout <ms>',
        `deadline of each etcd call (default: ${defaults.callTimeoutMs})`,
      ),
    )
    .addOption(new Option('--debug', 'print stack traces and causes with errors').helpGroup(GROUP));
}

/**
 * `connect()`'s options for the flags (environment variables were merged in by commander;
 * `ETCD_PASSWORD` is read from `env`). Reads the TLS and password files; a file that cannot be
 * read is a usage error naming the flag.
 */
export function connectOptions(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv = process.env,
  read: (path: string) => Buffer = readFileSync,
): ConnectOptions {
  const file = (flag: string, path: string) => {
    try {
      return read(path);
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw usageError(`${flag} ${JSON.stringify(path)} cannot be read (${why})`, { cause: err });
    }
  };
  const options: ConnectOptions = { endpoints: flags.endpoints ?? DEFAULT_ENDPOINTS };
  if (flags.lockPrefix !== undefined) options.lockPrefix = flags.lockPrefix;
  if (flags.electionPrefix !== undefined) options.electionPrefix = flags.electionPrefix;
  if (flags.dialTimeout !== undefined) {
    options.dialTimeoutMs = parseDurationMs('--dial-timeout', flags.dialTimeout);
  }
  if (flags.callTimeout !== undefined) {
    options.callTimeoutMs = parseDurationMs('--call-timeout', flags.callTimeout);
  }

  if ((flags.cert === undefined) !== (flags.certKey === undefined)) {
    throw usageError('--cert and --cert-key go together (mutual TLS), or neither');
  }
  if (flags.cert !== undefined && flags.cacert === undefined) {
    throw usageError('--cert needs --cacert too (the CA that signed the etcd members)');
  }
  if (flags.cacert !== undefined) {
    options.tls = { caCert: file('--cacert', flags.cacert) };
    if (flags.cert !== undefined && flags.certKey !== undefined) {
      options.tls.clientCert = file('--cert', flags.cert);
      options.tls.clientKey = file('--cert-key', flags.certKey);
    }
  }

  const password =
    flags.passwordFile !== undefined
      ? stripNewline(file('--password-file', flags.passwordFile).toString('utf8'))
      : env.ETCD_PASSWORD;
  if (flags.user !== undefined) {
    if (password === undefined) {
      throw usageError(
        `--user ${JSON.stringify(flags.user)} needs a password: set ETCD_PASSWORD or pass --password-file (never a flag)`,
      );
    }
    options.auth = { username: flags.user, password };
  } else if (password !== undefined && flags.passwordFile !== undefined) {
    throw usageError('--password-file needs --user (or ETCD_USERNAME)');
  }
  return options;
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
