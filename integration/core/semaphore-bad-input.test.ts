/**
 * Bad input to semaphores and read/write locks fails at the call with `InvalidArgumentError`,
 * whose message names the option and the value, before anything is written: against the run's
 * etcd, so a call that wrongly got past validation would really acquire (and be caught).
 */
import { connect, isInvalidArgumentError, type Leasehold } from '@leasehold/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const prefix = uniquePrefix('sem-bad-input');
const admin = etcdClient(sharedEndpoints());
let client: Leasehold;
beforeAll(async () => {
  client = await connect({ endpoints: sharedEndpoints(), lockPrefix: prefix });
});
afterAll(async () => {
  await client.close();
  admin.close();
});

/** What a call did: its error, or `accepted`. */
async function outcome(call: () => Promise<unknown>) {
  try {
    const held = await call();
    await (held as { release?: () => Promise<void> } | undefined)?.release?.();
    return 'accepted';
  } catch (err) {
    return err;
  }
}

const permitCalls = {
  acquirePermit: (o: unknown) => client.acquirePermit('p', o as never),
  tryAcquirePermit: (o: unknown) => client.tryAcquirePermit('p', o as never),
  withPermit: (o: unknown) => client.withPermit('p', o as never, () => 'ran'),
};

describe('bad permits', () => {
  const rows: [unknown, string][] = [
    [0, 'got 0'],
    [-1, 'got -1'],
    [2.5, 'got 2.5'],
    [10_001, 'got 10001'],
    [Number.NaN, 'got NaN'],
    [Infinity, 'got Infinity'],
    ['3', 'got "3"'],
    [3n, 'got 3n'],
    [undefined, 'got undefined'],
  ];
  for (const [call, run] of Object.entries(permitCalls)) {
    it.each(rows)(`${call} refuses permits %s, naming it`, async (permits, shown) => {
      const err = await outcome(() => run({ permits }));
      expect(isInvalidArgumentError(err), String(err)).toBe(true);
      expect((err as Error).message).toBe(
        `permits must be a whole number from 1 to 10000, ${shown}`,
      );
    });
  }
});

describe('bad options, names and functions', () => {
  const cases: [string, () => Promise<unknown>, RegExp][] = [
    [
      'a misspelt option',
      () => client.acquirePermit('p', { permits: 2, timeOutMs: 5 } as never),
      /options\.timeOutMs must be left out \(not an option; allowed: signal, session, value, timeoutMs, permits/,
    ],
    [
      'timeoutMs on a try',
      () => client.tryAcquirePermit('p', { permits: 2, timeoutMs: 5 } as never),
      /options\.timeoutMs must be left out \(not an option/,
    ],
    [
      'a bad timeout',
      () => client.acquirePermit('p', { permits: 2, timeoutMs: -5 }),
      /timeoutMs must be a positive, finite number of milliseconds, got -5/,
    ],
    [
      'an empty semaphore name',
      () => client.acquirePermit('', { permits: 2 }),
      /^name must be a non-empty string .*, got ""/,
    ],
    ['a name with NUL', () => client.acquireRead('a\0b'), /^name must be .*, got "a\\u0000b"/],
    [
      'options that are not an object',
      () => client.acquireWrite('w', 5 as never),
      /^options must be an object, got 5/,
    ],
    [
      'a bad value',
      () => client.acquireRead('r', { value: 7 as never }),
      /^value must be a string .*, got 7/,
    ],
    [
      'a bad signal',
      () => client.tryAcquireWrite('w', { signal: 'x' as never }),
      /^signal must be an AbortSignal, got "x"/,
    ],
    [
      'withPermit without a function',
      () => client.withPermit('p', { permits: 2 }, 'x' as never),
      /^withPermit fn must be a function to run while holding it, got "x"/,
    ],
    [
      'withRead without a function',
      () => client.withRead('r', undefined as never),
      /^withRead fn must be a function .*, got undefined/,
    ],
    [
      'withWrite without a function',
      () => client.withWrite('w', 5 as never),
      /^withWrite fn must be a function .*, got 5/,
    ],
  ];
  it.each(cases)('%s is refused, naming the value', async (_what, call, message) => {
    const err = await outcome(call);
    expect(isInvalidArgumentError(err), String(err)).toBe(true);
    expect((err as Error).message).toMatch(message);
  });

  it('nothing was written by any of them', async () => {
    expect(await admin.getAll().prefix(prefix).keys()).toEqual([]);
  });
});
