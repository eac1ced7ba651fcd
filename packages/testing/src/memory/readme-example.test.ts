import { memoryClient, memoryEtcd } from '@leasehold/testing/memory';
import { expect, it } from 'vitest';

it('a paused holder loses its lock to the next worker', async () => {
  const etcd = memoryEtcd(); // one etcd, shared by the clients made on it
  const a = await memoryClient({ etcd });
  const b = await memoryClient({ etcd });
  const lock = await a.acquire('job');
  const next = b.acquire('job'); // b queues behind a

  etcd.pause(a); // a freezes (a GC pause, a stopped VM): it sends no keepalive
  await etcd.clock.advance(10_000); // the shared session's 10 s TTL runs out on etcd
  expect((await next).token).toBeGreaterThan(lock.token);

  let lost: Error | undefined;
  lock.onLost((error) => (lost = error));
  etcd.resume(a); // a runs again, late: its local deadline has passed
  expect(lost?.name).toBe('LockLostError');
  await Promise.all([a.close(), b.close()]);
});
