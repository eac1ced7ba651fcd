/**
 * Bad input to the election API (and to the lock holder values and resumed sessions it came
 * with) gets a typed InvalidArgumentError that names the value and what is allowed, at the call,
 * before any etcd call: a read-only spy on the client's etcd calls and streams counts none, and a
 * raw read finds no key.
 */
import {
  connect,
  isInvalidArgumentError,
  isLeaseLostError,
  MAX_VALUE_BYTES,
  type Leasehold,
} from '@leasehold/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const electionPrefix = uniquePrefix('election-bad');
const lockPrefix = uniquePrefix('election-bad-locks');
let client: Leasehold;
/** etcd calls and streams the client has started (read-only spy). */
const started = { calls: [] as string[], streams: 0 };

beforeAll(async () => {
  client = await connect({ endpoints, electionPrefix, lockPrefix });
  const etcd = (
    client as unknown as {
      etcd: {
        call: (what: string, ...rest: unknown[]) => unknown;
        stream: (...args: unknown[]) => unknown;
      };
    }
  ).etcd;
  const [call, stream] = [etcd.call.bind(etcd), etcd.stream.bind(etcd)];
  etcd.call = (what, ...rest) => {
    started.calls.push(what);
    return call(what, ...rest);
  };
  etcd.stream = (...args) => {
    started.streams++;
    return stream(...args);
  };
});
afterAll(async () => {
  await client.close();
  admin.close();
});

const noKeys = async () => {
  expect(await admin.getAll().prefix(electionPrefix).keys()).toEqual([]);
  expect(await admin.getAll().prefix(lockPrefix).keys()).toEqual([]);
};

/**
 * Runs `call` (sync throw or rejection alike) and checks it fails with InvalidArgumentError
 * whose message matches every pattern, without any etcd call.
 */
async function invalid(call: () => unknown, ...patterns: RegExp[]): Promise<void> {
  const before = { calls: started.calls.length, streams: started.streams };
  let outcome: unknown = 'resolved';
  try {
    const result = call();
    if (result instanceof Promise) await result;
    else if (result !== undefined) outcome = 'returned';
  } catch (err) {
    outcome = err;
  }
  expect(
    isInvalidArgumentError(outcome),
    `expected InvalidArgumentError, got ${outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : String(outcome)}`,
  ).toBe(true);
  const message = (outcome as Error).message;
  for (const pattern of patterns) expect(message).toMatch(pattern);
  expect(started.calls.slice(before.calls)).toEqual([]);
  expect(started.streams).toBe(before.streams);
}

const NAME_RULE = /must be a non-empty string of at most 1024 characters, without NUL/;
const VALUE_RULE = /value must be a string of at most 65536 bytes of UTF-8, without unpaired/;
const DURATION_RULE = /must be a positive, finite number of milliseconds/;

const badNames: [unknown, RegExp][] = [
  ['', /got ""/],
  ['a\0b', /got "a\\u0000b"/],
  ['x'.repeat(1025), /got "x{64}…"/],
  ['\uD800', /got /],
  [42, /got 42/],
  [undefined, /got undefined/],
  [null, /got null/],
  [{ name: 'job' }, /got object/],
  [['job'], /got an array/],
];

const badValues: [unknown, RegExp][] = [
  ['x'.repeat(MAX_VALUE_BYTES + 1), /\(65537 bytes\)/],
  ['é'.repeat(MAX_VALUE_BYTES / 2 + 1), /\(65538 bytes\)/], // 32769 characters, 2 bytes each
  ['€'.repeat(21_846), /\(65538 bytes\)/], // 21846 characters, 3 bytes each
  ['😀'.repeat(MAX_VALUE_BYTES / 4 + 1), /\(65540 bytes\)/], // surrogate pairs, 4 bytes each
  ['\uD800', /got /],
  ['a\uDC00b', /got /],
  ['\uDC00\uD800', /got /], // a pair in the wrong order is two lone surrogates
  [42, /got 42/],
  [undefined, /got undefined/],
  [null, /got null/],
  [{ value: 'v' }, /got object/],
  [Buffer.from('v'), /got object/],
  [12n, /got 12n/],
];

const badDurations: [unknown, RegExp][] = [
  [0, /got 0$/],
  [-1, /got -1$/],
  [Number.NaN, /got NaN$/],
  [Number.POSITIVE_INFINITY, /got Infinity$/],
  ['5', /got "5"$/],
];

describe('election names', () => {
  it('campaign, leader, observe and lead reject bad names', async () => {
    for (const [name, got] of badNames) {
      const n = name as string;
      await invalid(() => client.campaign(n, 'v'), /^election /, NAME_RULE, got);
      await invalid(() => client.leader(n), /^election /, NAME_RULE, got);
      await invalid(() => client.lead(n, 'v', () => {}), /^election /, NAME_RULE, got);
      // observe throws at the call, not from the iterator.
      expect(() => client.observe(n)).toThrow(NAME_RULE);
      await invalid(() => client.observe(n), /^election /, NAME_RULE, got);
    }
    await noKeys();
  });

  it('the longest name (1024 characters) and names with / and % are fine', async () => {
    const long = 'n'.repeat(1024);
    const before = started.calls.length;
    const leadership = await client.campaign(long, 'v');
    // The spy sees the calls of valid input (so its silence for bad input means something).
    expect(started.calls.slice(before)).toContain('election join');
    expect(leadership.key).toBe(
      `${electionPrefix}${long}/${leadership.session.leaseId.toString(16)}`,
    );
    await leadership.resign();
    const nested = await client.campaign('a/b%c', 'v');
    expect(nested.key.startsWith(`${electionPrefix}a%2Fb%25c/`)).toBe(true);
    await nested.resign();
    await noKeys();
  });
});

describe('candidate and holder values', () => {
  it('campaign and lead reject bad values', async () => {
    for (const [value, got] of badValues) {
      const v = value as string;
      await invalid(() => client.campaign('values', v), VALUE_RULE, got);
      await invalid(() => client.lead('values', v, () => {}), VALUE_RULE, got);
    }
    await noKeys();
  });

  it('values of exactly 65536 bytes are accepted, in one- and multi-byte characters', async () => {
    for (const value of [
      'x'.repeat(MAX_VALUE_BYTES),
      'é'.repeat(MAX_VALUE_BYTES / 2),
      '😀'.repeat(MAX_VALUE_BYTES / 4),
      '€'.repeat(21_845) + 'x',
    ]) {
      expect(Buffer.byteLength(value)).toBe(MAX_VALUE_BYTES);
      const leadership = await client.campaign('big-value', value);
      expect((await client.leader('big-value'))?.value).toBe(value);
      await leadership.resign();
    }
    await noKeys();
  });

  it('proclaim rejects bad values without writing, and the term goes on', async () => {
    const leadership = await client.campaign('proclaim-values', 'good');
    const before = (await admin.get(leadership.key).exec()).kvs[0]!;
    for (const [value, got] of badValues) {
      await invalid(() => leadership.proclaim(value as string), VALUE_RULE, got);
    }
    const after = (await admin.get(leadership.key).exec()).kvs[0]!;
    expect(after.mod_revision).toBe(before.mod_revision);
    expect(after.value.toString()).toBe('good');
    expect(leadership.isLeader).toBe(true);
    expect(leadership.value).toBe('good');
    await leadership.resign();
    await noKeys();
  });

  it('acquire and tryAcquire reject a bad holder value', async () => {
    for (const [value, got] of badValues) {
      // Left out (undefined or null, as for every option with a default) means the default value.
      if (value === undefined || value === null) continue;
      const v = value as string;
      await invalid(() => client.acquire('values', { value: v }), VALUE_RULE, got);
      await invalid(() => client.tryAcquire('values', { value: v }), VALUE_RULE, got);
    }
    await noKeys();
  });
});

describe('signals, timeouts and options', () => {
  it('an already-aborted signal: campaign rejects with its reason, lead returns without campaigning; no key is written', async () => {
    const reason = new Error('cancelled before the call');
    const signal = AbortSignal.abort(reason);
    const before = started.calls.length;
    await expect(client.campaign('aborted', 'v', { signal })).rejects.toBe(reason);
    await expect(client.campaign('aborted', 'v', { signal, timeoutMs: 1_000 })).rejects.toBe(
      reason,
    );
    let ran = false;
    // A shut-down signal means "stop leading": lead resolves (see LeadOptions.signal).
    await expect(
      client.lead('aborted', 'v', () => void (ran = true), { signal }),
    ).resolves.toBeUndefined();
    expect(ran).toBe(false);
    expect(started.calls.slice(before)).toEqual([]);
    await noKeys();
  });

  it('a signal that is not an AbortSignal is rejected', async () => {
    const fake = { aborted: false } as unknown as AbortSignal;
    await invalid(
      () => client.campaign('signal', 'v', { signal: fake }),
      /signal must be an AbortSignal, got object/,
    );
    await invalid(
      () => client.lead('signal', 'v', () => {}, { signal: fake }),
      /signal must be an AbortSignal/,
    );
    await invalid(
      () => client.observe('signal', { signal: fake }),
      /signal must be an AbortSignal/,
    );
    await noKeys();
  });

  it('campaign rejects bad timeoutMs', async () => {
    for (const [timeoutMs, got] of badDurations) {
      await invalid(
        () => client.campaign('timeouts', 'v', { timeoutMs: timeoutMs as number }),
        /^timeoutMs /,
        DURATION_RULE,
        got,
      );
    }
    await noKeys();
  });

  it('campaign, lead and observe reject options that are not an object, and a session that is not a Session', async () => {
    for (const options of [null, 42, 'fast'] as unknown[]) {
      const o = options as object;
      await invalid(() => client.campaign('options', 'v', o), /options must be an object/);
      await invalid(() => client.lead('options', 'v', () => {}, o), /options must be an object/);
      await invalid(() => client.observe('options', o), /options must be an object/);
    }
    const fake = { leaseId: 1n } as never;
    await invalid(
      () => client.campaign('options', 'v', { session: fake }),
      /session must be a Session/,
    );
    await invalid(
      () => client.lead('options', 'v', () => {}, { session: fake }),
      /session must be a Session/,
    );
    await noKeys();
  });

  it('lead rejects bad work, recampaign, drainTimeoutMs, onElected and onLost', async () => {
    for (const [work, got] of [
      [undefined, /got undefined/],
      [42, /got 42/],
      ['run', /got "run"/],
      [{ run: () => {} }, /got object/],
    ] as const) {
      await invalid(
        () => client.lead('lead', 'v', work as never),
        /^work must be a function to run while leader/,
        got,
      );
    }
    for (const [recampaign, got] of [
      ['yes', /got "yes"/],
      [1, /got 1/],
      [0, /got 0/],
    ] as const) {
      await invalid(
        () => client.lead('lead', 'v', () => {}, { recampaign: recampaign as never }),
        /^recampaign must be a boolean/,
        got,
      );
    }
    for (const [drainTimeoutMs, got] of [...badDurations, [2 ** 31, /got 2147483648$/]] as const) {
      await invalid(
        () => client.lead('lead', 'v', () => {}, { drainTimeoutMs: drainTimeoutMs as number }),
        /^drainTimeoutMs /,
        DURATION_RULE,
        got,
      );
    }
    for (const name of ['onElected', 'onLost'] as const) {
      for (const [fn, got] of [
        ['log', /got "log"/],
        [42, /got 42/],
        [null, /got null/],
      ] as const) {
        await invalid(
          () => client.lead('lead', 'v', () => {}, { [name]: fn as never }),
          new RegExp(`^${name} must be a function`),
          got,
        );
      }
    }
    await noKeys();
  });
});

describe('resumed sessions', () => {
  it('session({ leaseId }) rejects ids that are not a lease id, and ttlSeconds given along', async () => {
    for (const [leaseId, got] of [
      [0n, /got 0n/],
      [-1n, /got -1n/],
      [2n ** 63n, /got 9223372036854775808n/],
      [1, /got 1$/],
      ['7587899264603905541', /got "7587899264603905541"/],
    ] as const) {
      await invalid(
        () => client.session({ leaseId: leaseId as bigint }),
        /^options\.leaseId must be a lease id as a bigint from 1 to 2\^63-1/,
        got,
      );
    }
    await invalid(
      () => client.session({ leaseId: 1n, ttlSeconds: 10 }),
      /^options\.ttlSeconds must be left out with leaseId/,
      /got 10/,
    );
    await noKeys();
  });

  it("resuming a lease that does not exist fails with LeaseLostError 'gone'", async () => {
    const granted = await admin.leaseClient.leaseGrant({ TTL: 30, ID: 0 });
    await admin.leaseClient.leaseRevoke({ ID: granted.ID });
    for (const leaseId of [BigInt(granted.ID), 2n ** 63n - 1n]) {
      const err = await client.session({ leaseId }).catch((e: unknown) => e);
      expect(isLeaseLostError(err)).toBe(true);
      if (!isLeaseLostError(err)) continue;
      expect(err.reason).toBe('gone');
      expect(err.leaseId).toBe(leaseId);
      expect(err.message).toContain(leaseId.toString(16));
    }
    await noKeys();
  });
});

describe('connect', () => {
  it('rejects an electionPrefix that overlaps lockPrefix, before connecting', async () => {
    // Nothing listens there: a connect that got past validation would fail with ConnectError.
    const nowhere = ['http://127.0.0.1:9'];
    for (const [lock, election] of [
      ['/same/', '/same/'],
      ['/app/', '/app/election/'],
      ['/app/lock/', '/app/'],
      [undefined, '/leasehold/'],
      ['/leasehold/election/x/', undefined],
    ] as const) {
      await invalid(
        () =>
          connect({
            endpoints: nowhere,
            dialTimeoutMs: 2_000,
            ...(lock && { lockPrefix: lock }),
            ...(election && { electionPrefix: election }),
          }),
        /^electionPrefix must be a prefix that neither contains nor is contained in lockPrefix/,
        new RegExp(`got "${election ?? '/leasehold/election/'}"`),
      );
    }
    for (const electionPrefix of ['', 'a\0b', 42]) {
      await invalid(
        () => connect({ endpoints: nowhere, electionPrefix: electionPrefix as string }),
        /^electionPrefix must be a non-empty string without NUL/,
      );
    }
  });
});
