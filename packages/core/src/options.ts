import { hostname } from 'node:os';
import { createSecureContext } from 'node:tls';
import { InvalidArgumentError } from './errors.js';

/**
 * Every default in one place. Durations carry their unit in their name: `ttlSeconds` is etcd's
 * own unit; everything measured locally is in milliseconds.
 */
export const defaults = {
  /** Lease TTL. Long enough to ride out a leader election, short enough to fail over quickly. */
  ttlSeconds: 10,
  /** How long `connect()` keeps trying to reach etcd. */
  dialTimeoutMs: 5_000,
  /** Deadline for each etcd call; every call has one, so nothing hangs on a frozen member. */
  callTimeoutMs: 5_000,
  /**
   * Deadline of one attempt of a call on one member, with several endpoints (with one endpoint
   * there is nowhere else to go: an attempt gets the whole `callTimeoutMs`). A healthy etcd
   * answers in milliseconds; a member silent for a second is frozen, cut off, or forwarding to a
   * leader that is gone (etcd drops such a proposal silently), so the call moves to another
   * member (reads, guarded txns) or fails with `EtcdUnavailableError` (writes that may have
   * landed) instead of waiting out `callTimeoutMs`: a member fault costs about an election
   * timeout + 1 s. Raise it when round trips to etcd approach a second (a distant region).
   */
  attemptTimeoutMs: 1_000,
  /** Attempts for idempotent calls (reads, guarded txns, revoke); other calls are never retried. */
  maxAttempts: 3,
  /** Where lock keys live. `etcdctl lock <prefix><name>` contends for the same lock. */
  lockPrefix: '/leasehold/lock/',
  /** Where election keys live. `etcdctl elect <prefix><name>` joins the same election. */
  electionPrefix: '/leasehold/election/',
  /** How long `lead()` lets leader-only work finish after shutdown before it resigns anyway. */
  drainTimeoutMs: 10_000,
  /**
   * How often a client with locks, waiters or sessions re-reads its lock prefix (keys only, one
   * read per client) and proves its watch still answers: the most an event missed for any reason
   * can delay the news that a lock is lost, or that a waiter is first.
   */
  recheckIntervalMs: 5_000,
  /**
   * An event-loop stall at least this long, while the client has live sessions, is reported
   * (`client.onStall`, a log line, metrics): it ate that much of every live lease. Ordinary GC
   * pauses stay below it.
   */
  stallThresholdMs: 500,
} as const;

/**
 * Internal tunables, with the reason for each value. Not options: they encode how etcd and
 * gRPC behave, not a user's preference.
 */
export const tunables = {
  /**
   * Retry backoff for etcd calls and background clean-up, doubling from min to max. Two retries
   * from 100 ms span the breaker's rest (below), so a call retried after a reset can succeed.
   */
  retryMinMs: 100,
  retryMaxMs: 1_000,
  /** A member whose calls failed 3 times in a row is rested this long (etcd3's default: 5 s). */
  breakerHalfOpenMs: 250,
  /**
   * How often the stall monitor's timer is due while sessions are live: a stall is measured as
   * that timer's lateness, so it is reported at most this much short of its real length.
   */
  stallCheckIntervalMs: 100,
  /** "Lease not found" answers, each on a fresh stream, before the session believes them. */
  goneConfirmations: 3,
  /**
   * Keys per page of the watch check's read: keys are at most ~3 KiB (1024-character names,
   * escaped), so a page stays under gRPC's 4 MiB message limit.
   */
  checkPageKeys: 1_000,
  /**
   * Keys per page of a read with values (an observer's read of an election): values are at most
   * 64 KiB (`MAX_VALUE_BYTES`), so 32 of them stay well under gRPC's 4 MiB message limit.
   */
  valuePageKeys: 32,
  /** Watch events kept so a waiter that joins just behind the stream can catch up from memory. */
  watchReplayEvents: 4_096,
  /**
   * A lost session's revoke is retried until etcd answers; after etcd answers again it is given
   * this many TTLs more (a restarted etcd restores leases with a fresh TTL, so the local
   * estimate of expiry is not a bound).
   */
  revokeRetryTtls: 2,
} as const;

/** PEM-encoded material for TLS to etcd. Endpoints must use https. */
export interface TlsOptions {
  /** The CA certificate(s) that sign etcd's server certificates. Required. */
  caCert: Buffer | string;
  /** This client's certificate, for etcd's `--client-cert-auth`; with `clientKey`. */
  clientCert?: Buffer | string;
  /** The private key of `clientCert`. */
  clientKey?: Buffer | string;
}

/** etcd's username/password authentication. */
export interface AuthOptions {
  /** The etcd user. */
  username: string;
  /** The user's password. */
  password: string;
}

/**
 * etcd's minimum TTL with its default timing (heartbeat 100 ms, election timeout 1000 ms) is
 * 2 s; it silently raises anything lower, which would make the local deadline wrong.
 */
export const MIN_TTL_SECONDS = 2;
/** etcd's `MaxLeaseTTL`. */
export const MAX_TTL_SECONDS = 9_000_000_000;
/**
 * Most characters (UTF-16 code units) of a lock, semaphore or election name, and of a key prefix.
 */
export const MAX_NAME_LENGTH = 1024;
/**
 * Most bytes (UTF-8) of a lock's holder value or a candidate's value. Values travel on every
 * watch event of their queue and are kept in the watch's replay buffer, so they stay small.
 */
export const MAX_VALUE_BYTES = 64 * 1024;
/** setTimeout fires at once for longer delays; every timer is clamped to this. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** 10% of the TTL, at most one second: covers a slow client clock and late timers. */
export function defaultSafetyMarginMs(ttlSeconds: number): number {
  return Math.min(1_000, ttlSeconds * 100);
}

export function describe(value: unknown): string {
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number') return String(value);
  return describeType(value);
}

/**
 * Only what kind of value it is: for values that may be secrets (credentials, keys, a misspelt
 * option that may be either), which must not end up in a message that is logged.
 */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * A bad-input error class: core's {@link InvalidArgumentError}, or a sibling package's, which
 * carries the same brand. The shared checks take one, so each package throws its own class with
 * core's wording.
 */
export type InvalidArgumentClass = new (message: string) => Error;

/**
 * Checks an options argument: an object whose keys are all known. A misspelt option
 * (`timeOutMs`) must not silently fall back to its default (for a timeout: none at all).
 * A known key whose value is `undefined` counts as left out; an unknown key is refused whatever
 * its value. `hidden` keys are accepted but not listed as allowed:
 * options for the package's own tests, which a user should not be pointed to.
 */
export function checkOptions<T extends object>(
  options: T,
  allowed: readonly (keyof T & string)[],
  how: {
    /** The argument's name in messages. Default `options`. */
    name?: string;
    hidden?: readonly (keyof T & string)[];
    /** What the argument must be, for a message about a non-object. Default `an object`. */
    what?: string;
    as?: InvalidArgumentClass;
  } = {},
): T {
  const { name = 'options', hidden = [], what = 'an object', as } = how;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw invalid(name, what, options, as);
  }
  const listed: readonly string[] = allowed;
  const accepted: readonly string[] = hidden;
  for (const key of Object.keys(options)) {
    // Every acquire and campaign checks its options: no array is built per call.
    if (!listed.includes(key) && !accepted.includes(key)) {
      // Only the value's type: a misspelt `password` or `clientKey` must not put the secret in a
      // message that ends up in logs.
      const value = describeType((options as Record<string, unknown>)[key]);
      const list = allowed.join(', ');
      throw new (as ?? InvalidArgumentError)(
        `${name}.${key} must be left out (not an option; allowed: ${list}), got ${value}`,
      );
    }
  }
  return options;
}

/** The error for bad input, in the one wording of every package: `<name> must be <allowed>, got <value>`. */
export function invalid<E extends Error = InvalidArgumentError>(
  name: string,
  allowed: string,
  value: unknown,
  as: new (message: string) => E = InvalidArgumentError as unknown as new (message: string) => E,
): E {
  return new as(`${name} must be ${allowed}, got ${describe(value)}`);
}

/** {@link invalid} for a value that may be a secret: the message names only its type. */
export function invalidSecret(name: string, allowed: string, value: unknown): InvalidArgumentError {
  return new InvalidArgumentError(`${name} must be ${allowed}, got ${describeType(value)}`);
}

export function validateTtlSeconds(value: unknown): number {
  const ttl = value as number;
  if (Number.isInteger(ttl) && ttl >= MIN_TTL_SECONDS && ttl <= MAX_TTL_SECONDS) return ttl;
  throw invalid(
    'ttlSeconds',
    `a whole number of seconds from ${MIN_TTL_SECONDS} (etcd's minimum with default timing) to ${MAX_TTL_SECONDS} (etcd's maximum)`,
    value,
  );
}

export function validateSafetyMarginMs(value: unknown, ttlSeconds: number): number {
  const ttlMs = ttlSeconds * 1000;
  if (typeof value !== 'number' || !(value >= 0 && value < ttlMs)) {
    throw invalid(
      'safetyMarginMs',
      `a number of milliseconds in [0, ${ttlMs}) for ttlSeconds ${ttlSeconds}`,
      value,
    );
  }
  return value;
}

/**
 * A positive, finite duration in milliseconds, at most `max` (the deadlines handed to gRPC must
 * stay under ~4e14 ms; SDK timers clamp long waits themselves).
 */
export function validateDurationMs(name: string, value: unknown, max = Infinity): number {
  if (typeof value !== 'number' || !(value > 0 && value <= max) || !Number.isFinite(value)) {
    const most =
      max === Infinity ? '' : ` up to ${max} (about ${Math.round(max / 86_400_000)} days)`;
    throw invalid(name, `a positive, finite number of milliseconds${most}`, value);
  }
  return value;
}

export function validateSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  throw invalid('signal', 'an AbortSignal', value);
}

/**
 * A key prefix: never empty, which would make the client watch and read the whole keyspace. Nor
 * with an unpaired surrogate: on the wire it is U+FFFD, so no key etcd sends back would start
 * with the prefix as the client compares it, and every queue read would find no member.
 */
export function validatePrefix(name: string, value: unknown): string {
  if (typeof value === 'string' && value !== '' && !value.includes('\0')) {
    if (value.length <= MAX_NAME_LENGTH && !LONE_SURROGATE.test(value)) return value;
  }
  throw invalid(
    name,
    `a non-empty string without NUL of at most ${MAX_NAME_LENGTH} characters and without unpaired UTF-16 surrogates`,
    value,
  );
}

export function validateAttempts(value: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 10) {
    throw invalid('maxAttempts', 'a whole number from 1 to 10', value);
  }
  return value as number;
}

/** A lock holder's default value: who holds it, for people reading `etcdctl get`. */
let holderValueCache: string | undefined;
/** `hostname:pid`, read once: it is on every acquire's path. */
export const defaultHolderValue = (): string =>
  (holderValueCache ??= `${hostname()}:${process.pid}`);

/** A holder or candidate value: a well-formed string of at most `MAX_VALUE_BYTES` bytes. */
export function validateValue(name: string, value: unknown): string {
  if (
    typeof value === 'string' &&
    !LONE_SURROGATE.test(value) &&
    Buffer.byteLength(value) <= MAX_VALUE_BYTES
  ) {
    return value;
  }
  const size = typeof value === 'string' ? ` (${Buffer.byteLength(value)} bytes)` : '';
  throw invalid(
    name,
    `a string of at most ${MAX_VALUE_BYTES} bytes of UTF-8, without unpaired surrogates${size}`,
    value,
  );
}

/** An unpaired UTF-16 surrogate: it encodes to U+FFFD, so two such strings can share bytes. */
export const LONE_SURROGATE =
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Turns a lock or election name into its key segment.
 *
 * Keys are `<prefix><segment>/<lease id hex>` and a queue is the range `<prefix><segment>/`.
 * Unencoded, the range of `jobs` would contain the keys of `jobs/a` and the two locks would block
 * each other (a known flaw of etcd's Go recipe). Escaping `/` (and `%`, to stay reversible) keeps
 * every name's range its own, while names without them are unchanged, so `etcdctl lock
 * <prefix>jobs` and Go's `concurrency.NewMutex(s, "<prefix>jobs")` contend with the lock `jobs`.
 * Names must be well-formed UTF-16: a lone surrogate encodes to U+FFFD, so two different
 * ill-formed names would share one key.
 */
export function encodeName(
  name: unknown,
  what = 'name',
  { maxLength = MAX_NAME_LENGTH, as }: { maxLength?: number; as?: InvalidArgumentClass } = {},
): string {
  if (
    typeof name !== 'string' ||
    name.length === 0 ||
    name.length > maxLength ||
    name.includes('\0') ||
    LONE_SURROGATE.test(name)
  ) {
    throw invalid(
      what,
      `a non-empty string of at most ${maxLength} characters, without NUL or unpaired surrogates`,
      name,
      as,
    );
  }
  return name.replace(/%/g, '%25').replace(/\//g, '%2F');
}

/**
 * Normalises etcd endpoints to `scheme://host:port`. Accepts `host:port` (http assumed) and full
 * URLs, as an array or a comma-separated string; rejects anything etcd's gRPC client would
 * misread: paths, queries, user info, duplicates, and mixing http with https.
 */
export function validateEndpoints(value: unknown): string[] {
  const list = typeof value === 'string' ? value.split(',') : value;
  if (!Array.isArray(list) || list.length === 0) {
    throw invalid('endpoints', 'a non-empty string or array of "http(s)://host:port"', value);
  }
  const seen = new Set<string>();
  for (const raw of list as unknown[]) {
    const endpoint = parseEndpoint(raw);
    if (seen.has(endpoint)) {
      throw new InvalidArgumentError(`endpoints lists ${endpoint} twice; list each member once`);
    }
    seen.add(endpoint);
  }
  const out = [...seen];
  if (new Set(out.map((e) => e.slice(0, e.indexOf(':')))).size > 1) {
    throw new InvalidArgumentError(
      `endpoints mix http and https (${out.join(', ')}); use one scheme for all members`,
    );
  }
  return out;
}

/**
 * An endpoint as messages and logs show it: without anything up to its last `@` (user info,
 * even in a malformed URL) and without its query or fragment, which may hold credentials too.
 */
export function redactEndpoint(raw: string): string {
  return raw
    .trim()
    .replace(/^((?:[a-z][\w+.-]*:)?\/\/)?[^]*@/i, '$1***@')
    .replace(/[?#][^]*$/, '?…');
}

function parseEndpoint(raw: unknown): string {
  const allowed = 'an endpoint like "http://127.0.0.1:2379" or "127.0.0.1:2379"';
  if (typeof raw !== 'string' || raw.trim() === '') throw invalid('endpoint', allowed, raw);
  const shown = describe(redactEndpoint(raw));
  const bad = (why: string) =>
    new InvalidArgumentError(`endpoint ${shown} ${why}; expected ${allowed}`);
  const [, scheme = 'http', authority = '', rest] =
    /^(?:([a-z][\w+.-]*):\/\/)?([^/?#]*)(.*)$/i.exec(raw.trim())!;
  if (!/^https?$/i.test(scheme)) throw bad(`has scheme ${scheme}; only http and https are allowed`);
  // An unescaped '/', '?' or '#' in a password ends the authority early: look past it too.
  if (authority.includes('@') || rest?.includes('@'))
    throw bad('carries credentials; pass them as the auth option instead');
  if (rest !== '' && rest !== '/')
    throw bad('has a path, query or fragment; etcd endpoints are scheme://host:port only');
  // No default port: etcd has none, and a URL would silently drop 80/443.
  const [, host, port] = /^(\[[^\]]*\]|[^:]*):(\d+)$/.exec(authority) ?? [];
  if (port === undefined || Number(port) < 1 || Number(port) > 65535)
    throw bad('needs a port from 1 to 65535');
  if (!host) throw bad('has no host');
  if (!/^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)$/i.test(host))
    throw bad(`has an invalid host ${describe(host)}`);
  return `${scheme.toLowerCase()}://${host.toLowerCase()}:${Number(port)}`;
}

export function validateTls(tls: unknown, endpoints: string[]): TlsOptions | undefined {
  if (tls === undefined) return undefined;
  const t = (tls ?? {}) as Partial<TlsOptions>;
  const pem = (v: unknown) => typeof v === 'string' || Buffer.isBuffer(v);
  if (!pem(t.caCert)) {
    throw invalidSecret('tls', 'an object with caCert (a PEM string or Buffer)', tls);
  }
  checkOptions(t, ['caCert', 'clientCert', 'clientKey'], { name: 'tls' });
  const [cert, key] = [t.clientCert, t.clientKey];
  if ((cert !== undefined || key !== undefined) && !(pem(cert) && pem(key))) {
    const only = key === undefined ? 'tls.clientCert' : cert === undefined ? 'tls.clientKey' : '';
    throw new InvalidArgumentError(
      'tls.clientCert and tls.clientKey must be given together as PEM strings or Buffers ' +
        `(mutual TLS), or neither; got ${only ? `only ${only}` : `${describeType(cert)} and ${describeType(key)}`}`,
    );
  }
  if (endpoints.some((e) => e.startsWith('http:'))) {
    throw invalid('endpoints', 'https:// URLs when tls is set', endpoints.join(', '));
  }
  // Checked here so that bad PEM fails where the call is made, naming the field, instead of
  // deep inside gRPC (a CA that is not PEM would only fail later, as an untrusted server).
  if (!String(t.caCert).includes('-----BEGIN CERTIFICATE-----')) {
    throw new InvalidArgumentError(
      'tls.caCert must be PEM ("-----BEGIN CERTIFICATE-----" ...): the CA certificate that ' +
        "signed etcd's --cert-file",
    );
  }
  if (cert !== undefined) {
    try {
      createSecureContext({ cert, key: key! });
    } catch (err) {
      throw new InvalidArgumentError(
        `tls.clientCert and tls.clientKey must be a PEM certificate and its own private key: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }
  return t as TlsOptions;
}

export function validateAuth(auth: unknown): AuthOptions | undefined {
  const a = auth as Partial<AuthOptions> | null | undefined;
  if (a === undefined) return undefined;
  if (typeof a?.username !== 'string' || a.username === '' || typeof a.password !== 'string') {
    throw invalidSecret('auth', 'an object { username: non-empty string, password: string }', auth);
  }
  checkOptions(a, ['username', 'password'], { name: 'auth' });
  return { username: a.username, password: a.password };
}
