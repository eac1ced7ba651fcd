import { describe, expect, it } from 'vitest';
import { FakeKv, fakeWatch } from './etcd.fake.js';
import { pickSlot, slotRecords, SlotView, type SlotRecord } from './permit-slots.js';
import type { Queue } from './queue.js';

describe('slot records', () => {
  const kv = (slot: string, value: string, mod = 5) => ({
    key: Buffer.from(`/l/api%slot/${slot}`),
    value: Buffer.from(value),
    create_revision: '4',
    mod_revision: String(mod),
    version: '1',
    lease: '0',
  });

  it('are read by slot; a record nobody can read is free from token 0', () => {
    const records = slotRecords({ queue: '/l/api%sem/', slots: '/l/api%slot/' }, [
      kv('0', JSON.stringify({ key: '/l/api%sem/3.a.0', token: '12' })),
      kv('2', 'garbage', 9),
      kv('x', '{}'),
      kv('01', '{}'),
    ]);
    expect([...records]).toEqual([
      [0, { key: '/l/api%sem/3.a.0', token: 12n, mod: 5n }],
      [2, { key: '', token: 0n, mod: 9n }],
    ]);
  });
});

describe('pickSlot', () => {
  const rec = (key: string, token: bigint, mod = 1n): SlotRecord => ({ key, token, mod });
  const mine = { key: 'me', token: 50n };

  it('takes the lowest slot with no record', () => {
    expect(pickSlot(3, mine, new Map(), new Map())).toEqual({ slot: 0 });
    const held = new Map([[0, rec('a', 10n)]]);
    expect(pickSlot(3, mine, held, new Map([['a', 10n]]))).toEqual({ slot: 1 });
  });

  it('takes over a record whose owner is gone and older', () => {
    const records = new Map([
      [0, rec('a', 10n)],
      [1, rec('b', 20n)],
    ]);
    // a lives on; b's key is gone (or was taken afresh, with another token)
    expect(
      pickSlot(
        2,
        mine,
        records,
        new Map([
          ['a', 10n],
          ['b', 30n],
        ]),
      ),
    ).toEqual({
      slot: 1,
      record: rec('b', 20n),
    });
  });

  it('never a slot last held by a newer permit: its writes there would outrank ours', () => {
    const records = new Map([
      [0, rec('newer', 60n)],
      [1, rec('older', 20n)],
    ]);
    expect(pickSlot(2, mine, records, new Map())).toEqual({ slot: 1, record: rec('older', 20n) });
    expect(pickSlot(1, mine, records, new Map())).toBeUndefined();
  });

  it('finds its own record (a claim whose answer was lost), at any slot', () => {
    const records = new Map([[4, rec('me', 50n)]]);
    expect(pickSlot(5, mine, records, new Map([['me', 50n]]))).toEqual({ slot: 4, own: true });
  });

  it('only slots below permits', () => {
    const records = new Map([
      [0, rec('a', 1n)],
      [1, rec('b', 2n)],
    ]);
    const live = new Map([
      ['a', 1n],
      ['b', 2n],
    ]);
    expect(pickSlot(2, mine, records, live)).toBeUndefined();
  });
});

describe('SlotView', () => {
  const ranges = { queue: 'L/s%sem/', slots: 'L/s%slot/' };
  const record = (key: string, token: number) => ({
    value: JSON.stringify({ key, token: String(token) }),
  });

  it('follows both ranges from the watch, a revision that touches both included', () => {
    const store = new FakeKv();
    const watch = fakeWatch('L/');
    const view = new SlotView({ watch: watch.watch } as unknown as Queue, ranges);
    view.start([], [], store.revision);
    const a = store.put('L/s%sem/2.a.0', { lease: 7 });
    const b = store.put('L/s%sem/2.b.0', { lease: 8 });
    watch.emit(a, b);
    const token = BigInt(a.kv.create_revision);
    watch.emit(store.put('L/s%slot/0', record('L/s%sem/2.a.0', Number(token))));
    expect([...view.live.keys()]).toEqual(['L/s%sem/2.a.0', 'L/s%sem/2.b.0']);
    expect(view.records.get(0)).toMatchObject({ key: 'L/s%sem/2.a.0', token });
    // `etcdctl del --prefix`: one revision, both ranges.
    watch.emit(...store.deleteAll('L/s%sem/2.a.0', 'L/s%sem/2.b.0', 'L/s%slot/0'));
    expect(view.live.size).toBe(0);
    expect(view.records.size).toBe(0);
  });

  it('skips what a read it took as the truth already holds', () => {
    const store = new FakeKv();
    const watch = fakeWatch('L/');
    const view = new SlotView({ watch: watch.watch } as unknown as Queue, ranges);
    view.start([], [], store.revision);
    const put = store.put('L/s%sem/2.a.0', { lease: 7 });
    const gone = store.delete('L/s%sem/2.a.0');
    view.reset([], [], store.revision); // a claim's answer, ahead of the stream
    watch.emit(put, gone);
    expect(view.live.size).toBe(0);
    view.stop();
    expect(watch.live()).toEqual([]);
  });
});
