/**
 * Every bad input the public API takes, in one table: connect options, sessions, lock and
 * election calls, fence tokens, resources and values on every adapter, and the cron scheduler.
 * Each row must fail at the call (a synchronous throw, or a rejection before the row's deadline)
 * with the package's typed error (checked by its brand guard and `code`), whose message names the
 * option and the value; nothing may be accepted and nothing may hang. Calls that need a client
 * use the run's etcd, so a call that wrongly got past validation would really succeed (and be
 * caught as accepted) instead of failing for lack of a server.
 *
 * Rows marked `fixme` are known SDK defects: they run as expected failures (`it.fails`), so the
 * run stays green while they stand and turns red the day they are fixed (then drop the mark).
 */
import {
  connect,
  isInvalidArgumentError as isAnyInvalid,
  isLeaseholdError,
  MAX_TTL_SECONDS,
  MAX_VALUE_BYTES,
  type Leasehold,
} from '@leasehold/core';
import { createScheduler, isCronError, type Scheduler } from '@leasehold/cron';
import {
  isFenceError,
  isInvalidTokenError,
  memoryStore,
  parseToken,
  type FencedStore,
  type TokenInput,
} from '@leasehold/fence';
import { etcdStore, fencedTxn } from '@leasehold/fence/etcd';
import { withFence as memoryWithFence } from '@leasehold/fence/memory';
import {
  postgresStore,
  postgresStoreDDL,
  upsertFencedRow as upsertPostgresRow,
  withFence as postgresWithFence,
} from '@leasehold/fence/postgres';
import { fencedSet, redisStore } from '@leasehold/fence/redis';
import {
  sqliteStore,
  sqliteStoreDDL,
  upsertFencedRow,
  withFence as sqliteWithFence,
} from '@leasehold/fence/sqlite';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  findPostgres,
  findRedis,
  openSqlite,
  pgPool,
  redisClient,
  uniqueName,
  type PgPool,
} from '../fence/stores.js';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const lockPrefix = uniquePrefix('bad-table-locks');
const electionPrefix = uniquePrefix('bad-table-elections');
const cronPrefix = uniquePrefix('bad-table-cron');
const fencePrefix = uniquePrefix('bad-table-fence');
/** connect() rows dial with this; a row's deadline is this plus a margin. */
const DIAL_MS = 2_000;
const DEFAULT_DEADLINE_MS = 3_000;

let client: Leasehold;
let scheduler: Scheduler;

beforeAll(async () => {
  client = await connect({ endpoints, lockPrefix, electionPrefix, dialTimeoutMs: 5_000 });
  scheduler = await createScheduler(client, { prefix: cronPrefix });
});

afterAll(async () => {
  await scheduler?.stop();
  await client?.close();
});

/** What a bad input must produce. */
interface Expected {
  /** The package's brand guard (so `instanceof` across copies does not matter). */
  guard: (err: unknown) => boolean;
  code: string;
  name: string;
  /** Every pattern must match the message: the option's name and the value it got. */
  message: RegExp[];
}

interface Row {
  /** The call, e.g. `acquire`. */
  call: string;
  /** The bad input, e.g. `timeoutMs NaN`. */
  input: string;
  run: () => unknown;
  expected: Expected | { reason: unknown };
  deadlineMs?: number;
  /** A known SDK defect: what happens instead. The row runs as an expected failure. */
  fixme?: string;
}

// Bad input of every package answers to one brand (each package's guard is true for all), so
// a row also checks whose class it is: each package throws its own.
const isCoreInvalid = (err: unknown) => isAnyInvalid(err) && isLeaseholdError(err);
const isCronInvalid = (err: unknown) => isAnyInvalid(err) && isCronError(err);
const isFenceInvalid = (err: unknown) => isAnyInvalid(err) && isFenceError(err);

const core = (...message: RegExp[]): Expected => ({
  guard: isCoreInvalid,
  code: 'INVALID_ARGUMENT',
  name: 'InvalidArgumentError',
  message,
});
const cron = (...message: RegExp[]): Expected => ({
  guard: isCronInvalid,
  code: 'INVALID_ARGUMENT',
  name: 'InvalidArgumentError',
  message,
});
const fenceArg = (...message: RegExp[]): Expected => ({
  guard: isFenceInvalid,
  code: 'INVALID_ARGUMENT',
  name: 'InvalidArgumentError',
  message,
});
const fenceToken = (...message: RegExp[]): Expected => ({
  guard: isInvalidTokenError,
  code: 'INVALID_TOKEN',
  name: 'InvalidTokenError',
  message,
});

/** `got <value>` as the SDK's messages print it. */
const got = (shown: string): RegExp => new RegExp(`got ${escape(shown)}`);
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

type Outcome =
  | { kind: 'threw'; error: unknown }
  | { kind: 'rejected'; error: unknown; afterMs: number }
  | { kind: 'accepted'; value: unknown }
  | { kind: 'hung' };

/** Runs the call with a deadline; whatever it accepted is disposed of. */
async function outcomeOf(run: () => unknown, deadlineMs: number): Promise<Outcome> {
  let result: unknown;
  try {
    result = run();
  } catch (error) {
    return { kind: 'threw', error };
  }
  if (!(result instanceof Promise)) {
    await dispose(result);
    return { kind: 'accepted', value: result };
  }
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => {
    timer = setTimeout(() => resolve('hung'), deadlineMs);
  });
  try {
    const settled = await Promise.race([
      result.then(
        (value: unknown) => ({ kind: 'accepted' as const, value }),
        (error: unknown) => ({
          kind: 'rejected' as const,
          error,
          afterMs: performance.now() - started,
        }),
      ),
      hung,
    ]);
    if (settled === 'hung') {
      // Whatever it resolves to later is disposed of too.
      result.then(dispose, () => undefined);
      return { kind: 'hung' };
    }
    if (settled.kind === 'accepted') await dispose(settled.value);
    return settled;
  } finally {
    clearTimeout(timer);
  }
}

async function dispose(value: unknown): Promise<void> {
  if (typeof value !== 'object' || value === null) return;
  const v = value as {
    [Symbol.asyncDispose]?: () => Promise<void>;
    return?: () => unknown;
  };
  const asyncDispose = v[Symbol.asyncDispose];
  try {
    if (typeof asyncDispose === 'function') await asyncDispose.call(v);
    else if (typeof v.return === 'function') await v.return();
  } catch {
    // Best effort: the row already failed as "accepted".
  }
}

function describeOutcome(outcome: Outcome): string {
  switch (outcome.kind) {
    case 'accepted':
      return `accepted (resolved or returned ${typeof outcome.value})`;
    case 'hung':
      return 'hung past its deadline';
    default: {
      const e = outcome.error as { name?: string; code?: string; message?: string };
      return `${outcome.kind} ${e?.name ?? typeof e} (code ${String(e?.code)}): ${e?.message ?? inspect(e)}`;
    }
  }
}

function table(title: string, rows: Row[]): void {
  describe(title, () => {
    for (const row of rows) {
      // LEASEHOLD_FIXME_ROWS=run shows what a FIXME row does now, as an ordinary failing test.
      const test = row.fixme && process.env.LEASEHOLD_FIXME_ROWS !== 'run' ? it.fails : it;
      const label = `${row.call}: ${row.input}${row.fixme ? ` [FIXME: ${row.fixme}]` : ''}`;
      test(label, async () => {
        const outcome = await outcomeOf(row.run, row.deadlineMs ?? DEFAULT_DEADLINE_MS);
        const seen = describeOutcome(outcome);
        expect(outcome.kind === 'threw' || outcome.kind === 'rejected', seen).toBe(true);
        if (outcome.kind !== 'threw' && outcome.kind !== 'rejected') return;
        if ('reason' in row.expected) {
          expect(outcome.error, seen).toBe(row.expected.reason);
          return;
        }
        const { guard, code, name, message } = row.expected;
        expect(guard(outcome.error), `typed error expected; ${seen}`).toBe(true);
        const error = outcome.error as Error & { code: string };
        expect(error.code, seen).toBe(code);
        expect(error.name, seen).toBe(name);
        for (const pattern of message) expect(error.message).toMatch(pattern);
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// connect()

const dial = { endpoints, dialTimeoutMs: DIAL_MS } as const;
const connectRow = (input: string, options: unknown, expected: Expected, fixme?: string): Row => ({
  call: 'connect',
  input,
  run: () => connect(options as Parameters<typeof connect>[0]),
  expected,
  deadlineMs: DIAL_MS + 2_000,
  ...(fixme && { fixme }),
});
const ENDPOINT = /expected an endpoint like "http:\/\/127\.0\.0\.1:2379"|endpoint must be/;
const DURATION = /must be a positive, finite number of milliseconds/;
const PREFIX = /must be a non-empty string without NUL of at most 1024 characters/;
const TTL = /ttlSeconds must be a whole number of seconds from 2 .* to 9000000000/;
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const aborted = new Error('aborted before the call');

table('connect options', [
  connectRow('options undefined', undefined, core(/^options must be an object/, got('undefined'))),
  connectRow(
    'attemptTimeoutMs above callTimeoutMs',
    { ...dial, callTimeoutMs: 1_000, attemptTimeoutMs: 9_000 },
    core(/^attemptTimeoutMs must be at most callTimeoutMs \(1000\)/, got('9000')),
  ),
  connectRow('options null', null, core(/^options must be an object/, got('null'))),
  connectRow('options a string', 'http://127.0.0.1:2379', core(/^options must be an object/)),
  connectRow(
    'endpoints missing',
    { dialTimeoutMs: DIAL_MS },
    core(/^endpoints must be/, got('undefined')),
  ),
  connectRow('endpoints ""', { ...dial, endpoints: '' }, core(ENDPOINT, /""/)),
  connectRow(
    'endpoints []',
    { ...dial, endpoints: [] },
    core(/^endpoints must be a non-empty/, got('an array')),
  ),
  connectRow('endpoints [""]', { ...dial, endpoints: [''] }, core(ENDPOINT, /""/)),
  connectRow('endpoints ["   "]', { ...dial, endpoints: ['   '] }, core(ENDPOINT)),
  connectRow(
    'endpoints 2379 (a number)',
    { ...dial, endpoints: 2379 },
    core(/^endpoints must be/, got('2379')),
  ),
  connectRow(
    'endpoints [2379]',
    { ...dial, endpoints: [2379] },
    core(/^endpoint must be/, got('2379')),
  ),
  connectRow(
    'endpoints [null]',
    { ...dial, endpoints: [null] },
    core(/^endpoint must be/, got('null')),
  ),
  connectRow(
    'endpoints an object',
    { ...dial, endpoints: { host: 'h' } },
    core(/^endpoints must be/, got('object')),
  ),
  connectRow(
    'endpoint ftp scheme',
    { ...dial, endpoints: 'ftp://127.0.0.1:2379' },
    core(/"ftp:\/\/127\.0\.0\.1:2379" has scheme ftp/),
  ),
  connectRow(
    'endpoint without a port',
    { ...dial, endpoints: 'http://127.0.0.1' },
    core(/"http:\/\/127\.0\.0\.1" needs a port from 1 to 65535/),
  ),
  connectRow(
    'endpoint port 0',
    { ...dial, endpoints: 'http://127.0.0.1:0' },
    core(/:0" needs a port from 1 to 65535/),
  ),
  connectRow(
    'endpoint port 65536',
    { ...dial, endpoints: 'http://127.0.0.1:65536' },
    core(/:65536" needs a port from 1 to 65535/),
  ),
  connectRow(
    'endpoint port 99999999999',
    { ...dial, endpoints: '127.0.0.1:99999999999' },
    core(/needs a port from 1 to 65535/),
  ),
  connectRow(
    'endpoint port -1',
    { ...dial, endpoints: 'http://127.0.0.1:-1' },
    core(/:-1" needs a port/),
  ),
  connectRow(
    'endpoint with credentials',
    { ...dial, endpoints: 'http://root:secret@127.0.0.1:2379' },
    core(/carries credentials; pass them as the auth option/),
  ),
  connectRow(
    'endpoint with a path',
    { ...dial, endpoints: 'http://127.0.0.1:2379/v3' },
    core(/has a path, query or fragment/),
  ),
  connectRow(
    'endpoint with a query',
    { ...dial, endpoints: 'http://127.0.0.1:2379?x=1' },
    core(/has a path, query or fragment/),
  ),
  connectRow(
    'endpoint with no host',
    { ...dial, endpoints: 'http://:2379' },
    core(/"http:\/\/:2379" has no host/),
  ),
  connectRow(
    'endpoint with a bad host',
    { ...dial, endpoints: 'http://ex ample:2379' },
    core(/has an invalid host "ex ample"/),
  ),
  connectRow(
    'endpoint a broken IPv6 literal',
    { ...dial, endpoints: 'http://[::1:2379' },
    core(/"http:\/\/\[::1:2379"/),
  ),
  connectRow(
    'endpoints listed twice',
    { ...dial, endpoints: [endpoints[0], endpoints[0]] },
    core(/lists http:\/\/.* twice/),
  ),
  connectRow(
    'endpoints mixing http and https',
    { ...dial, endpoints: ['http://127.0.0.1:1', 'https://127.0.0.1:2'] },
    core(/endpoints mix http and https/),
  ),
  connectRow(
    'tls a string',
    { ...dial, tls: CA },
    core(/^tls must be an object with caCert/, /got string$/), // the material itself stays out
  ),
  connectRow(
    'tls null',
    { ...dial, tls: null },
    core(/^tls must be an object with caCert/, got('null')),
  ),
  connectRow(
    'tls without caCert',
    { ...dial, tls: {} },
    core(/^tls must be an object with caCert/, got('object')),
  ),
  connectRow(
    'tls caCert a number',
    { ...dial, tls: { caCert: 42 } },
    core(/^tls must be an object with caCert/),
  ),
  connectRow(
    'tls caCert not PEM',
    { ...dial, endpoints: 'https://127.0.0.1:2379', tls: { caCert: 'not a certificate' } },
    core(/^tls\.caCert must be PEM/),
  ),
  connectRow(
    'tls clientCert without clientKey',
    { ...dial, endpoints: 'https://127.0.0.1:2379', tls: { caCert: CA, clientCert: CA } },
    core(/given together .* got only tls\.clientCert/),
  ),
  connectRow(
    'tls clientKey without clientCert',
    { ...dial, endpoints: 'https://127.0.0.1:2379', tls: { caCert: CA, clientKey: 'k' } },
    core(/got only tls\.clientKey/),
  ),
  connectRow(
    'tls clientCert and clientKey not PEM',
    {
      ...dial,
      endpoints: 'https://127.0.0.1:2379',
      tls: { caCert: CA, clientCert: 'c', clientKey: 'k' },
    },
    core(/tls\.clientCert and tls\.clientKey must be a PEM certificate/),
  ),
  connectRow(
    'tls with http endpoints',
    { ...dial, tls: { caCert: CA } },
    core(/^endpoints must be https:\/\/ URLs when tls is set/),
  ),
  connectRow(
    'auth a string',
    { ...dial, auth: 'root:secret' },
    core(/^auth must be an object \{ username/, /got string$/), // a credential stays out
  ),
  connectRow('auth null', { ...dial, auth: null }, core(/^auth must be an object/, got('null'))),
  connectRow(
    'auth username ""',
    { ...dial, auth: { username: '', password: 'p' } },
    core(/^auth must be an object \{ username: non-empty string/),
  ),
  connectRow(
    'auth without password',
    { ...dial, auth: { username: 'root' } },
    core(/^auth must be/),
  ),
  connectRow(
    'auth username a number',
    { ...dial, auth: { username: 7, password: 'p' } },
    core(/^auth must be/),
  ),
  ...(['dialTimeoutMs', 'callTimeoutMs', 'recheckIntervalMs', 'stallThresholdMs'] as const).flatMap(
    (option) =>
      (
        [
          [0, '0'],
          [-1, '-1'],
          [Number.NaN, 'NaN'],
          [Number.POSITIVE_INFINITY, 'Infinity'],
          ['1000', '"1000"'],
          [2 ** 31, '2147483648'],
          [1e300, '1e+300'],
        ] as const
      ).map(([value, shown]) =>
        connectRow(
          `${option} ${shown}`,
          { ...dial, [option]: value },
          core(new RegExp(`^${option} `), DURATION, got(shown)),
        ),
      ),
  ),
  ...(
    [
      [0, '0'],
      [11, '11'],
      [1.5, '1.5'],
      [Number.NaN, 'NaN'],
      ['3', '"3"'],
    ] as const
  ).map(([value, shown]) =>
    connectRow(
      `maxAttempts ${shown}`,
      { ...dial, maxAttempts: value },
      core(/^maxAttempts must be a whole number from 1 to 10/, got(shown)),
    ),
  ),
  connectRow('lockPrefix ""', { ...dial, lockPrefix: '' }, core(/^lockPrefix /, PREFIX, got('""'))),
  connectRow('lockPrefix with NUL', { ...dial, lockPrefix: '/a\0/' }, core(/^lockPrefix /, PREFIX)),
  connectRow(
    'lockPrefix a number',
    { ...dial, lockPrefix: 7 },
    core(/^lockPrefix /, PREFIX, got('7')),
  ),
  connectRow(
    'lockPrefix of 1025 characters',
    { ...dial, lockPrefix: 'p'.repeat(1025) },
    core(/^lockPrefix /, PREFIX),
  ),
  connectRow(
    'electionPrefix ""',
    { ...dial, electionPrefix: '' },
    core(/^electionPrefix /, PREFIX),
  ),
  connectRow(
    'prefixes equal',
    { ...dial, lockPrefix: '/same/', electionPrefix: '/same/' },
    core(/^electionPrefix must be a prefix that neither contains nor is contained in lockPrefix/),
  ),
  connectRow(
    'lockPrefix inside electionPrefix',
    { ...dial, lockPrefix: '/app/election/lock/', electionPrefix: '/app/election/' },
    core(/^electionPrefix must be a prefix that neither contains/),
  ),
  connectRow(
    'session null',
    { ...dial, session: null },
    core(/^session must be an object/, got('null')),
  ),
  connectRow('session ttlSeconds 1', { ...dial, session: { ttlSeconds: 1 } }, core(TTL, got('1'))),
  connectRow(
    'session safetyMarginMs -1',
    { ...dial, session: { safetyMarginMs: -1 } },
    core(/^safetyMarginMs must be/, got('-1')),
  ),
  connectRow(
    'session leaseId',
    { ...dial, session: { leaseId: 1n } },
    core(/^session\.leaseId must be left out/),
  ),
  connectRow(
    'signal not an AbortSignal',
    { ...dial, signal: { aborted: false } },
    core(/^signal must be an AbortSignal/, got('object')),
  ),
  {
    call: 'connect',
    input: 'signal already aborted',
    run: () => connect({ ...dial, signal: AbortSignal.abort(aborted) }),
    expected: { reason: aborted },
    deadlineMs: DIAL_MS + 2_000,
  },
  connectRow('logger without methods', { ...dial, logger: { log: () => {} } }, core(/logger/)),
  connectRow('logger a number', { ...dial, logger: 42 }, core(/logger/, /42/)),
  connectRow(
    'telemetry a number',
    { ...dial, telemetry: 42 },
    core(/^telemetry must be/, got('42')),
  ),
  connectRow(
    'telemetry meterProvider without getMeter',
    { ...dial, telemetry: { meterProvider: {} } },
    core(/^telemetry must be/),
  ),
  connectRow(
    'misspelt option dialTimeOutMs',
    { ...dial, dialTimeOutMs: 100 },
    // Only documented options are offered: the tests' own `clock` is accepted but not listed.
    core(
      /^options\.dialTimeOutMs must be left out \(not an option; allowed: endpoints, (?!.*clock)/,
    ),
  ),
]);

// ---------------------------------------------------------------------------------------------
// Names, shared by locks, elections and their reads.

const badNames: [unknown, string][] = [
  ['', '""'],
  ['a\0b', '"a\\u0000b"'],
  ['n'.repeat(1025), `"${'n'.repeat(64)}…"`],
  ['\uD800', ''],
  [42, '42'],
  [undefined, 'undefined'],
  [null, 'null'],
  [{ name: 'x' }, 'object'],
  [['x'], 'an array'],
];
const NAME =
  /must be a non-empty string of at most 1024 characters, without NUL or unpaired surrogates/;
/** A test title's view of a value: long strings by their length. */
const show = (value: unknown): string =>
  typeof value === 'string' && value.length > 20
    ? `a string of ${value.length} characters`
    : inspect(value, { breakLength: Infinity });

const nameRows = (call: string, run: (name: string) => unknown, what: RegExp): Row[] =>
  badNames.map(([name, shown]) => ({
    call,
    input: `name ${show(name)}`,
    run: () => run(name as string),
    expected: core(what, NAME, ...(shown ? [got(shown)] : [])),
  }));

table('names', [
  ...nameRows('acquire', (n) => client.acquire(n, { timeoutMs: 1_000 }), /^name /),
  ...nameRows('tryAcquire', (n) => client.tryAcquire(n), /^name /),
  ...nameRows('withLock', (n) => client.withLock(n, () => 'ran', { timeoutMs: 1_000 }), /^name /),
  ...nameRows('holder', (n) => client.holder(n), /^name /),
  ...nameRows('campaign', (n) => client.campaign(n, 'v', { timeoutMs: 1_000 }), /^election /),
  ...nameRows('leader', (n) => client.leader(n), /^election /),
  ...nameRows('observe', (n) => client.observe(n), /^election /),
  ...nameRows(
    'lead',
    (n) => client.lead(n, 'v', () => {}, { signal: AbortSignal.timeout(1_000) }),
    /^election /,
  ),
]);

// ---------------------------------------------------------------------------------------------
// Sessions and TTLs.

const sessionRow = (
  input: string,
  options: unknown,
  expected: Row['expected'],
  fixme?: string,
): Row => ({
  call: 'session',
  input,
  run: () => client.session(options as Parameters<Leasehold['session']>[0]),
  expected,
  ...(fixme && { fixme }),
});

table('sessions', [
  sessionRow(
    'misspelt option ttlSecs',
    { ttlSecs: 5 },
    core(/^options\.ttlSecs must be left out \(not an option; allowed: ttlSeconds, /),
  ),
  sessionRow('options null', null, core(/^options must be an object/, got('null'))),
  sessionRow('options 42', 42, core(/^options must be an object/, got('42'))),
  ...(
    [
      [0, '0'],
      [1, '1'],
      [-2, '-2'],
      [1.5, '1.5'],
      [2.5, '2.5'],
      [Number.NaN, 'NaN'],
      [Number.POSITIVE_INFINITY, 'Infinity'],
      [MAX_TTL_SECONDS + 1, String(MAX_TTL_SECONDS + 1)],
      ['10', '"10"'],
      [10n, '10n'],
    ] as const
  ).map(([ttlSeconds, shown]) =>
    sessionRow(`ttlSeconds ${shown}`, { ttlSeconds }, core(TTL, got(shown))),
  ),
  ...(
    [
      [-1, '-1'],
      [10_000, '10000'],
      [Number.NaN, 'NaN'],
      ['1', '"1"'],
    ] as const
  ).map(([safetyMarginMs, shown]) =>
    sessionRow(
      `safetyMarginMs ${shown} with a 10 s TTL`,
      { safetyMarginMs },
      core(/^safetyMarginMs must be a number of milliseconds in \[0, 10000\)/, got(shown)),
    ),
  ),
  ...(
    [
      [0n, '0n'],
      [-1n, '-1n'],
      [2n ** 63n, '9223372036854775808n'],
      [1, '1'],
      ['12', '"12"'],
    ] as const
  ).map(([leaseId, shown]) =>
    sessionRow(
      `leaseId ${shown}`,
      { leaseId },
      core(/^options\.leaseId must be a lease id as a bigint from 1 to 2\^63-1/, got(shown)),
    ),
  ),
  sessionRow(
    'leaseId with ttlSeconds',
    { leaseId: 1n, ttlSeconds: 10 },
    core(/^options\.ttlSeconds must be left out with leaseId/),
  ),
  sessionRow(
    'signal not an AbortSignal',
    { signal: 'stop' },
    core(/^signal must be an AbortSignal/, got('"stop"')),
  ),
  sessionRow('signal already aborted', { signal: AbortSignal.abort(aborted) }, { reason: aborted }),
]);

// ---------------------------------------------------------------------------------------------
// Lock and election calls: options, timeouts, signals, values, sessions, callbacks.

const fakeSession = { leaseId: 1n, signal: new AbortController().signal };
const hugeValue = 'x'.repeat(MAX_VALUE_BYTES + 1);
const VALUE =
  /^value must be a string of at most 65536 bytes of UTF-8, without unpaired surrogates/;

interface CallShape {
  call: string;
  /** Calls it with these options (anything, since the point is bad ones). */
  run: (options: unknown) => unknown;
  /** Takes `timeoutMs`. */
  timeout: boolean;
  /** Takes a holder `value`. */
  value: boolean;
}

const calls: CallShape[] = [
  { call: 'acquire', run: (o) => client.acquire('opts', o as never), timeout: true, value: true },
  {
    call: 'tryAcquire',
    run: (o) => client.tryAcquire('opts', o as never),
    timeout: false,
    value: true,
  },
  {
    call: 'withLock',
    run: (o) => client.withLock('opts', () => 'ran', o as never),
    timeout: true,
    value: true,
  },
  {
    call: 'campaign',
    run: (o) => client.campaign('opts', 'v', o as never),
    timeout: true,
    value: false,
  },
  {
    call: 'lead',
    run: (o) => client.lead('opts', 'v', () => {}, o as never),
    timeout: false,
    value: false,
  },
];

const optionRows: Row[] = calls.flatMap(({ call, run, timeout, value }) => {
  const rows: Row[] = [
    {
      call,
      input: 'options null',
      run: () => run(null),
      expected: core(/^options must be an object/, got('null')),
    },
    {
      call,
      input: 'options "fast"',
      run: () => run('fast'),
      expected: core(/^options must be an object/, got('"fast"')),
    },
    {
      call,
      input: 'signal not an AbortSignal',
      run: () => run({ signal: { aborted: false } }),
      expected: core(/^signal must be an AbortSignal/, got('object')),
    },
    {
      call,
      input: 'session not a Session',
      run: () => run({ session: fakeSession }),
      expected: core(/session must be a Session/),
    },
  ];
  if (call !== 'lead') {
    rows.push({
      call,
      input: 'signal already aborted',
      run: () => run({ signal: AbortSignal.abort(aborted) }),
      expected: { reason: aborted },
    });
  }
  if (timeout) {
    for (const [timeoutMs, shown] of [
      [0, '0'],
      [-1, '-1'],
      [Number.NaN, 'NaN'],
      [Number.POSITIVE_INFINITY, 'Infinity'],
      ['100', '"100"'],
    ] as const) {
      // (null, like undefined, means the option's default: no timeout.)
      rows.push({
        call,
        input: `timeoutMs ${shown}`,
        run: () => run({ timeoutMs }),
        expected: core(/^timeoutMs /, DURATION, got(shown)),
      });
    }
  }
  if (value) {
    for (const [v, shown] of [
      [hugeValue, '(65537 bytes)'],
      ['\uDC00', ''],
      [42, 'got 42'],
      [Buffer.from('v'), 'got object'],
    ] as const) {
      rows.push({
        call,
        input: `value ${shown || 'lone surrogate'}`,
        run: () => run({ value: v }),
        expected: core(VALUE, ...(shown ? [new RegExp(escape(shown))] : [])),
      });
    }
  }
  rows.push({
    call,
    input: 'misspelt option timeOutMs',
    run: () => run({ timeOutMs: 100, signal: AbortSignal.timeout(1_500) }),
    expected: core(/^options\.timeOutMs must be left out \(not an option; allowed: signal, /),
    deadlineMs: 2_500,
  });
  return rows;
});

table('lock and election options', [
  ...optionRows,
  ...(
    [
      [undefined, 'undefined'],
      [42, '42'],
      ['run', '"run"'],
    ] as const
  ).map(([fn, shown]): Row => ({
    call: 'withLock',
    input: `fn ${shown}`,
    run: () => client.withLock('fn', fn as never),
    expected: core(/^withLock fn must be a function/, got(shown)),
  })),
  ...(
    [
      [hugeValue, /\(65537 bytes\)/],
      [42, got('42')],
      [undefined, got('undefined')],
      [null, got('null')],
    ] as const
  ).map(([v, pattern]): Row => ({
    call: 'campaign',
    input: `value ${v === hugeValue ? '65537 bytes' : String(v)}`,
    run: () => client.campaign('values', v as never, { timeoutMs: 1_000 }),
    expected: core(VALUE, pattern),
  })),
  ...(
    [
      [undefined, 'undefined'],
      [{ run() {} }, 'object'],
    ] as const
  ).map(([work, shown]): Row => ({
    call: 'lead',
    input: `work ${shown}`,
    run: () => client.lead('work', 'v', work as never),
    expected: core(/^work must be a function to run while leader/, got(shown)),
  })),
  ...(
    [
      [0, '0'],
      [Number.NaN, 'NaN'],
      [2 ** 31, '2147483648'],
    ] as const
  ).map(([drainTimeoutMs, shown]): Row => ({
    call: 'lead',
    input: `drainTimeoutMs ${shown}`,
    run: () => client.lead('drain', 'v', () => {}, { drainTimeoutMs }),
    expected: core(/^drainTimeoutMs /, DURATION, got(shown)),
  })),
  {
    call: 'lead',
    input: 'recampaign "yes"',
    run: () => client.lead('recampaign', 'v', () => {}, { recampaign: 'yes' as never }),
    expected: core(/^recampaign must be a boolean/, got('"yes"')),
  },
  {
    call: 'observe',
    input: 'options null',
    run: () => client.observe('o', null as never),
    expected: core(/^options must be an object/, got('null')),
  },
  {
    call: 'observe',
    input: 'signal not an AbortSignal',
    run: () => client.observe('o', { signal: 42 as never }),
    expected: core(/^signal must be an AbortSignal/, got('42')),
  },
]);

// ---------------------------------------------------------------------------------------------
// @leasehold/fence: tokens, resources and values on every adapter.

const badTokens: [unknown, RegExp][] = [
  [0n, /got 0n: tokens start at 1/],
  [-1n, /-1n: tokens start at 1/],
  [2n ** 63n, /got 9223372036854775808n: above the int64 maximum/],
  [2n ** 64n - 1n, /got 18446744073709551615n: above the int64 maximum/],
  [2n ** 64n, /got 18446744073709551616n: above the int64 maximum/],
  [0, /got 0: tokens start at 1/],
  [-5, /got -5: tokens start at 1/],
  [1.5, /got 1\.5: not an integer/],
  [Number.NaN, /got NaN: not an integer/],
  [Number.POSITIVE_INFINITY, /got Infinity: not an integer/],
  [2 ** 53 + 2, /got 9007199254740994: numbers above 2\^53-1 lose precision; pass a bigint/],
  [2 ** 64, /numbers above 2\^53-1 lose precision/],
  ['', /got "": not a canonical decimal string/],
  ['0', /"0": not a canonical decimal string/],
  ['007', /"007": not a canonical decimal string/],
  ['+7', /"\+7": not a canonical decimal string/],
  ['-7', /"-7": not a canonical decimal string/],
  [' 7', /" 7": not a canonical decimal string/],
  ['7 ', /"7 ": not a canonical decimal string/],
  ['1e3', /"1e3": not a canonical decimal string/],
  ['0x10', /"0x10": not a canonical decimal string/],
  ['7n', /"7n": not a canonical decimal string/],
  ['seven', /"seven": not a canonical decimal string/],
  ['9223372036854775808', /"9223372036854775808": above the int64 maximum/],
  ['1'.repeat(400), /above the int64 maximum/],
  [null, /got null: not a bigint, string or number/],
  [undefined, /got undefined: not a bigint, string or number/],
  [true, /got boolean: not a bigint, string or number/],
  [{ token: 7n }, /got object: not a bigint, string or number/],
];

let pool: PgPool | undefined;
let redis: ReturnType<typeof redisClient> | undefined;
const sqlite = openSqlite(':memory:');
for (const statement of sqliteStoreDDL()) sqlite.exec(statement);
sqlite.exec('CREATE TABLE bad_rows (id INTEGER PRIMARY KEY, v TEXT, fence INTEGER)');
const pgTable = uniqueName('bad_input_values');
const [postgresFound, redisFound] = await Promise.all([findPostgres(), findRedis()]);

beforeAll(async () => {
  if ('url' in postgresFound) {
    pool = pgPool(postgresFound.url, 2);
    for (const statement of postgresStoreDDL({ valueTable: pgTable })) await pool.query(statement);
  }
  if ('url' in redisFound) {
    redis = redisClient(redisFound.url);
    await redis.connect();
  }
});
afterAll(async () => {
  if (pool) {
    await pool.query(`DROP TABLE IF EXISTS ${pgTable}`);
    await pool.end();
  }
  redis?.disconnect();
  sqlite.close();
});

interface Adapter {
  name: string;
  store: () => FencedStore;
  /** The adapter's lower-level fenced call with this token. */
  raw: (token: unknown) => unknown;
  skip?: string;
}

const adapters: Adapter[] = [
  {
    name: 'memory',
    store: () => memoryStore(),
    raw: (token) =>
      memoryWithFence(new Map(), { resource: 'r', token: token as TokenInput }, () => 'applied'),
  },
  {
    name: 'sqlite',
    store: () => sqliteStore(sqlite),
    raw: (token) =>
      upsertFencedRow(sqlite, {
        table: 'bad_rows',
        key: { id: 1 },
        values: { v: 'x' },
        token: token as TokenInput,
      }),
  },
  {
    name: 'postgres',
    store: () => postgresStore(pool!, { valueTable: pgTable }),
    raw: (token) =>
      upsertPostgresRow(pool!, {
        table: pgTable,
        key: { resource: 'raw' },
        values: { value: 'x' },
        token: token as TokenInput,
      }),
    ...('skip' in postgresFound && { skip: postgresFound.skip }),
  },
  {
    name: 'redis',
    store: () => redisStore(redis!, { prefix: `${fencePrefix}redis:` }),
    raw: (token) =>
      fencedSet(redis!, {
        fenceKey: `${fencePrefix}redis:fence`,
        token: token as TokenInput,
        key: `${fencePrefix}redis:k`,
        value: 'v',
      }),
    ...('skip' in redisFound && { skip: redisFound.skip }),
  },
  {
    name: 'etcd',
    store: () => etcdStore(client, { prefix: fencePrefix }),
    raw: (token) =>
      fencedTxn(client, {
        prefix: fencePrefix,
        resource: 'raw',
        token: token as TokenInput,
        ops: [{ type: 'put', key: `${fencePrefix}raw-value`, value: 'v' }],
      }),
  },
];

function adapterRows(adapter: Adapter): Row[] {
  const rows: Row[] = [];
  for (const [token, pattern] of badTokens) {
    const shown = show(token);
    rows.push({
      call: `${adapter.name} store.write`,
      input: `token ${shown}`,
      run: () => adapter.store().write({ resource: 'r', token: token as TokenInput, value: 'v' }),
      expected: fenceToken(/^fencing token must be a bigint in \[1, 2\^63-1\], /, pattern),
    });
    rows.push({
      call: `${adapter.name} fenced call`,
      input: `token ${shown}`,
      run: () => adapter.raw(token),
      expected: fenceToken(/^fencing token must be /, pattern),
    });
  }
  for (const [resource, pattern] of [
    ['', /^resource must be a non-empty string .*, got ""$/],
    [42, /^resource must be a non-empty string .*, got 42$/],
    [undefined, /^resource must be a non-empty string .*, got undefined$/],
  ] as const) {
    rows.push({
      call: `${adapter.name} store.write`,
      input: `resource ${JSON.stringify(resource) ?? 'undefined'}`,
      run: () => adapter.store().write({ resource: resource as string, token: 1n, value: 'v' }),
      expected: fenceArg(pattern),
    });
    rows.push({
      call: `${adapter.name} store.read`,
      input: `resource ${JSON.stringify(resource) ?? 'undefined'}`,
      run: () => adapter.store().read(resource as string),
      expected: fenceArg(pattern),
    });
  }
  rows.push({
    call: `${adapter.name} store.write`,
    input: 'write not an object',
    run: () => adapter.store().write('r' as never),
    expected: fenceArg(/^fence must be .*, got "r"|^resource must be /),
  });
  for (const [value, shown] of [
    [42, '42'],
    [undefined, 'undefined'],
    [{ v: 1 }, 'an object'],
  ] as const) {
    rows.push({
      call: `${adapter.name} store.write`,
      input: `value ${shown}`,
      run: () => adapter.store().write({ resource: 'values', token: 1n, value: value as never }),
      expected: fenceArg(
        /^value must be a string \(a fenced store writes strings: serialise others first\), got /,
      ),
    });
  }
  return rows;
}

for (const adapter of adapters) {
  if (adapter.skip) {
    describe.skip(`fence ${adapter.name}: ${adapter.skip}`, () => it('skipped', () => {}));
    continue;
  }
  table(`fence ${adapter.name}`, adapterRows(adapter));
}

table('fence options and arguments', [
  {
    call: 'sqliteStore',
    input: "options.via 'bogus'",
    run: () => sqliteStore(sqlite, { via: 'bogus' as never }),
    expected: fenceArg(/^options\.via must be 'row' or 'fence-table', got "bogus"$/),
  },
  {
    call: 'sqlite withFence',
    input: 'statements 5',
    run: () => sqliteWithFence(sqlite, { resource: 'r', token: 1n }, 5 as never),
    expected: fenceArg(/^statements must be a function, got 5$/),
  },
  ...(!('skip' in postgresFound)
    ? [
        {
          call: 'postgresStore',
          input: "options.via 'bogus'",
          run: () => postgresStore(pool!, { via: 'bogus' as never }),
          expected: fenceArg(/^options\.via must be 'row' or 'fence-table', got "bogus"$/),
        },
        {
          call: 'postgres withFence',
          input: 'statements 5',
          run: () => postgresWithFence(pool!, { resource: 'r', token: 1n }, 5 as never),
          expected: fenceArg(/^statements must be a function, got 5$/),
        },
      ]
    : []),
  ...('skip' in redisFound
    ? []
    : [
        {
          call: 'redisStore',
          input: 'options.prefix 5',
          run: () => redisStore(redis!, { prefix: 5 as never }),
          expected: fenceArg(/^options\.prefix must be a string, got 5$/),
        },
        {
          call: 'fencedSet',
          input: 'no write',
          run: () => fencedSet(redis!, undefined as never),
          expected: fenceArg(/^write must be an object \{ fenceKey.*, got undefined$/),
        },
      ]),
]);

table('fence parseToken', [
  ...badTokens.map(([token, pattern]): Row => ({
    call: 'parseToken',
    input: show(token),
    run: () => parseToken(token as TokenInput),
    expected: fenceToken(pattern),
  })),
  {
    call: 'memory withFence',
    input: 'fence a string (the old positional style)',
    run: () => memoryWithFence(new Map(), 'r' as never, () => 'applied'),
    expected: fenceArg(
      /^fence must be an object \{ resource, token, \.\.\. \} as the second argument, got "r"$/,
    ),
  },
]);

// ---------------------------------------------------------------------------------------------
// @leasehold/cron: createScheduler and schedule.

const scheduleRow = (input: string, args: unknown[], expected: Expected, fixme?: string): Row => ({
  call: 'schedule',
  input,
  run: () => (scheduler.schedule as (...a: unknown[]) => void)(...args),
  expected,
  ...(fixme && { fixme }),
});
const job = () => `job-${Math.random().toString(36).slice(2, 8)}`;
const noop = () => {};

table('cron', [
  {
    call: 'createScheduler',
    input: 'client null',
    run: () => createScheduler(null as never),
    expected: cron(/^client must be a Leasehold client from connect\(\)/, got('null')),
  },
  {
    call: 'createScheduler',
    input: 'client a plain object',
    run: () => createScheduler({} as never),
    expected: cron(/^client must be a Leasehold client/, got('object')),
  },
  ...(
    [
      ['options null', null, /^options must be an object of scheduler options/],
      ['options 42', 42, /^options must be an object/],
      ['options an array', [], /^options must be an object/],
      ['prefix ""', { prefix: '' }, /^prefix must be a non-empty string without NUL/],
      ['prefix 42', { prefix: 42 }, /^prefix must be/],
      ['prefix with NUL', { prefix: '/c\0/' }, /^prefix must be/],
      ['runner ""', { runner: '' }, /^options\.runner must be a non-empty string/],
      ['runner 42', { runner: 42 }, /^options\.runner must be/],
      ['now not a function', { now: Date.now() }, /^options\.now must be a function/],
      ['session not a Session', { session: { leaseId: 1 } }, /^options\.session must be a Session/],
      [
        'misspelt option prefx',
        { prefx: '/x/' },
        /^options\.prefx must be left out \(not an option; allowed: prefix, session, runner, now/,
      ],
    ] as const
  ).map(([input, options, pattern]): Row => ({
    call: 'createScheduler',
    input,
    run: () => createScheduler(client, options as never),
    expected: cron(pattern),
  })),
  scheduleRow(
    'job ""',
    ['', { everyMs: 60_000 }, noop],
    cron(/^job must be a non-empty string of at most 256 characters/, got('""')),
  ),
  scheduleRow('job 42', [42, { everyMs: 60_000 }, noop], cron(/^job must be/, got('42'))),
  scheduleRow(
    'job of 257 characters',
    ['j'.repeat(257), { everyMs: 60_000 }, noop],
    cron(/^job must be/),
  ),
  scheduleRow('job with NUL', ['a\0b', { everyMs: 60_000 }, noop], cron(/^job must be/)),
  scheduleRow('schedule ""', [job(), '', noop], cron(/schedule|cron/)),
  scheduleRow('schedule not cron', [job(), 'every minute', noop], cron(/"every minute"/)),
  scheduleRow('schedule a number', [job(), 60_000, noop], cron(/schedule/, /60000/)),
  scheduleRow('schedule null', [job(), null, noop], cron(/schedule/, /null/)),
  scheduleRow('schedule {}', [job(), {}, noop], cron(/everyMs/)),
  scheduleRow(
    'everyMs 999 (below the minimum)',
    [job(), { everyMs: 999 }, noop],
    cron(/everyMs/, /999/),
  ),
  scheduleRow('everyMs NaN', [job(), { everyMs: Number.NaN }, noop], cron(/everyMs/, /NaN/)),
  scheduleRow(
    'everyMs Infinity',
    [job(), { everyMs: Number.POSITIVE_INFINITY }, noop],
    cron(/everyMs/, /Infinity/),
  ),
  scheduleRow('everyMs -1', [job(), { everyMs: -1 }, noop], cron(/everyMs/, /-1/)),
  scheduleRow('everyMs "60000"', [job(), { everyMs: '60000' }, noop], cron(/everyMs/, /"60000"/)),
  scheduleRow(
    'run 42',
    [job(), { everyMs: 60_000 }, 42],
    cron(/^run must be a function/, got('42')),
  ),
  scheduleRow(
    'options null',
    [job(), { everyMs: 60_000 }, noop, null],
    cron(/^options must be an object of job options/, got('null')),
  ),
  scheduleRow(
    'overlap "never"',
    [job(), { everyMs: 60_000 }, noop, { overlap: 'never' }],
    cron(/^options\.overlap must be one of 'skip', 'allow'/, got('"never"')),
  ),
  scheduleRow(
    'misfire "always"',
    [job(), { everyMs: 60_000 }, noop, { misfire: 'always' }],
    cron(/^options\.misfire must be one of/, got('"always"')),
  ),
  scheduleRow(
    'maxRunMs 0',
    [job(), { everyMs: 60_000 }, noop, { maxRunMs: 0 }],
    cron(/^options\.maxRunMs must be/, got('0')),
  ),
  scheduleRow(
    'maxRunMs NaN',
    [job(), { everyMs: 60_000 }, noop, { maxRunMs: Number.NaN }],
    cron(/^options\.maxRunMs must be/, got('NaN')),
  ),
  scheduleRow(
    'startJitterMs -1',
    [job(), { everyMs: 60_000 }, noop, { startJitterMs: -1 }],
    cron(/^options\.startJitterMs must be/, got('-1')),
  ),
  scheduleRow(
    'lateToleranceMs 50 (below 100)',
    [job(), { everyMs: 60_000 }, noop, { lateToleranceMs: 50 }],
    cron(/^options\.lateToleranceMs must be/, got('50')),
  ),
  scheduleRow(
    'lateToleranceMs 2^31',
    [job(), { everyMs: 60_000 }, noop, { lateToleranceMs: 2 ** 31 }],
    cron(/^options\.lateToleranceMs must be/, got('2147483648')),
  ),
  scheduleRow(
    'retentionSeconds 59',
    [job(), { everyMs: 60_000 }, noop, { retentionSeconds: 59 }],
    cron(/^options\.retentionSeconds must be a whole number of seconds from 60/, got('59')),
  ),
  scheduleRow(
    'retentionSeconds 90.5',
    [job(), { everyMs: 60_000 }, noop, { retentionSeconds: 90.5 }],
    cron(/^options\.retentionSeconds must be/, got('90.5')),
  ),
  scheduleRow(
    'catchUpWindowMs without misfire run-once',
    [job(), { everyMs: 60_000 }, noop, { catchUpWindowMs: 1_000 }],
    cron(/^options\.catchUpWindowMs is only used with misfire: 'run-once'/),
  ),
  scheduleRow(
    'timeZone "Mars/Olympus"',
    [job(), '0 * * * *', noop, { timeZone: 'Mars/Olympus' }],
    cron(/^options\.timeZone must be an IANA time zone/, got('"Mars/Olympus"')),
  ),
  scheduleRow(
    'timeZone with everyMs',
    [job(), { everyMs: 60_000 }, noop, { timeZone: 'UTC' }],
    cron(/^options\.timeZone applies to cron expressions only/),
  ),
  scheduleRow(
    'misspelt option maxRunMS',
    [job(), { everyMs: 60_000 }, noop, { maxRunMS: 10 }],
    cron(/^options\.maxRunMS must be left out \(not an option/),
  ),
]);

// ---------------------------------------------------------------------------------------------

describe('nothing was accepted', () => {
  it('left no lock, election or cron key behind', async () => {
    const admin = etcdClient(endpoints);
    try {
      for (const prefix of [lockPrefix, electionPrefix, cronPrefix]) {
        expect(await admin.getAll().prefix(prefix).keys(), prefix).toEqual([]);
      }
    } finally {
      admin.close();
    }
  });
});
