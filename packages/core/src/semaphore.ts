/**
 * Counting semaphores on the lock queue: at most `permits` holders at once, admitted in the order
 * they joined, each with a fencing token (its key's create revision) and a slot of its own.
 *
 * Keys. The semaphore `name` is the queue `<lockPrefix><name>%sem/`: encoded names never hold a
 * raw `%`, so it never meets the lock `name`'s queue nor another name's. A permit's key is
 * `<permits>.<lease hex>.<n>` (n tells apart one session's permits of one semaphore). A permit
 * waits for every older key and holds once fewer than `permits` of them remain: the holders are
 * the `permits` oldest keys, and each waiter counts deletes on the shared watch, no read per event.
 *
 * The limit. Key names start with their permits, so the keys with other permits are two key
 * ranges of the queue (`[0, <permits>.)` and `[<permits>/, :)`), and the join txn creates its key
 * only if both are empty (a compare over a range, which holds for an empty range). So a key with
 * other permits never joins at all: it rejects with `PermitsMismatchError` naming both numbers,
 * leaves nothing behind, and never delays or refuses the callers that agree. The limit is the
 * first holder's until the queue is empty. Names carry it, not values, so every read of the queue
 * stays keys only (values may be 64 KiB each). A prefix nested inside a semaphore's queue (a
 * client whose `lockPrefix` is `<lockPrefix><name>%sem/…`) would put keys in those ranges: don't.
 *
 * Slots: see `permit-slots.ts`. A holder has one of 0 … permits − 1, unique among the holders,
 * and a slot's holders have growing tokens, so `(name, slot)` is a fencing resource of its own.
 */
import type { ICompare, IRequestOp } from 'etcd3';
import { acquireQueued, type Queued } from './acquire.js';
import { LockTakenError, PermitsMismatchError } from './errors.js';
import { toHolder, type Holder } from './hold.js';
import { prefixEnd } from './keys.js';
import { Lock, type AcquireOptions, type LockMaker } from './mutex.js';
import { encodeName, invalid } from './options.js';
import { claimSlot, slotRecords, tidyLater, useView, viewReads } from './permit-slots.js';
import { byCreate, membersOf, type Entry, type Queue } from './queue.js';

/** The most permits a semaphore can have. */
export const MAX_PERMITS = 10_000;

/**
 * Options of `client.acquirePermit(name, options)` and `client.withPermit()`: `permits` is
 * required; the rest are those of {@link AcquireOptions}.
 */
export interface PermitOptions extends AcquireOptions {
  /**
   * How many holders the semaphore admits at once: a whole number from 1 to 10,000. Every caller
   * of one semaphore must give the same (`PermitsMismatchError` otherwise).
   */
  permits: number;
}

/**
 * Options of `client.tryAcquirePermit(name, options)`: those of {@link PermitOptions} but
 * `timeoutMs`, since it never waits.
 */
export type TryPermitOptions = Omit<PermitOptions, 'timeoutMs'>;

/** What `withPermit` hands to its function. */
export interface PermitContext {
  /** The fencing token: send it with every write, and with `slot` for the slot's resource. */
  token: bigint;
  /**
   * Which of the semaphore's permits this is, from 0 to `permits - 1`; no other holder has it
   * meanwhile.
   */
  slot: number;
  /** Aborts when the permit can no longer be trusted. */
  signal: AbortSignal;
  /** The permit itself: for `timeLeftMs()`, `fencedWrite()`, `onLost()` and the rest. */
  permit: Permit;
}

/** A holder of a semaphore, as `client.semaphore()` reports it. */
export interface PermitHolder extends Holder {
  /** Its slot; `undefined` for a holder that is still taking one (or a key of another tool). */
  slot: number | undefined;
}

/** Who holds and who waits for a semaphore (`client.semaphore(name)`). */
export interface SemaphoreState {
  /** The limit, the first holder's permits; `undefined` when nobody holds or waits. */
  permits: number | undefined;
  /** The holders, oldest first. */
  holders: PermitHolder[];
  /** The waiters, in the order they will be admitted. */
  waiting: Holder[];
}

export function validatePermits(value: unknown): number {
  if (Number.isInteger(value) && (value as number) >= 1 && (value as number) <= MAX_PERMITS) {
    return value as number;
  }
  throw invalid('permits', `a whole number from 1 to ${MAX_PERMITS}`, value);
}

/** The permits a permit key names (`…/<permits>.<lease hex>.<n>`); `undefined` for another key. */
export function permitsOf(key: string): number | undefined {
  const match = /^([1-9]\d*)\.[0-9a-f]+\.\d+$/.exec(key.slice(key.lastIndexOf('/') + 1));
  return match ? Number(match[1]) : undefined;
}

/** The queue and the slot records of the semaphore `name` (an encoded name, under `prefix`). */
export const semaphoreRanges = (prefix: string, segment: string) => ({
  queue: `${prefix}${segment}%sem/`,
  slots: `${prefix}${segment}%slot/`,
});

/**
 * A held permit: a {@link Lock} (its token, key, signal, fenced writes and release) plus its
 * `slot`. Send `token` with every write; for data per slot, fence it as the resource
 * `slotResource` (`${name}#${slot}`): a permit that lost slot k while paused cannot overwrite what
 * slot k's next holder wrote.
 */
export class Permit extends Lock {
  /** Removes the semaphore's slot records once it is idle (`tidyLater`). */
  readonly #tidy: () => void;

  private constructor(
    entry: Entry,
    name: string,
    /** The semaphore's limit. */
    readonly permits: number,
    /** This permit's slot, 0 … permits − 1: unique among the semaphore's holders. */
    readonly slot: number,
    tidy: () => void,
  ) {
    super(entry, name);
    this.#tidy = tidy;
  }

  /** @internal */
  static admitted(
    entry: Entry,
    name: string,
    permits: number,
    slot: number,
    tidy: () => void,
  ): Permit {
    return new Permit(entry, name, permits, slot, tidy);
  }

  /** The fencing resource of this permit's slot: `${name}#${slot}`. */
  get slotResource(): string {
    return `${this.name}#${this.slot}`;
  }

  /**
   * Releases the permit, as {@link Lock.release}; once the semaphore is idle, its slot records
   * go too (a second later).
   */
  override async release(): Promise<void> {
    await super.release();
    this.#tidy();
  }
}

/** The join's guard: no key of the queue `range` names other permits than `permits`. */
function samePermits(range: string, permits: number): ICompare[] {
  const none = (from: string, to: string): ICompare => ({
    ...byCreate(Buffer.from(from), 0n),
    range_end: Buffer.from(to),
  });
  return [
    none(`${range}0`, `${range}${permits}.`),
    none(`${range}${permits}/`, `${range}:`), // '/' and ':' follow '.' and '9'
  ];
}

function describe(maker: LockMaker, name: string, options: TryPermitOptions): Queued<Permit> {
  const segment = encodeName(name);
  const permits = validatePermits(options.permits);
  const queue = maker.locks;
  const ranges = semaphoreRanges(queue.watch.prefix, segment);
  const { view, release } = useView(queue, ranges);
  return {
    name,
    segment: `${segment}%sem`,
    tag: `${permits}`,
    what: `a permit of semaphore ${JSON.stringify(name)} (${permits} permit${permits === 1 ? '' : 's'})`,
    admission: {
      capacity: permits,
      guard: samePermits(ranges.queue, permits),
      refused: (kvs) => {
        const theirs = kvs
          .map((kv) => /^(\d+)\./.exec(kv.key.toString().slice(ranges.queue.length))?.[1])
          .find((p) => p !== undefined && p !== String(permits));
        return new PermitsMismatchError(name, permits, Number(theirs));
      },
      // The first acquisition of this client reads the slots with its join; later ones use its
      // view, which the watch keeps current.
      reads: () => (view.started ? [] : viewReads(ranges).slice(0, 1)),
      seen: ([slots], keys, readAt) => {
        if (slots) view.start(slots, keys, readAt);
      },
    },
    taken: (holder) =>
      new LockTakenError(
        name,
        holder?.key.toString() ?? ranges.queue,
        BigInt(holder?.create_revision ?? 0),
        holder?.value.toString() ?? '',
        `all ${permits} permits of semaphore ${JSON.stringify(name)} are taken: the oldest`,
      ),
    hold: async (entry, signal) => {
      const slot = await claimSlot(view, entry, permits, signal);
      return Permit.admitted(entry, name, permits, slot, () => tidyLater(queue, ranges));
    },
    done: release,
  };
}

/** Waits for a permit of the semaphore `name` (FIFO) and returns it held. */
export function acquirePermit(
  maker: LockMaker,
  name: string,
  options: PermitOptions,
): Promise<Permit> {
  return acquireQueued(maker, 'semaphore', name, options, true, ['permits'], () =>
    describe(maker, name, options),
  );
}

/** Takes a permit only if one is free now; otherwise rejects with `LockTakenError`. */
export function tryAcquirePermit(
  maker: LockMaker,
  name: string,
  options: TryPermitOptions,
): Promise<Permit> {
  return acquireQueued(maker, 'semaphore', name, options, false, ['permits'], () =>
    describe(maker, name, options),
  );
}

/** Who holds and who waits for the semaphore `name`: one read of its queue and its slots. */
export async function semaphoreState(queue: Queue, name: string): Promise<SemaphoreState> {
  const ranges = semaphoreRanges(queue.watch.prefix, encodeName(name));
  const span = (range: string): IRequestOp => ({
    request_range: {
      key: Buffer.from(range),
      range_end: prefixEnd(range),
      sort_order: 'Ascend',
      sort_target: 'Create',
    },
  });
  const res = await queue.etcd.txn(
    'semaphore read',
    { compare: [], success: [span(ranges.queue), span(ranges.slots)], failure: [] },
    { idempotent: true },
  );
  const [keys, slots] = res.responses.map((r) => r.response_range.kvs);
  const kvs = membersOf(ranges.queue, keys ?? []);
  const records = slotRecords(ranges, slots ?? []);
  const limit = kvs.map((kv) => permitsOf(kv.key.toString())).find((p) => p !== undefined);
  const state: SemaphoreState = { permits: limit, holders: [], waiting: [] };
  kvs.forEach((kv, rank) => {
    const holder = toHolder(kv)!;
    if (rank >= (limit ?? 1)) return void state.waiting.push(holder);
    const slot = [...records].find(([, r]) => r.key === holder.key && r.token === holder.token);
    state.holders.push({ ...holder, slot: slot?.[0] });
  });
  return state;
}
