/**
 * etcd's watch service in memory: a watcher created on a stream with a start revision gets the
 * stored history from there (or, if that was compacted, is cancelled with the compact revision),
 * then every later write in its range, one response per revision; `prev_kv`, the Noput/Nodelete
 * filters, cancel and progress requests as etcd answers them.
 */
import type { IResponseHeader, IWatchRequest, IWatchResponse } from '@leasehold/core/internal';
import type { KvEvent, MemoryKv } from './kv.js';
import type { MemoryStream } from './stream.js';

interface Watcher {
  id: string;
  stream: MemoryStream<IWatchRequest, IWatchResponse>;
  start: string;
  end: string;
  prevKv: boolean;
  noPut: boolean;
  noDelete: boolean;
}

const name = (key: Buffer | string | undefined): string =>
  key === undefined ? '' : Buffer.isBuffer(key) ? key.toString('latin1') : key;

const FILTERS = ['Noput', 'Nodelete'] as const;

export class MemoryWatches {
  readonly #watchers = new Set<Watcher>();
  /** Every write so far, for watchers that start in the past. */
  readonly #history: { revision: bigint; events: KvEvent[] }[] = [];
  readonly #ids = new WeakMap<object, number>();

  constructor(
    private readonly kv: () => MemoryKv,
    private readonly header: (revision: bigint) => IResponseHeader,
  ) {}

  /** A write was applied: every watcher of its range hears of it. */
  written(revision: bigint, events: KvEvent[]): void {
    this.#history.push({ revision, events });
    for (const w of this.#watchers) this.#send(w, revision, events);
  }

  /** Forgets history before `revision` (after a compaction). */
  compacted(revision: bigint): void {
    const keep = this.#history.findIndex((h) => h.revision >= revision);
    this.#history.splice(0, keep < 0 ? this.#history.length : keep);
  }

  /** One request written on a watch stream. */
  serve(req: IWatchRequest, stream: MemoryStream<IWatchRequest, IWatchResponse>): void {
    const kv = this.kv();
    const base = (fields: Partial<IWatchResponse>): IWatchResponse => ({
      header: this.header(kv.revision),
      watch_id: '0',
      created: false,
      canceled: false,
      compact_revision: '0',
      cancel_reason: '',
      fragment: false,
      events: [],
      ...fields,
    });
    if (req.create_request) {
      const c = req.create_request;
      const next = this.#ids.get(stream) ?? 0;
      this.#ids.set(stream, next + 1);
      const filters = (c.filters ?? []).map((f) =>
        typeof f === 'number' ? FILTERS[f] : (f as string),
      );
      const watcher: Watcher = {
        id: String(c.watch_id && Number(c.watch_id) > 0 ? c.watch_id : next),
        stream,
        start: name(c.key),
        end: name(c.range_end),
        prevKv: Boolean(c.prev_kv),
        noPut: filters.includes('Noput'),
        noDelete: filters.includes('Nodelete'),
      };
      stream.send(base({ watch_id: watcher.id, created: true }));
      const from = BigInt(c.start_revision ?? 0);
      if (from > 0n && from < kv.compacted) {
        stream.send(
          base({
            watch_id: watcher.id,
            canceled: true,
            compact_revision: kv.compacted.toString(),
            cancel_reason: 'mvcc: required revision has been compacted',
          }),
        );
        return;
      }
      if (from > 0n) {
        for (const h of this.#history) {
          if (h.revision >= from) this.#send(watcher, h.revision, h.events);
        }
      }
      this.#watchers.add(watcher);
      return;
    }
    if (req.cancel_request) {
      const id = String(req.cancel_request.watch_id);
      for (const w of this.#watchers) {
        if (w.stream === stream && w.id === id) this.#watchers.delete(w);
      }
      stream.send(base({ watch_id: id, canceled: true }));
      return;
    }
    if (req.progress_request) stream.send(base({ watch_id: '-1' }));
  }

  /** The stream ended: its watchers go with it. */
  closed(stream: object): void {
    for (const w of this.#watchers) if (w.stream === stream) this.#watchers.delete(w);
  }

  #send(w: Watcher, revision: bigint, events: KvEvent[]): void {
    if (!w.stream.open) return void this.#watchers.delete(w);
    const mine = events.filter((e) => {
      if (e.type === 'Put' ? w.noPut : w.noDelete) return false;
      const key = name(e.kv.key);
      if (w.end === '') return key === w.start;
      return key >= w.start && (w.end === '\0' || key < w.end);
    });
    if (mine.length === 0) return;
    w.stream.send({
      header: this.header(revision),
      watch_id: w.id,
      created: false,
      canceled: false,
      compact_revision: '0',
      cancel_reason: '',
      fragment: false,
      events: mine.map((e) => ({
        type: e.type,
        kv: e.kv,
        // etcd3 decodes an absent message as null.
        prev_kv: (w.prevKv && e.prev_kv) || null,
      })) as IWatchResponse['events'],
    });
  }
}
