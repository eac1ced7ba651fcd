/**
 * `@leasehold/cron` on memory clients: its claims (one etcd transaction per fire) and retained
 * records go through core's internal entry, onto the memory etcd. Its schedule runs on real
 * timers (see the testing README), so this waits for real fires.
 */
import { createScheduler, type Scheduler } from '@leasehold/cron';
import { memoryClient, memoryEtcd } from '@leasehold/testing/memory';
import { expect, it } from 'vitest';

it('each fire runs on one replica, under a growing token', async () => {
  const etcd = memoryEtcd();
  const replicas = await Promise.all([memoryClient({ etcd }), memoryClient({ etcd })]);
  const runs: { replica: number; fire: number; token: bigint }[] = [];
  const schedulers: Scheduler[] = [];
  let resolveDone = () => {};
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  for (const [i, client] of replicas.entries()) {
    const scheduler = await createScheduler(client);
    schedulers.push(scheduler);
    scheduler.schedule('tick', '* * * * * *', ({ token, fireTime }) => {
      runs.push({ replica: i, fire: fireTime.getTime(), token });
      if (new Set(runs.map((r) => r.fire)).size >= 3) resolveDone();
    });
  }
  let timer: NodeJS.Timeout | undefined;
  // Three fires of a once-a-second schedule, with a second to spare for the first.
  await Promise.race([
    done,
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('no 3 fires')), 4_000))),
  ]).finally(() => clearTimeout(timer));
  await Promise.all(schedulers.map((s) => s.stop()));
  const fires = [...new Set(runs.map((r) => r.fire))];
  expect(runs.length).toBe(fires.length); // never twice
  const tokens = runs.map((r) => r.token);
  expect([...tokens].sort((a, b) => (a < b ? -1 : 1))).toEqual(tokens);
  expect(etcd.keys().length).toBeGreaterThan(0); // the claims' records are on the memory etcd
  await Promise.all(replicas.map((c) => c.close()));
});
