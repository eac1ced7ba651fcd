import { InvalidArgumentError } from './errors.js';

/**
 * Every default and every bound in one place. Durations carry their unit in their name:
 * `ttlSeconds` is etcd's own unit; everything measured locally is in milliseconds.
 */
export const defaults = {
  /** Lease TTL. Long enough to ride out a leader election, short enough to fail over quickly. */
  ttlSeconds: 10,
  /** How long `connect()` waits for the first answer from any endpoint. */
  dialTimeoutMs: 5_000,
  /** Deadline for each unary etcd call; every call has one, so nothing hangs on a frozen member. */
  callTimeoutMs: 5_000,
  /** Where lock keys live. `etcdctl lock <prefix><name>` contends for the same lock. */
  lockPrefix: '/leasehold/lock/',
  /** Where election keys live. */
  electionPrefix: '/leasehold/election/',
  /** Attempts for idempotent calls (reads, guarded txns, revoke); other calls are never retried. */
  maxAttempts: 3,
} as const;

/** PEM-encoded material for TLS to etcd. Endpoints must use https. */
export interface TlsOptions {
  caCert: Buffer | string;
  clientCert?: Buffer | string;
  clientKey?: Buffer | string;
}

/** etcd's username/password authentication. */
export interface AuthOptions {
  username: string;
  password: string;
}

/**
 * etcd's minimum TTL with its default timing (heartbeat 100 ms, election timeout 1000 ms) is
 * 2 s; it silently raises anything lower, which would make the local deadline wrong. We reject
 * rather than warn: a shorter TTL cannot be had from a default etcd anyway.
 */
export const MIN_TTL_SECONDS = 2;
/** etcd's `MaxLeaseTTL`. */
export const MAX_TTL_SECONDS = 9_000_000_000;
export const MAX_NAME_LENGTH = 1024;

/**
 * Default safety margin: 10% of the TTL, at most one second. It covers the client's clock
 * running slower than the server's and timers firing late on a busy event loop.
 */
export function defaultSafetyMarginMs(ttlSeconds: number): number {
  return Math.min(1_000, ttlSeconds * 100);
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number') return String(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

export function validateTtlSeconds(value: unknown): number {
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < MIN_TTL_SECONDS ||
    value > MAX_TTL_SECONDS
  ) {
    throw new InvalidArgumentError(
      `ttlSeconds must be a whole number of seconds from ${MIN_TTL_SECONDS} (etcd's minimum with default timing) to ${MAX_TTL_SECONDS} (etcd's maximum), got ${describe(value)}`,
    );
  }
  return value;
}

export function validateSafetyMarginMs(value: unknown, ttlSeconds: number): number {
  const ttlMs = ttlSeconds * 1000;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value >= ttlMs) {
    throw new InvalidArgumentError(
      `safetyMarginMs must be a number of milliseconds in [0, ${ttlMs}) for ttlSeconds ${ttlSeconds}, got ${describe(value)}`,
    );
  }
  return value;
}

/** A positive, finite duration in milliseconds. */
export function validateDurationMs(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidArgumentError(
      `${name} must be a positive, finite number of milliseconds, got ${describe(value)}`,
    );
  }
  return value;
}

export function validateSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) {
    throw new InvalidArgumentError(`signal must be an AbortSignal, got ${describe(value)}`);
  }
  return value;
}

export function validatePrefix(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.includes('\0') || value.length > MAX_NAME_LENGTH) {
    throw new InvalidArgumentError(
      `${name} must be a string without NUL of at most ${MAX_NAME_LENGTH} characters, got ${describe(value)}`,
    );
  }
  return value;
}

export function validateAttempts(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 10) {
    throw new InvalidArgumentError(
      `maxAttempts must be a whole number from 1 to 10, got ${describe(value)}`,
    );
  }
  return value;
}

/**
 * Normalises etcd endpoints to `scheme://host:port`. Accepts `host:port` (http assumed) and
 * full URLs; rejects anything etcd's gRPC client would misread: paths, queries, user info,
 * duplicates, and mixing http with https (one TLS setting applies to every endpoint).
 */
export function validateEndpoints(value: unknown): string[] {
  const list = typeof value === 'string' ? value.split(',') : value;
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidArgumentError(
      `endpoints must be a non-empty string or array of "http(s)://host:port", got ${describe(value)}`,
    );
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
  const schemes = new Set(out.map((e) => e.slice(0, e.indexOf(':'))));
  if (schemes.size > 1) {
    throw new InvalidArgumentError(
      `endpoints mix http and https (${out.join(', ')}); use one scheme for all members`,
    );
  }
  return out;
}

function parseEndpoint(raw: unknown): string {
  const allowed = 'an endpoint like "http://127.0.0.1:2379" or "127.0.0.1:2379"';
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw new InvalidArgumentError(`endpoint must be ${allowed}, got ${describe(raw)}`);
  }
  const text = raw.trim();
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  // URL drops default ports (80/443); etcd has no such default, so require an explicit port.
  const authority = /^[^:]+:\/\/([^/?#]*)/.exec(withScheme)?.[1] ?? '';
  const port = /:(\d+)$/.exec(authority)?.[1];
  if (port === undefined || Number(port) < 1 || Number(port) > 65535) {
    throw new InvalidArgumentError(
      `endpoint ${describe(raw)} needs a port from 1 to 65535; expected ${allowed}`,
    );
  }
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new InvalidArgumentError(
      `endpoint ${describe(raw)} is not a valid URL; expected ${allowed}`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError(
      `endpoint ${describe(raw)} has scheme ${url.protocol.slice(0, -1)}; only http and https are allowed`,
    );
  }
  if (url.hostname === '') {
    throw new InvalidArgumentError(`endpoint ${describe(raw)} has no host; expected ${allowed}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new InvalidArgumentError(
      `endpoint ${describe(raw)} carries credentials; pass them as the auth option instead`,
    );
  }
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    throw new InvalidArgumentError(
      `endpoint ${describe(raw)} has a path, query or fragment; etcd endpoints are scheme://host:port only`,
    );
  }
  return `${url.protocol}//${url.hostname}:${Number(port)}`;
}
