/**
 * A queue's local turns: one key is named after one session's lease, so two entries of that
 * session for one name (two acquisitions of `jobs` on one session) would share it. They queue
 * here instead, each creating the key afresh (its own create revision, its own token) once the
 * previous one's key is gone from etcd; and a key is never adopted while an entry still owns it.
 */

/** One entry's turn at a key (see {@link Slots.enter}). */
export interface Slot {
  /** Resolves when every earlier entry for the key has left. */
  readonly turn: Promise<void>;
  /** No longer contending or holding; its key may still be being removed. */
  idle(): void;
  /** It holds, with this token (for `LockTakenError` of a local `tryAcquire`). */
  held(token: bigint): void;
  /** Its key is gone from etcd: the next entry may create it. */
  leave(): void;
}

export class Slots {
  readonly #records = new Map<string, { tail: Promise<void>; active: number; token?: bigint }>();

  /**
   * Serialises one queue key's entries. The key is named after its session's lease, so two
   * entries of one session at once would share it; each waits until the previous one's key is
   * gone from etcd, then creates it afresh with its own create revision (its own token).
   */
  enter(key: string): Slot {
    const record = this.#records.get(key) ?? { tail: Promise.resolve(), active: 0 };
    this.#records.set(key, record);
    const turn = record.tail;
    let left!: () => void;
    const mine = turn.then(() => new Promise<void>((resolve) => (left = resolve)));
    record.tail = mine;
    record.active++;
    void mine.then(() => record.tail === mine && this.#records.delete(key));
    let active = true;
    const idle = () => {
      if (active) record.active--;
      active = false;
    };
    const leave = () => {
      idle();
      void turn.then(() => left());
    };
    return { turn, idle, leave, held: (token) => void (record.token = token) };
  }

  /** Whether any entry has `key`: holding, waiting or removing it. */
  owns(key: string): boolean {
    return this.#records.has(key);
  }

  /** If an entry holds or contends for `key` right now: its token (0 while it still waits). */
  busy(key: string): bigint | undefined {
    const record = this.#records.get(key);
    return record && record.active > 0 ? (record.token ?? 0n) : undefined;
  }
}
