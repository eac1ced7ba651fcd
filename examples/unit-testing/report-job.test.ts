// Unit tests of report-job.ts without etcd: memoryClient() gives each "replica" a real leasehold
// client on one in-memory etcd whose clock the test moves.
import { isStaleTokenError } from '@leasehold/fence';
import { memoryStore } from '@leasehold/fence/memory';
import { memoryClient, memoryEtcd } from '@leasehold/testing/memory';
import { expect, it } from 'vitest';
import { runReportJob } from './report-job.js';

/** A build the test finishes when it wants; `started` resolves once it was called. */
function pendingBuild(report: string) {
  let started = () => {};
  let finish = () => {};
  const calls = new Promise<void>((resolve) => (started = resolve));
  const done = new Promise<string>((resolve) => (finish = () => resolve(report)));
  const build = () => (started(), done);
  return { build, started: calls, finish: () => finish() };
}

it('only the leader builds; the next replica leads after it', async () => {
  const etcd = memoryEtcd();
  const store = memoryStore();
  const [a, b] = [await memoryClient({ etcd }), await memoryClient({ etcd })];
  const buildA = pendingBuild('report by a');
  const buildB = pendingBuild('report by b');
  const runA = runReportJob({ client: a, store, replica: 'a', build: buildA.build });
  await buildA.started;
  const runB = runReportJob({ client: b, store, replica: 'b', build: buildB.build });
  expect((await a.leader('nightly-report'))?.value).toBe('a');
  buildA.finish();
  const tokenA = await runA;
  await buildB.started; // b leads only once a resigned
  buildB.finish();
  expect(await runB).toBeGreaterThan(tokenA);
  expect((await store.read('nightly-report'))?.value).toBe('report by b');
  await Promise.all([a.close(), b.close()]);
});

it("a leader paused past its lease cannot overwrite the next leader's report", async () => {
  const etcd = memoryEtcd();
  const store = memoryStore();
  const [a, b] = [await memoryClient({ etcd }), await memoryClient({ etcd })];
  const slow = pendingBuild('stale report by a');
  const runA = runReportJob({ client: a, store, replica: 'a', build: slow.build });
  await slow.started;
  // a freezes mid-build (a GC pause, a stopped VM); etcd's time goes on and its lease expires.
  etcd.pause(a);
  const runB = runReportJob({
    client: b,
    store,
    replica: 'b',
    build: async () => 'report by b',
  });
  let tokenB: bigint | undefined;
  void runB.then((token) => (tokenB = token));
  // a's lease (10 s TTL) runs out within a minute of etcd's time at the latest.
  for (let s = 0; tokenB === undefined && s < 60; s++) await etcd.clock.advance(1_000);
  expect(tokenB).toBeDefined();
  etcd.resume(a);
  slow.finish(); // a wakes up and writes what it built, with its old token
  const refused = await runA.catch((err: unknown) => err);
  expect(isStaleTokenError(refused)).toBe(true);
  expect(await store.read('nightly-report')).toEqual({ value: 'report by b', token: tokenB });
  await Promise.all([a.close(), b.close()]);
});
