/**
 * `connect()`: every connection option checked at the call, with its default, then one probe
 * that must answer before `dialTimeoutMs`. What the client then is lives in client.ts.
 */
import { Leasehold } from './client.js';
import { systemClock, type Clock } from './clock.js';
import { errField, toLogger, type Logger } from './logger.js';
import {
  checkOptions,
  defaults,
  invalid,
  MAX_TIMER_MS,
  validateAttempts,
  validateAuth,
  validateDurationMs,
  validateEndpoints,
  validatePrefix,
  validateSignal,
  validateTls,
  type AuthOptions,
  type TlsOptions,
} from './options.js';
import { sessionSettings, type SessionOptions } from './session.js';
import { Telemetry, validateTelemetry, type TelemetryOptions } from './telemetry.js';
import { Etcd } from './transport/etcd.js';
import type { WireClient } from './transport/wire.js';

/**
 * Options of {@link connect}: `endpoints` is required; every other field has its default in its
 * comment.
 */
export interface ConnectOptions {
  /** `http(s)://host:port` of one or more etcd members (a comma-separated string works too). */
  endpoints: string | readonly string[];
  /** TLS material (PEM). Use with `https://` endpoints. */
  tls?: TlsOptions;
  /** etcd username/password authentication. */
  auth?: AuthOptions;
  /** How long `connect()` keeps trying to reach etcd. Default 5000. */
  dialTimeoutMs?: number;
  /** Deadline of each etcd call. Default 5000. */
  callTimeoutMs?: number;
  /**
   * Deadline of one attempt of a call on one member, after which the call moves to another
   * member (or, for a write that may have landed, fails). Default 1000 with several endpoints,
   * `callTimeoutMs` with one. Raise it when round trips to etcd approach a second.
   */
  attemptTimeoutMs?: number;
  /** Attempts for idempotent etcd calls, 1–10. Default 3. */
  maxAttempts?: number;
  /** Key prefix for locks. Default `/leasehold/lock/`. */
  lockPrefix?: string;
  /** Key prefix for elections. Default `/leasehold/election/`. */
  electionPrefix?: string;
  /** How often the client re-reads its lock prefix and checks its watch. Default 5000. */
  recheckIntervalMs?: number;
  /** Options of the shared session that locks and campaigns use unless given one. */
  session?: Omit<SessionOptions, 'signal' | 'leaseId'>;
  /** Aborting it cancels `connect()`, or closes the client once connected. */
  signal?: AbortSignal;
  /**
   * Where the client logs connection changes, member failover, retries, session loss, stalls and
   * clean-up failures: a pino logger, or any object with pino's `debug`/`info`/`warn`/`error`.
   * Default: silent.
   */
  logger?: Logger;
  /** Meter and tracer providers to use instead of OpenTelemetry's global ones. */
  telemetry?: TelemetryOptions;
  /**
   * Event-loop stalls at least this long while sessions are live are reported through
   * `onStall`, the logger and metrics. Default 500.
   */
  stallThresholdMs?: number;
  /** @internal Injected by tests for timing maths. */
  clock?: Clock;
}

/** `attemptTimeoutMs` with its default; one longer than `callTimeoutMs` is refused, not capped. */
function attemptTimeoutMs(options: ConnectOptions, endpoints: number, callMs: number): number {
  const given = options.attemptTimeoutMs;
  if (given === undefined)
    return endpoints > 1 ? Math.min(defaults.attemptTimeoutMs, callMs) : callMs;
  const value = validateDurationMs('attemptTimeoutMs', given, MAX_TIMER_MS);
  if (value > callMs) {
    throw invalid(
      'attemptTimeoutMs',
      `at most callTimeoutMs (${callMs}): an attempt cannot outlast its call; raise callTimeoutMs too`,
      value,
    );
  }
  return value;
}

/** The options `connect()` takes (`clock`, for leasehold's own tests, is not listed). */
export const connectOptionNames = [
  'endpoints',
  'tls',
  'auth',
  'dialTimeoutMs',
  'callTimeoutMs',
  'attemptTimeoutMs',
  'maxAttempts',
  'lockPrefix',
  'electionPrefix',
  'recheckIntervalMs',
  'session',
  'signal',
  'logger',
  'telemetry',
  'stallThresholdMs',
] as const satisfies readonly (keyof ConnectOptions)[];

/**
 * Connects to etcd: keeps trying until a read under `lockPrefix` answers or `dialTimeoutMs`
 * passes. Wrong credentials fail here with `AuthError`, a missing permission with
 * `EtcdRequestError`, no answer with `ConnectError`. The cluster id and revision seen here are
 * what every later answer is checked against.
 *
 * @throws {@link InvalidArgumentError} at the call for an option that is not allowed (the message
 *   names it and what is allowed).
 * @throws {@link ConnectError} when no endpoint answered within `dialTimeoutMs`; a
 *   {@link TlsError} when the TLS set-up is why (its `failure` says what to fix).
 * @throws {@link AuthError} for credentials etcd refuses; {@link PermissionDeniedError} when the
 *   user may not read `lockPrefix`.
 *
 * @example
 * ```ts
 * import { readFile } from 'node:fs/promises';
 * import { connect } from '@leasehold/core';
 *
 * await using client = await connect({
 *   endpoints: ['https://etcd-1:2379', 'https://etcd-2:2379', 'https://etcd-3:2379'],
 *   tls: { caCert: await readFile('/etc/etcd/ca.pem') },
 *   auth: { username: 'leasehold', password: process.env.ETCD_PASSWORD! },
 * });
 * ```
 */
export function connect(options: ConnectOptions): Promise<Leasehold> {
  return open(options, undefined);
}

/**
 * For leasehold's own packages: `connect()` over an etcd that is not a gRPC connection (the
 * in-memory one of `@leasehold/testing`), named `endpoint` in messages. The options are checked
 * as `connect()`'s, without `endpoints`, `tls` and `auth`.
 */
export function connectWith(
  wire: { client: WireClient; endpoint: string },
  options: Omit<ConnectOptions, 'endpoints' | 'tls' | 'auth' | 'clock'> & { clock?: Clock },
): Promise<Leasehold> {
  return open({ ...options, endpoints: wire.endpoint }, wire);
}

async function open(
  options: ConnectOptions,
  wire: { client: WireClient; endpoint: string } | undefined,
): Promise<Leasehold> {
  checkOptions(options, [...connectOptionNames], { hidden: ['clock'] });
  const ms = (name: 'dialTimeoutMs' | 'callTimeoutMs' | 'recheckIntervalMs' | 'stallThresholdMs') =>
    validateDurationMs(name, options[name] ?? defaults[name], MAX_TIMER_MS);
  const endpoints = wire ? [wire.endpoint] : validateEndpoints(options.endpoints);
  const clock = options.clock ?? systemClock;
  const log = toLogger(options.logger);
  const telemetry = new Telemetry(log, validateTelemetry(options.telemetry), clock);
  const stallThresholdMs = ms('stallThresholdMs');
  const etcdOptions = {
    telemetry,
    clock,
    endpoints,
    dialTimeoutMs: ms('dialTimeoutMs'),
    callTimeoutMs: ms('callTimeoutMs'),
    attemptTimeoutMs: attemptTimeoutMs(options, endpoints.length, ms('callTimeoutMs')),
    maxAttempts: validateAttempts(options.maxAttempts ?? defaults.maxAttempts),
    tls: validateTls(options.tls, endpoints),
    auth: validateAuth(options.auth),
    client: wire?.client,
  };
  const prefix = (name: 'lockPrefix' | 'electionPrefix') =>
    validatePrefix(name, options[name] ?? defaults[name]);
  const [lockPrefix, electionPrefix] = [prefix('lockPrefix'), prefix('electionPrefix')];
  if (lockPrefix.startsWith(electionPrefix) || electionPrefix.startsWith(lockPrefix)) {
    throw invalid(
      'electionPrefix',
      `a prefix that neither contains nor is contained in lockPrefix ${JSON.stringify(lockPrefix)} (locks and elections would read each other's keys)`,
      electionPrefix,
    );
  }
  const recheckIntervalMs = ms('recheckIntervalMs');
  const shared = {
    ...sessionSettings(options.session === undefined ? {} : options.session, 'session').options,
  };
  if (shared.leaseId !== undefined) {
    // Once that lease ended, every later shared session would try to resume it again.
    throw invalid(
      'session.leaseId',
      'left out: the shared session grants a lease of its own; resume one with client.session({ leaseId })',
      shared.leaseId,
    );
  }
  const signal = validateSignal(options.signal);
  signal?.throwIfAborted();
  const etcd = await Etcd.open(etcdOptions, lockPrefix, signal).catch((err: unknown) => {
    log.error({ endpoints, err: errField(err) }, 'could not connect to etcd');
    throw err;
  });
  log.info({ endpoints, clusterId: etcd.clusterId }, 'connected to etcd');
  const client = new Leasehold(
    etcd,
    clock,
    { lockPrefix, electionPrefix },
    recheckIntervalMs,
    shared,
    stallThresholdMs,
  );
  signal?.addEventListener('abort', () => void client.close(), { once: true });
  return client;
}
