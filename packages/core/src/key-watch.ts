import type { IKeyValue, Watcher } from 'etcd3';
import type { EtcdTransport } from './etcd.js';

/** What a held lock (or a waiter, about its predecessor) hears about a key. */
export interface KeyListener {
  /** The key changed at or after the revision it registered from. */
  changed(kind: 'delete' | 'put'): void;
  /** Events may have been missed (watch restarted, or registered behind it): re-read the key. */
  unsure(): void;
}

const RESTART_DELAY_MS = 250;

/**
 * One watch over the whole lock prefix, shared by every held lock and every waiter of a client. A watch per lock
 * would cost a watch create and cancel on every acquire and release, which measured here
 * doubled the uncontended lock time. The price is that the client also sees other clients'
 * lock churn under the same prefix.
 *
 * Correctness rests on revisions: a lock registers the revision after which its key must not
 * change. Events older than that are ignored (they belong to an earlier hold of the same key);
 * if the watch may already have passed that revision, or restarts, the lock re-reads its key.
 */
export class KeyWatch {
  readonly #subs = new Map<string, Set<{ from: bigint; listener: KeyListener }>>();
  #watcher: Watcher | undefined;
  #starting = false;
  #startRevision = 0n;
  #seenRevision = 0n;
  #closed = false;

  constructor(
    private readonly transport: EtcdTransport,
    private readonly prefix: string,
  ) {}

  /** Tells `listener` about changes to `key` at revisions >= `fromRevision`. */
  register(key: string, fromRevision: bigint, listener: KeyListener): Disposable {
    const entry = { from: fromRevision, listener };
    let set = this.#subs.get(key);
    if (!set) this.#subs.set(key, (set = new Set()));
    set.add(entry);
    if (!this.#watcher && !this.#starting) {
      this.#start(fromRevision);
    } else if (fromRevision < this.#startRevision || fromRevision <= this.#seenRevision) {
      queueMicrotask(() => listener.unsure());
    }
    return {
      [Symbol.dispose]: () => {
        set.delete(entry);
        if (set.size === 0 && this.#subs.get(key) === set) this.#subs.delete(key);
      },
    };
  }

  #start(fromRevision: bigint): void {
    this.#starting = true;
    this.#startRevision = fromRevision;
    this.#seenRevision = fromRevision - 1n;
    this.transport.client
      .watch()
      .prefix(this.prefix)
      .startRevision(fromRevision.toString())
      .create()
      .then(
        (watcher) => {
          this.#starting = false;
          if (this.#closed) return void watcher.cancel().catch(() => undefined);
          this.#watcher = watcher;
          watcher.on('delete', (kv) => this.#event('delete', kv));
          watcher.on('put', (kv) => this.#event('put', kv));
          // The server cancelled the watch (e.g. its revision was compacted): start again from
          // now and have every holder re-read its key, since events may have been missed.
          watcher.on('error', () => this.#restart(watcher));
        },
        () => {
          this.#starting = false;
          this.#restartLater();
        },
      );
  }

  #event(kind: 'delete' | 'put', kv: IKeyValue): void {
    const revision = BigInt(kv.mod_revision);
    if (revision > this.#seenRevision) this.#seenRevision = revision;
    for (const sub of this.#subs.get(kv.key.toString()) ?? []) {
      if (revision >= sub.from) sub.listener.changed(kind);
    }
  }

  #restart(old: Watcher): void {
    if (this.#watcher === old) this.#watcher = undefined;
    void old.cancel().catch(() => undefined);
    this.#restartLater();
  }

  #restartLater(): void {
    if (this.#closed) return;
    setTimeout(() => void this.#restartFromNow(), RESTART_DELAY_MS).unref();
  }

  /**
   * Starts again from the current revision (an older one may be compacted) and has every holder
   * re-read its key, which covers whatever happened in between.
   */
  async #restartFromNow(): Promise<void> {
    if (this.#closed || this.#watcher || this.#starting || this.#subs.size === 0) return;
    let now: bigint;
    try {
      const res = await this.transport.call(
        'watch restart',
        (o) =>
          this.transport.client.kv.range({ key: Buffer.from(this.prefix), count_only: true }, o),
        { idempotent: true },
      );
      now = BigInt(res.header.revision);
    } catch {
      return this.#restartLater();
    }
    if (this.#closed || this.#watcher || this.#starting) return;
    this.#start(now + 1n);
    for (const set of [...this.#subs.values()]) for (const { listener } of set) listener.unsure();
  }

  close(): void {
    this.#closed = true;
    this.#subs.clear();
    const watcher = this.#watcher;
    this.#watcher = undefined;
    void watcher?.cancel().catch(() => undefined);
  }
}
