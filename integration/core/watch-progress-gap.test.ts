/**
 * etcd 3.4.23 answers a watch progress request with the member's current revision even while
 * the watch is still catching up (a watch created from revision 2 with 2000 events behind it
 * gets `progress rev=2001` before any event), so a progress notification proves the stream is
 * alive, not what it has delivered. These tests cut the connection at the worst moment — as
 * soon as such a premature notification arrives, with the catch-up events still queued on the
 * server — and check that a holder whose key was deleted, or a waiter whose own key was deleted,
 * never goes on believing the wrong thing: the watch resumes after the last *event* it
 * delivered, and the periodic read of the prefix catches anything missed.
 *
 * A read-only spy on the client's watch stream only picks the moment; the fault itself is an
 * ordinary connection reset through the TCP proxy.
 */
import { connect } from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

interface RawWatchResponse {
  created?: boolean;
  canceled?: boolean;
  header: { revision: string };
  events: { type: string; kv: { key: Buffer; mod_revision: string } }[];
}
interface RawStream {
  on(event: 'data', fn: (res: RawWatchResponse) => void): unknown;
}

/** Calls `spy` on every watch response of `client` before the SDK sees it (read only). */
function spyOnWatch(client: object, spy: (res: RawWatchResponse) => void): void {
  const internal = client as {
    etcd: { client: { watchClient: { watch: () => Promise<RawStream> } } };
  };
  const watchClient = internal.etcd.client.watchClient;
  const original = watchClient.watch.bind(watchClient);
  watchClient.watch = async () => {
    const stream = await original();
    stream.on('data', spy);
    return stream;
  };
}

/**
 * Arms a one-shot fault: once a progress notification at or above `target.deleteRevision`
 * arrives before the delete event of `target.key`, reset every connection of `proxy` (and heal
 * it 300 ms later).
 */
function armProgressFault(client: object, proxy: TcpFaultProxy) {
  const state = {
    target: undefined as { key: string; deleteRevision: bigint } | undefined,
    created: 0,
    sawDelete: false,
    injected: false,
  };
  spyOnWatch(client, (res) => {
    if (res.created) state.created++;
    for (const e of res.events) {
      if (state.target && e.type === 'Delete' && e.kv.key.toString() === state.target.key) {
        state.sawDelete = true;
      }
    }
    const progress = !res.created && !res.canceled && res.events.length === 0;
    if (
      progress &&
      state.target &&
      !state.sawDelete &&
      !state.injected &&
      BigInt(res.header.revision) >= state.target.deleteRevision
    ) {
      state.injected = true;
      proxy.setMode('reset'); // the catch-up events still queued on the server are cut off
      setTimeout(() => proxy.setMode('pass'), 300);
    }
  });
  return state;
}

describe('watch resume after a premature progress notification (etcd 3.4)', () => {
  it('a holder whose key was deleted during a reconnect learns it is lost, even if the catch-up is cut off', async () => {
    const lockPrefix = uniquePrefix('progress-gap');
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using a = await connect({
      endpoints: [proxy.url],
      lockPrefix,
      callTimeoutMs: 1_000,
      // A legal setting that makes the client ask for progress often; the default (5 s) only
      // makes the window rarer, not safe.
      recheckIntervalMs: 10,
      session: { ttlSeconds: 60 },
    });
    onCleanup(a, () => {});
    await using b = await connect({ endpoints, lockPrefix });
    const spy = armProgressFault(a, proxy);

    // The overtaking depends on etcd's 100 ms sync tick: try a few blips until it happens.
    for (let attempt = 1; attempt <= 10 && !spy.injected; attempt++) {
      spy.target = undefined;
      spy.sawDelete = false;
      const lockA = await a.acquire(`job${attempt}`);
      const live = spy.created;
      await waitFor(() => spy.created > live || attempt > 1, { what: 'watch created' });
      proxy.setMode('reset'); // a network blip
      const del = await admin.delete().key(lockA.key).exec();
      for (let i = 0; i < 50; i++) await admin.put(`${lockPrefix}other/k${i % 5}`).value(String(i));
      const lockB = await b.acquire(`job${attempt}`, { timeoutMs: 5_000 });
      expect(lockB.token > lockA.token).toBe(true);
      spy.target = { key: lockA.key, deleteRevision: BigInt(del.header.revision) };
      proxy.setMode('pass');
      await waitFor(() => spy.injected || spy.sawDelete, {
        what: 'catch-up or overtaking progress',
      });
      if (!spy.injected) {
        await waitFor(() => !lockA.isHeld, { what: 'A lost (no overtaking this time)' });
        await lockB.release();
        continue;
      }
      // B holds now. A must stop believing it holds: give it many recheck intervals.
      const outcome = await waitFor(() => !lockA.isHeld, { timeoutMs: 10_000 }).then(
        () => 'lost',
        () => 'still held',
      );
      console.log(
        `[progress-gap] attempt ${attempt}: A token ${lockA.token} ${outcome} 10 s later; B token ${lockB.token} held=${lockB.isHeld}; delete event ever seen by A's watch: ${spy.sawDelete}`,
      );
      expect(outcome).toBe('lost');
      await lockB.release();
    }
    expect(spy.injected, 'precondition: a progress notification overtook the delete event').toBe(
      true,
    );
  }, 120_000);

  it('a waiter whose predecessor was released during a reconnect is told it is first (the lock is not wedged)', async () => {
    const lockPrefix = uniquePrefix('progress-wedge');
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using a = await connect({
      endpoints: [proxy.url],
      lockPrefix,
      callTimeoutMs: 1_000,
      recheckIntervalMs: 10,
      session: { ttlSeconds: 60 },
    });
    onCleanup(a, () => {});
    await using b = await connect({ endpoints, lockPrefix });
    const spy = armProgressFault(a, proxy);

    for (let attempt = 1; attempt <= 10 && !spy.injected; attempt++) {
      spy.target = undefined;
      spy.sawDelete = false;
      const name = `job${attempt}`;
      const lockB = await b.acquire(name);
      const live = spy.created;
      const waiting = a.acquire(name, { timeoutMs: 60_000 });
      waiting.catch(() => {});
      await waitFor(
        async () => (await admin.getAll().prefix(`${lockPrefix}${name}/`).keys()).length === 2,
        { what: 'A queued behind B' },
      );
      await waitFor(() => spy.created > live || attempt > 1, { what: 'watch created' });
      proxy.setMode('reset'); // a network blip while A waits
      await lockB.release();
      const after = await admin.get(`${lockPrefix}${name}/`).exec();
      for (let i = 0; i < 50; i++) await admin.put(`${lockPrefix}other/k${i % 5}`).value(String(i));
      spy.target = { key: lockB.key, deleteRevision: BigInt(after.header.revision) };
      proxy.setMode('pass');
      await waitFor(() => spy.injected || spy.sawDelete, {
        what: 'catch-up or overtaking progress',
      });
      const outcome = await waitFor(() => waiting, { timeoutMs: 10_000 }).then(
        async (lock) => {
          await lock.release();
          return 'acquired';
        },
        (e: Error) => `not acquired (${e.message.slice(0, 60)})`,
      );
      const keys = await admin.getAll().prefix(`${lockPrefix}${name}/`).keys();
      if (spy.injected) {
        console.log(
          `[progress-wedge] attempt ${attempt}: A ${outcome} 10 s after B released; keys in the queue: ${JSON.stringify(keys)}`,
        );
      }
      expect(outcome).toBe('acquired');
    }
    expect(spy.injected, 'precondition: a progress notification overtook the delete event').toBe(
      true,
    );
  }, 120_000);

  it('a waiter whose own key was deleted during a reconnect is never told it is first', async () => {
    const lockPrefix = uniquePrefix('progress-false-first');
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using a = await connect({
      endpoints: [proxy.url],
      lockPrefix,
      callTimeoutMs: 1_000,
      recheckIntervalMs: 10,
      session: { ttlSeconds: 60 },
    });
    onCleanup(a, () => {});
    await using b = await connect({ endpoints, lockPrefix });
    await using c = await connect({ endpoints, lockPrefix });
    const spy = armProgressFault(a, proxy);

    for (let attempt = 1; attempt <= 10 && !spy.injected; attempt++) {
      spy.target = undefined;
      spy.sawDelete = false;
      const name = `job${attempt}`;
      const lockB = await b.acquire(name);
      const live = spy.created;
      const waiting = a.acquire(name, { timeoutMs: 60_000 }).then(
        (lock) => ({ lock }),
        (error: Error) => ({ error }),
      );
      let keys: string[] = [];
      await waitFor(
        async () =>
          (keys = await admin.getAll().prefix(`${lockPrefix}${name}/`).keys()).length === 2,
        { what: 'A queued behind B' },
      );
      const keyA = keys.find((k) => k !== lockB.key)!;
      await waitFor(() => spy.created > live || attempt > 1, { what: 'watch created' });
      proxy.setMode('reset'); // a network blip while A waits
      const del = await admin.delete().key(keyA).exec(); // A's place in the queue is gone
      for (let i = 0; i < 50; i++) await admin.put(`${lockPrefix}other/k${i % 5}`).value(String(i));
      spy.target = { key: keyA, deleteRevision: BigInt(del.header.revision) };
      proxy.setMode('pass');
      await waitFor(() => spy.injected || spy.sawDelete, {
        what: 'catch-up or overtaking progress',
      });
      if (!spy.injected) {
        await lockB.release();
        await waiting;
        continue;
      }
      await waitFor(() => proxy.connectionCount > 0 && proxy.mode === 'pass', { what: 'healed' });
      await lockB.release(); // delivered to A on the resumed stream
      const lockC = await c.acquire(name, { timeoutMs: 5_000 }); // A's key is gone: C is first
      const outcome = await waitFor(() => waiting, { timeoutMs: 10_000 });
      const aHeld = 'lock' in outcome && outcome.lock.isHeld;
      console.log(
        `[progress-false-first] attempt ${attempt}: A's acquire ${'lock' in outcome ? `resolved with token ${outcome.lock.token}, isHeld ${aHeld}` : `rejected ${outcome.error.name}`}; C holds token ${lockC.token} (isHeld ${lockC.isHeld}); A's key in etcd: ${(await admin.get(keyA).string()) !== null}`,
      );
      expect(aHeld && lockC.isHeld).toBe(false);
      await lockC.release();
    }
    expect(spy.injected, 'precondition: a progress notification overtook the delete event').toBe(
      true,
    );
  }, 120_000);
});
