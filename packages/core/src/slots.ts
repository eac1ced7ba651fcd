/**
 * A queue's local turns: one key is named after one session's lease, so two entries of that
 * session for one name (two acquisitions of `jobs` on one session) would share it. They queue
 * here instead, each creating the key afresh (its own create revision, its own token) once the
 * previous one's key is gone from etcd; and a key is never adopted while an entry still owns it.
 *
 * The common case, one entry per key, costs one small object and no promise: its turn is now.
 */

/** One entry's turn at a key (see {@link Slots.enter}). */
export interface Slot {
  /** Resolves when every earlier entry for the key has left. */
  readonly turn: Promise<void>;
  /** Whether an earlier entry was there when this one entered (else its turn is now). */
  readonly waits: boolean;
  /** No longer contending or holding; its key may still be being removed. */
  idle(): void;
  /** It holds, with this token (for `LockTakenError` of a local `tryAcquire`). */
  held(token: bigint): void;
  /** Its key is gone from etcd: the next entry may create it. */
  leave(): void;
}

const NOW = Promise.resolve();

/** Every entry of one key, oldest first: the first one's turn has come. */
interface Record {
  key: string;
  /** The map the record lives in, left when its last entry leaves. */
  home: Map<string, Record>;
  turns: Turn[];
  /** Entries not yet idle. */
  active: number;
  token?: bigint;
}

class Turn implements Slot {
  turn: Promise<void> = NOW;
  waits = false;
  #start: (() => void) | undefined;
  #active = true;
  left = false;

  constructor(private readonly record: Record) {
    if (record.turns.length > 0) {
      this.waits = true;
      this.turn = new Promise<void>((resolve) => (this.#start = resolve));
    }
    record.turns.push(this);
    record.active++;
  }

  /** Its turn has come: every earlier entry has left. */
  begin(): void {
    this.#start?.();
  }

  idle(): void {
    if (this.#active) this.record.active--;
    this.#active = false;
  }

  held(token: bigint): void {
    this.record.token = token;
  }

  leave(): void {
    this.idle();
    this.left = true;
    const turns = this.record.turns;
    while (turns[0]?.left) {
      turns.shift();
      turns[0]?.begin();
    }
    const { home, key } = this.record;
    if (turns.length === 0 && home.get(key) === this.record) home.delete(key);
  }
}

/** The local turns of one queue's keys (see the file's comment). */
export class Slots {
  readonly #records = new Map<string, Record>();

  /** Queues an entry for `key`: its turn comes once every earlier entry for it has left. */
  enter(key: string): Slot {
    let record = this.#records.get(key);
    if (!record) {
      record = { key, home: this.#records, turns: [], active: 0 };
      this.#records.set(key, record);
    }
    return new Turn(record);
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
