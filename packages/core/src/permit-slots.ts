/**
 * A semaphore's slots: which of 0 … permits − 1 each holder has, so that `(name, slot)` can be a
 * fencing resource of its own.
 *
 * `<lockPrefix><name>%slot/<k>` records, without a lease, the last permit that took slot k:
 * `{"key","token"}`. An admitted permit takes the lowest slot whose record is absent, or names a
 * key no longer in the queue and a lower token than its own, in one txn that checks the record is
 * unchanged, its owner still gone, and the permit's own key still there. So no two holders share
 * a slot, even when several are admitted at one revision, and a slot's holders have growing
 * tokens. Records outlive their permits (they are the slots' fencing history) until the queue is
 * empty: a client removes them a second after its last release of the semaphore, in a txn that
 * checks the queue is still empty; left behind (a process gone first), they are used again.
 *
 * Each client keeps one view of a semaphore's records and queue while it acquires permits of it:
 * the first join's txn reads both, the shared watch keeps them current (no read per waiter), and a
 * refused claim's answer carries both afresh. So a claim is usually one txn.
 */
import type { ICompare, IKeyValue, IRequestOp, ITxnResponse } from 'etcd3';
import { callAt, raceSignal, sleep } from './clock.js';
import { prefixEnd, rangeOf } from './keys.js';
import { tunables } from './options.js';
import { byCreate, revisionOf, type Entry, type Queue } from './queue.js';
import type { WatchEvent } from './watch.js';

/** The queue of a semaphore and its slot records. */
export interface Ranges {
  queue: string;
  slots: string;
}

/** The last permit that took a slot, as its record says; `mod` is the record's mod revision. */
export interface SlotRecord {
  key: string;
  token: bigint;
  mod: bigint;
}

const slotOf = (ranges: Ranges, key: string): number | undefined => {
  const slot = key.slice(ranges.slots.length);
  return /^(0|[1-9]\d{0,4})$/.test(slot) ? Number(slot) : undefined;
};

/** A record as written; one nobody can read counts as free, from token 0. */
export function parseRecord(kv: IKeyValue): SlotRecord {
  let owner: { key?: unknown; token?: unknown } = {};
  try {
    owner = JSON.parse(kv.value.toString()) as typeof owner;
  } catch {
    // written by someone else: free
  }
  const token = typeof owner.token === 'string' && /^\d+$/.test(owner.token) ? owner.token : '0';
  const key = typeof owner.key === 'string' ? owner.key : '';
  return { key, token: BigInt(token), mod: BigInt(kv.mod_revision) };
}

/** The records under `ranges.slots` by slot. */
export function slotRecords(ranges: Ranges, kvs: IKeyValue[]): Map<number, SlotRecord> {
  const records = new Map<number, SlotRecord>();
  for (const kv of kvs) {
    const slot = slotOf(ranges, kv.key.toString());
    if (slot !== undefined) records.set(slot, parseRecord(kv));
  }
  return records;
}

/**
 * Where the permit `mine` goes: to the slot its own record names (an earlier claim whose answer
 * was lost), else to the lowest slot below `permits` whose record is absent, or names a key that
 * is not in the queue (`live`: key → create revision) with a lower token than `mine`'s. A record
 * with a higher token belongs to a newer permit that held the slot already: taking it would let
 * that permit's writes outrank this one's. `undefined`: no slot is free yet.
 */
export function pickSlot(
  permits: number,
  mine: { key: string; token: bigint },
  records: ReadonlyMap<number, SlotRecord>,
  live: ReadonlyMap<string, bigint>,
): { slot: number; record?: SlotRecord | undefined; own?: true } | undefined {
  for (const [slot, record] of records) {
    if (record.key === mine.key && record.token === mine.token) return { slot, own: true };
  }
  for (let slot = 0; slot < permits; slot++) {
    const record = records.get(slot);
    if (!record) return { slot };
    if (live.get(record.key) !== record.token && record.token < mine.token) return { slot, record };
  }
  return undefined;
}

/** Reads the slot records (with values) and the queue (keys only) at one revision. */
export function viewReads(ranges: Ranges): IRequestOp[] {
  const range = (key: string, keysOnly: boolean): IRequestOp => ({
    request_range: { key: Buffer.from(key), range_end: prefixEnd(key), keys_only: keysOnly },
  });
  return [range(ranges.slots, false), range(ranges.queue, true)];
}

/** A client's view of one semaphore's records and queue (see the file's comment). */
export class SlotView {
  readonly records = new Map<number, SlotRecord>();
  readonly live = new Map<string, bigint>();
  /**
   * The revision of the last read taken as the truth: the watch may still deliver events up to
   * it (a txn's answer can overtake the stream), which the read already holds.
   */
  #readAt = 0n;
  #subs: Disposable[] = [];
  /** Acquisitions using it; it stops following the watch when none is left. */
  users = 0;

  constructor(
    readonly queue: Queue,
    readonly ranges: Ranges,
  ) {}

  get started(): boolean {
    return this.#subs.length > 0;
  }

  /** Takes reads at `readAt` as the truth and follows the watch from there. */
  start(slots: IKeyValue[], queue: IKeyValue[], readAt: bigint): void {
    if (this.started) return;
    this.reset(slots, queue, readAt);
    const follow = (range: string) =>
      this.queue.watch.subscribe(range, readAt + 1n, {
        events: (batch, revision) => this.#events(batch, revision),
        // Claims check everything they rely on: a stale view costs a refused claim, no more.
        unsure: () => undefined,
        read: (kvs, at) => this.#read(range, kvs, at),
      });
    this.#subs = [follow(this.ranges.slots), follow(this.ranges.queue)];
  }

  /** Takes a read of both ranges at `readAt` as the truth (a refused claim's answer). */
  reset(slots: IKeyValue[], queue: IKeyValue[], readAt: bigint): void {
    if (readAt < this.#readAt) return;
    this.#readAt = readAt;
    this.records.clear();
    for (const [slot, record] of slotRecords(this.ranges, slots)) this.records.set(slot, record);
    this.live.clear();
    for (const kv of queue) {
      const key = kv.key.toString();
      if (rangeOf(key) === this.ranges.queue) this.live.set(key, revisionOf(kv));
    }
  }

  stop(): void {
    for (const sub of this.#subs) sub[Symbol.dispose]();
    this.#subs = [];
    this.#readAt = 0n;
  }

  #events(batch: readonly WatchEvent[], revision: bigint): void {
    // One revision may touch both ranges (`etcdctl del --prefix`): each range's batch counts.
    if (revision <= this.#readAt) return;
    for (const { kind, kv } of batch) {
      const key = kv.key.toString();
      const slot = slotOf(this.ranges, key);
      if (slot !== undefined) {
        if (kind === 'delete') this.records.delete(slot);
        else this.records.set(slot, parseRecord(kv));
      } else if (rangeOf(key) === this.ranges.queue) {
        if (kind === 'delete') this.live.delete(key);
        else this.live.set(key, revisionOf(kv));
      }
    }
  }

  /** A keys-only read of one range: what is gone is gone; values it cannot give are kept. */
  #read(range: string, kvs: IKeyValue[], readAt: bigint): void {
    if (readAt < this.#readAt) return;
    const present = new Set(kvs.map((kv) => kv.key.toString()));
    if (range === this.ranges.queue) {
      this.live.clear();
      for (const kv of kvs) this.live.set(kv.key.toString(), revisionOf(kv));
    } else {
      for (const slot of [...this.records.keys()]) {
        if (!present.has(`${this.ranges.slots}${slot}`)) this.records.delete(slot);
      }
    }
  }
}

/** A guarded txn (safe to resend: a resent claim finds its own record) that `signal` ends. */
function txn(
  queue: Queue,
  what: string,
  request: { compare: ICompare[]; success: IRequestOp[]; failure: IRequestOp[] },
  signal: AbortSignal,
): Promise<ITxnResponse> {
  return raceSignal(queue.etcd.txn(what, request, { idempotent: true }), signal);
}

/** Takes a slot for the admitted `entry` (see the file's comment). */
export async function claimSlot(
  view: SlotView,
  entry: Entry,
  permits: number,
  wait: AbortSignal,
): Promise<number> {
  const { queue, ranges } = view;
  const signal = AbortSignal.any([wait, entry.signal]);
  const me = Buffer.from(entry.key);
  const mine = { key: entry.key, token: entry.token };
  for (let delayMs: number = tunables.retryMinMs; ;) {
    signal.throwIfAborted();
    const pick = pickSlot(permits, mine, view.records, view.live);
    if (pick?.own) return pick.slot;
    let res: ITxnResponse;
    if (pick) {
      const record = Buffer.from(`${ranges.slots}${pick.slot}`);
      const value = Buffer.from(JSON.stringify({ key: entry.key, token: entry.token.toString() }));
      const compare = [byCreate(me, entry.token)];
      if (pick.record) {
        const { key, token, mod } = pick.record;
        compare.push(
          { key: record, target: 'Mod', result: 'Equal', mod_revision: mod.toString() },
          { ...byCreate(Buffer.from(key), token), result: 'NotEqual' },
        );
      } else {
        compare.push(byCreate(record, 0n));
      }
      const success = [{ request_put: { key: record, value } }];
      const request = { compare, success, failure: viewReads(ranges) };
      res = await txn(queue, 'semaphore slot claim', request, signal);
      if (res.succeeded) return pick.slot;
    } else {
      // No slot is free in the view: a holder's release is still on its way.
      await sleep(queue.clock, delayMs, signal);
      delayMs = Math.min(delayMs * 2, tunables.retryMaxMs);
      const request = { compare: [], success: viewReads(ranges), failure: [] };
      res = await txn(queue, 'semaphore slots read', request, signal);
    }
    const [slots, keys] = res.responses.map((r) => r.response_range.kvs);
    view.reset(slots ?? [], keys ?? [], BigInt(res.header.revision));
    // The key is gone: the entry's own watch is about to say why.
    if (view.live.get(entry.key) !== entry.token) await raceSignal(new Promise(() => {}), signal);
  }
}

/** The views of one client, by semaphore queue. */
const views = new WeakMap<Queue, Map<string, SlotView>>();

/** The client's view of a semaphore, for one more acquisition (`release` when done with it). */
export function useView(queue: Queue, ranges: Ranges): { view: SlotView; release: () => void } {
  const byRange = views.get(queue) ?? new Map<string, SlotView>();
  views.set(queue, byRange);
  const view = byRange.get(ranges.queue) ?? new SlotView(queue, ranges);
  byRange.set(ranges.queue, view);
  view.users++;
  let released = false;
  return {
    view,
    release: () => {
      if (released) return;
      released = true;
      if (--view.users > 0) return;
      view.stop();
      byRange.delete(ranges.queue);
    },
  };
}

/** Pending removals of slot records of one client, by semaphore queue: cancel and ranges. */
const tidying = new WeakMap<Queue, Map<string, { cancel: () => void; ranges: Ranges }>>();

/** Removes the slot records of `ranges` if the queue is empty (one attempt; see `tidyLater`). */
async function tidy(queue: Queue, ranges: Ranges): Promise<void> {
  const empty = { ...byCreate(Buffer.from(ranges.queue), 0n), range_end: prefixEnd(ranges.queue) };
  const slots = { key: Buffer.from(ranges.slots), range_end: prefixEnd(ranges.slots) };
  const request = { compare: [empty], success: [{ request_delete_range: slots }], failure: [] };
  await queue.etcd.txn('semaphore slots removal', request, { idempotent: true }).catch(() => {});
}

/**
 * Removes the slot records of `ranges` a second after a release (once for all releases of that
 * second), if the queue is empty then: nobody can hold a slot, so the history is no longer needed.
 * One attempt: records left behind are used again, and go with a later release. A client that
 * closes first removes them as it closes (`tidyNow`).
 */
export function tidyLater(queue: Queue, ranges: Ranges): void {
  const pending = tidying.get(queue) ?? new Map<string, { cancel: () => void; ranges: Ranges }>();
  tidying.set(queue, pending);
  if (pending.has(ranges.queue)) return;
  const cancel = callAt(queue.clock, queue.clock.now() + tunables.retryMaxMs, () => {
    pending.delete(ranges.queue);
    void tidy(queue, ranges);
  });
  pending.set(ranges.queue, { cancel, ranges });
}

/** Runs the client's pending removals of slot records at once (it is closing). */
export async function tidyNow(queue: Queue): Promise<void> {
  const pending = [...(tidying.get(queue)?.values() ?? [])];
  tidying.delete(queue);
  for (const p of pending) p.cancel();
  await Promise.all(pending.map((p) => tidy(queue, p.ranges)));
}
