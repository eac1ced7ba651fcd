import { describe, expect, it } from 'vitest';
import type { IWatchRequest, IWatchResponse } from '@leasehold/core/internal';
import { MemoryClock } from './clock.js';
import { MemoryKv } from './kv.js';
import { MemoryProcess } from './process.js';
import { MemoryStream } from './stream.js';
import { MemoryWatches } from './watches.js';

const b = (s: string) => Buffer.from(s);
const header = (revision: bigint) => ({
  cluster_id: '1',
  member_id: '1',
  revision: String(revision),
  raft_term: '1',
});

function world() {
  const process = new MemoryProcess(new MemoryClock());
  const watches: MemoryWatches = new MemoryWatches(() => kv, header);
  const kv = new MemoryKv({
    header,
    leaseExists: () => true,
    onWrite: (revision, events) => watches.written(revision, events),
  });
  const got: IWatchResponse[] = [];
  const stream = new MemoryStream<IWatchRequest, IWatchResponse>(process, (req, s) =>
    watches.serve(req, s),
  );
  stream.on('data', (res: IWatchResponse) => got.push(res));
  const flush = () => new Promise((resolve) => setImmediate(resolve));
  return { process, kv, watches, stream, got, flush };
}

const events = (got: IWatchResponse[]) =>
  got.flatMap((r) => r.events.map((e) => `${e.type} ${e.kv.key.toString()}@${e.kv.mod_revision}`));

describe('MemoryWatches', () => {
  it('replays history from the start revision, then live writes in range, one response per revision', async () => {
    const { kv, stream, got, flush } = world();
    kv.put({ key: b('p/a'), value: b('1') }); // 2
    kv.put({ key: b('q'), value: b('x') }); // 3
    kv.txn({
      success: [
        { request_put: { key: b('p/b'), value: b('2') } },
        { request_delete_range: { key: b('p/a') } },
      ],
    }); // 4
    stream.write({ create_request: { key: b('p/'), range_end: b('p0'), start_revision: '2' } });
    await flush();
    kv.put({ key: b('p/c'), value: b('3') }); // 5
    await flush();
    expect(got[0]).toMatchObject({ created: true, watch_id: '0' });
    expect(events(got)).toEqual(['Put p/a@2', 'Put p/b@4', 'Delete p/a@4', 'Put p/c@5']);
    expect(got.slice(1).map((r) => r.header.revision)).toEqual(['2', '4', '5']);
  });

  it('cancels a watch from a compacted revision with the compact revision', async () => {
    const { kv, stream, got, flush } = world();
    kv.put({ key: b('a'), value: b('1') });
    kv.put({ key: b('a'), value: b('2') });
    kv.compact(3n);
    stream.write({ create_request: { key: b('a'), start_revision: '2' } });
    await flush();
    expect(got.at(-1)).toMatchObject({ canceled: true, compact_revision: '3' });
  });

  it('sends prev_kv, filters puts, and answers progress requests at the current revision', async () => {
    const { kv, stream, got, flush } = world();
    kv.put({ key: b('a'), value: b('1') });
    stream.write({ create_request: { key: b('a'), prev_kv: true, filters: ['Noput'] } });
    await flush();
    kv.put({ key: b('a'), value: b('2') });
    kv.deleteRange({ key: b('a') });
    stream.write({ progress_request: {} });
    await flush();
    expect(events(got)).toEqual(['Delete a@4']);
    expect(got.find((r) => r.events.length > 0)!.events[0]!.prev_kv.value.toString()).toBe('2');
    expect(got.at(-1)).toMatchObject({ events: [], header: { revision: '4' } });
  });

  it('a paused process gets its events on resume, in order', async () => {
    const { process, kv, stream, got, flush } = world();
    stream.write({ create_request: { key: b('a') } });
    await flush();
    process.pause();
    kv.put({ key: b('a'), value: b('1') });
    kv.put({ key: b('a'), value: b('2') });
    await flush();
    expect(events(got)).toEqual([]);
    process.resume();
    expect(events(got)).toEqual(['Put a@2', 'Put a@3']);
  });

  it('an ended stream gets nothing more', async () => {
    const { kv, stream, got, flush } = world();
    stream.write({ create_request: { key: b('a') } });
    await flush();
    stream.end();
    kv.put({ key: b('a'), value: b('1') });
    await flush();
    expect(events(got)).toEqual([]);
    expect(() => stream.write({ progress_request: {} })).toThrow(/after end/);
  });
});
