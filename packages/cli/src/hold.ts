/**
 * `run` and `elect`: wait for a lock or for leadership (with a status line on a terminal), run
 * the command while it is held, and let go when the command ends.
 */
import { hostname } from 'node:os';
import {
  defaults,
  isCampaignTimeoutError,
  isLockTimeoutError,
  type Holder,
  type Leasehold,
  type Permit,
  type Session,
} from '@leasehold/core';
import { connectWith, type ConnectionFlags } from './connection.js';
import { CliError, exitCodes, usageError } from './exit-codes.js';
import { printable } from './format.js';
import { leaseHex, queueRange } from './keys.js';
import {
  parseDurationMs,
  parseGraceMs,
  parsePermits,
  parseTtlSeconds,
  parseValue,
} from './parse.js';
import { inQueueOrder, readPrefix } from './read.js';
import { Signals } from './signals.js';
import { startStatus, type WaitKind, type WaitView } from './status.js';
import { shellWords, supervise, type Held } from './supervise.js';

/** Grace between SIGTERM and SIGKILL after a loss. Kept well under the default TTL. */
export const DEFAULT_GRACE_MS = 5_000;

export interface HoldFlags extends ConnectionFlags {
  ttl?: string;
  waitTimeout?: string;
  /** `--no-wait` sets it to false. */
  wait?: boolean;
  value?: string;
  grace?: string;
}

export interface RunFlags extends HoldFlags {
  lock: string;
  /** With it, `--lock` names a semaphore of this many permits. */
  permits?: string;
}

/** The flags of `run` and `elect` as numbers, checked before anything connects. */
export function holdSettings(flags: HoldFlags, command: readonly string[]) {
  if (command.length === 0) {
    throw usageError('no command given: put it after "--", e.g. -- ./nightly-report.sh');
  }
  const ttlSeconds =
    flags.ttl === undefined ? defaults.ttlSeconds : parseTtlSeconds('--ttl', flags.ttl);
  const graceMs =
    flags.grace === undefined ? DEFAULT_GRACE_MS : parseGraceMs('--grace', flags.grace);
  const timeoutMs =
    flags.waitTimeout === undefined
      ? undefined
      : parseDurationMs('--wait-timeout', flags.waitTimeout);
  if (timeoutMs !== undefined && flags.wait === false) {
    throw usageError('--wait-timeout and --no-wait exclude each other: choose one');
  }
  const value = flags.value === undefined ? undefined : parseValue('--value', flags.value);
  return { ttlSeconds, graceMs, timeoutMs, noWait: flags.wait === false, value };
}

interface Io {
  stderr: NodeJS.WriteStream;
  log: (line: string) => void;
}

/** How `run` and `elect` differ. */
interface Kind {
  /** What the status line says is waited for. */
  wait: WaitKind;
  /** The range of the queue our key joins (for our place in it). */
  queue(client: Leasehold, name: string): string;
  first(client: Leasehold, name: string): Promise<Holder | undefined>;
  /** Waits for the hold; `signal` aborts the wait. */
  take(client: Leasehold, session: Session, signal: AbortSignal): Promise<Held & AsyncDisposable>;
  what(name: string): string;
  env(hold: Held): Record<string, string>;
}

async function underHold(
  kind: Kind,
  name: string,
  flags: HoldFlags,
  settings: ReturnType<typeof holdSettings>,
  command: readonly string[],
  io: Io,
): Promise<number> {
  using signals = new Signals({ ignoreStop: true });
  const interrupted = signals.interrupted;
  const client = await connectWith(flags, { signal: interrupted });
  /** Part of the command may still run: leave the lease to expire (see CliError.keepLease). */
  let keepLease = false;
  try {
    const session = await client.session({ ttlSeconds: settings.ttlSeconds }).catch((err) => {
      if (interrupted.aborted) throw interrupted.reason;
      throw err;
    });
    const status = io.stderr.isTTY
      ? startStatus(io.stderr, kind.wait, name, async (): Promise<WaitView> => {
          const [holder, queue] = await Promise.all([
            kind.first(client, name),
            readPrefix(client, kind.queue(client, name)),
          ]);
          // Our key is the one with our lease (a permit's key names more than the lease).
          const index = inQueueOrder(queue.entries).findIndex((e) => e.leaseId === session.leaseId);
          return { holder, ahead: index < 0 ? undefined : index };
        })
      : undefined;
    let hold: Held & AsyncDisposable;
    try {
      hold = await kind.take(client, session, interrupted);
    } catch (err) {
      // The interruption also closes the client, which can reach the wait first.
      if (interrupted.aborted) throw interrupted.reason;
      throw err;
    } finally {
      status?.stop();
    }
    try {
      interrupted.throwIfAborted();
      if (io.stderr.isTTY) {
        io.log(
          `${kind.what(name)}: token ${hold.token}; running ${printable(shellWords(command), 80)}`,
        );
      }
      return await supervise({
        hold,
        what: kind.what(name),
        command,
        env: kind.env(hold),
        graceMs: settings.graceMs,
        signals,
        log: io.log,
      });
    } catch (err) {
      if (err instanceof CliError && err.keepLease) keepLease = true;
      throw err;
    } finally {
      if (!keepLease) await hold[Symbol.asyncDispose]();
    }
  } finally {
    // Closing the client would revoke the lease. Without it, leasehold's exit stops the
    // keepalives and etcd expires the lease within its TTL.
    if (!keepLease) await client.close();
  }
}

/** `leasehold run --lock NAME -- CMD...`; with `--permits N`, under a permit of the semaphore NAME. */
export function runUnderLock(flags: RunFlags, command: readonly string[], io: Io): Promise<number> {
  const settings = holdSettings(flags, command);
  const permits =
    flags.permits === undefined ? undefined : parsePermits('--permits', flags.permits);
  const { noWait, timeoutMs, value } = settings;
  const name = flags.lock;
  const what =
    permits === undefined
      ? `lock "${printable(name)}"`
      : `a permit of semaphore "${printable(name)}"`;
  return underHold(
    {
      wait: permits === undefined ? 'lock' : { permits },
      queue: (client, n) =>
        permits === undefined
          ? queueRange(client.lockPrefix, n)
          : `${queueRange(client.lockPrefix, n).slice(0, -1)}%sem/`,
      first: async (client, n) =>
        permits === undefined ? client.holder(n) : (await client.semaphore(n)).holders[0],
      what: () => what,
      async take(client, session, signal) {
        const options = { session, signal, ...(value === undefined ? {} : { value }) };
        const timeout = timeoutMs === undefined ? {} : { timeoutMs };
        try {
          if (permits === undefined) {
            return noWait
              ? await client.tryAcquire(name, options)
              : await client.acquire(name, { ...options, ...timeout });
          }
          return noWait
            ? await client.tryAcquirePermit(name, { ...options, permits })
            : await client.acquirePermit(name, { ...options, ...timeout, permits });
        } catch (err) {
          if (!isLockTimeoutError(err)) throw err;
          throw new CliError(
            `${what} was not acquired within ${timeoutMs} ms (--wait-timeout)`,
            exitCodes.timeout,
            { cause: err },
          );
        }
      },
      env: (hold) => ({
        LEASEHOLD_TOKEN: hold.token.toString(),
        ...(permits === undefined ? {} : { LEASEHOLD_SLOT: String((hold as Permit).slot) }),
        LEASEHOLD_LOCK_KEY: hold.key,
        LEASEHOLD_LEASE_ID: leaseHex(hold.session.leaseId),
      }),
    },
    name,
    flags,
    settings,
    command,
    io,
  );
}

/** The default candidate value: who the leader is, for people reading `inspect` or `observe`. */
export const defaultCandidateValue = (): string => `${hostname()}:${process.pid}`;

/** `leasehold elect NAME -- CMD...` */
export function runAsLeader(
  name: string,
  flags: HoldFlags,
  command: readonly string[],
  io: Io,
): Promise<number> {
  const settings = holdSettings(flags, command);
  const { timeoutMs, value } = settings;
  return underHold(
    {
      wait: 'election',
      queue: (client, n) => queueRange(client.electionPrefix, n),
      first: (client, n) => client.leader(n),
      what: (n) => `leadership of "${printable(n)}"`,
      async take(client, session, signal) {
        try {
          return await client.campaign(name, value ?? defaultCandidateValue(), {
            session,
            signal,
            ...(timeoutMs === undefined ? {} : { timeoutMs }),
          });
        } catch (err) {
          if (!isCampaignTimeoutError(err)) throw err;
          throw new CliError(
            `election "${printable(name)}" was not won within ${timeoutMs} ms (--wait-timeout)`,
            exitCodes.timeout,
            { cause: err },
          );
        }
      },
      env: (hold) => ({
        LEASEHOLD_TOKEN: hold.token.toString(),
        LEASEHOLD_ELECTION_KEY: hold.key,
        LEASEHOLD_LEASE_ID: leaseHex(hold.session.leaseId),
      }),
    },
    name,
    flags,
    settings,
    command,
    io,
  );
}
