import { describe, expect, it } from 'vitest';
import { fakeClock, flush } from './clock.fake.js';
import { fakeEtcd, fakeWatch } from './etcd.fake.js';
import { isInvalidArgumentError } from './errors.js';
import { Queue, type Admission, type LostError } from './queue.js';
import { MAX_PERMITS, permitsOf, validatePermits } from './semaphore.js';
import { Session } from './session.js';

const lostError: LostError = (reason) => new Error(reason);

/** A queue on the fake etcd, and a join of the queue `m` with `admission` and `tag`. */
async function fakeQueue() {
  const clock = fakeClock();
  const fake = fakeEtcd();
  const session = await Session.create(fake.etcd, clock, () => undefined, {
    ttlSeconds: 3_600,
    safetyMarginMs: 0,
  });
  await flush();
  const watch = fakeWatch('L/');
  const queue = new Queue(fake.etcd, watch.watch, clock, () => undefined, 'lock');
  const join = (tag: string, admission: Admission) =>
    queue.join('m', session, {
      value: Buffer.from('v'),
      signal: new AbortController().signal,
      lostError,
      tag,
      admission,
    });
  return { ...fake, watch, join, hex: session.leaseId.toString(16) };
}

describe('validatePermits', () => {
  it.each([0, -1, 1.5, MAX_PERMITS + 1, Number.NaN, Infinity, '3', undefined, 3n])(
    'refuses %s, naming it and what is allowed',
    (value) => {
      let error: unknown;
      try {
        validatePermits(value);
      } catch (err) {
        error = err;
      }
      expect(isInvalidArgumentError(error)).toBe(true);
      expect((error as Error).message).toMatch(
        /^permits must be a whole number from 1 to 10000, got /,
      );
      expect((error as Error).message).toContain(
        typeof value === 'string' ? '"3"' : typeof value === 'bigint' ? '3n' : String(value),
      );
    },
  );

  it('takes 1 … 10,000', () => {
    expect(validatePermits(1)).toBe(1);
    expect(validatePermits(MAX_PERMITS)).toBe(MAX_PERMITS);
  });
});

describe('permit keys', () => {
  it('name their permits first; keys of other shapes have none', () => {
    expect(permitsOf('/l/api%sem/3.694d.0')).toBe(3);
    expect(permitsOf('/l/api%sem/10000.ff.12')).toBe(10_000);
    for (const key of ['/l/api%sem/694d', '/l/api%sem/03.ff.0', '/l/api%sem/3.xyz.0', '/l/a/3.f'])
      expect(permitsOf(key)).toBeUndefined();
  });

  it('a tagged join creates `<tag>.<lease hex>.<n>`, a new n for each entry of the session', async () => {
    const { join, hex } = await fakeQueue();
    const a = await join('3', { capacity: 3 });
    const b = await join('3', { capacity: 3 });
    expect([a.key, b.key]).toEqual([`L/m/3.${hex}.0`, `L/m/3.${hex}.1`]);
    await a.remove('release');
    const c = await join('3', { capacity: 3 });
    expect(c.key).toBe(`L/m/3.${hex}.0`); // a's key is gone: taken afresh, with a new token
    expect(c.token).toBeGreaterThan(b.token);
  });
});

describe('admission with a capacity', () => {
  it('admits an entry once fewer than `capacity` keys ahead remain, from delete events alone', async () => {
    const { join, store, watch } = await fakeQueue();
    store.put('L/m/2.a.0', { lease: 7 });
    store.put('L/m/2.b.0', { lease: 8 });
    store.put('L/m/2.c.0', { lease: 9 });
    const entry = await join('2', { capacity: 2 });
    expect(entry.isFirst).toBe(false);
    watch.emit(store.delete('L/m/2.b.0'));
    expect(entry.isFirst).toBe(false); // two ahead: a and c
    watch.emit(store.delete('L/m/2.a.0'));
    expect(entry.isFirst).toBe(true);
  });

  it('counts only the keys that block it; a read keeps to them', async () => {
    const { join, store, watch } = await fakeQueue();
    store.put('L/m/r.a.0', { lease: 7 });
    store.put('L/m/w.b.0', { lease: 8 });
    store.put('L/m/r.c.0', { lease: 9 });
    const entry = await join('r', { capacity: 1, blocks: (key) => !key.includes('/r.') });
    expect(entry.isFirst).toBe(false);
    watch.unsure();
    watch.read(store); // the readers ahead are still there: they never blocked it
    expect(entry.isFirst).toBe(false);
    watch.emit(store.delete('L/m/w.b.0'));
    expect(entry.isFirst).toBe(true);
  });

  it('a refused join leaves no key and throws what `refused` builds', async () => {
    const { join, store } = await fakeQueue();
    store.put('L/m/x', { lease: 7 });
    const guard = [{ key: Buffer.from('L/m/x'), target: 'Create' as const, create_revision: 0 }];
    const refused = (kvs: { key: Buffer }[]) => new Error(`refused: ${kvs.length} keys`);
    await expect(join('3', { capacity: 3, guard, refused })).rejects.toThrow('refused: 1 keys');
    expect(store.range({ key: Buffer.from('L/m/3'), range_end: Buffer.from('L/m/4') }).kvs).toEqual(
      [],
    );
  });
});
