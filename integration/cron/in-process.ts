/**
 * What the in-process @leasehold/cron tests share: one client on the run's etcd (lease TTL 5 s),
 * more clients when a test needs replicas of its own, an admin client, and schedulers on their
 * own key prefixes, all stopped and cleaned up after each test.
 */
import { connect, type Leasehold } from '@leasehold/core';
import { createScheduler, type Scheduler, type SchedulerOptions } from '@leasehold/cron';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

export function inProcess() {
  const endpoints = sharedEndpoints();
  const admin = etcdClient(endpoints);
  const clients: Leasehold[] = [];
  let shared: Leasehold | undefined;
  const prefixes: string[] = [];
  const schedulers: Scheduler[] = [];
  beforeAll(async () => {
    shared = await connect({ endpoints, session: { ttlSeconds: 5 } });
  });
  afterEach(async () => {
    await Promise.all(schedulers.splice(0).map((s) => s.stop({ drainMs: 0 })));
    for (const prefix of prefixes.splice(0)) await admin.delete().prefix(prefix);
  });
  afterAll(async () => {
    await shared?.close();
    await Promise.all(clients.splice(0).map((c) => c.close()));
    admin.close();
  });

  /** A key prefix of the test's own, deleted after it. */
  const prefixFor = (label: string): string => {
    const prefix = uniquePrefix(label);
    prefixes.push(prefix);
    return prefix;
  };

  return {
    endpoints,
    admin,
    /** The shared client (connected before the tests). */
    get client(): Leasehold {
      return shared!;
    },
    prefixFor,
    /** A client of its own, as a replica in another process would have. */
    async ownClient(): Promise<Leasehold> {
      const own = await connect({ endpoints, session: { ttlSeconds: 5 } });
      clients.push(own);
      return own;
    },
    /** A scheduler stopped after the test; on its own prefix unless `options.prefix` is given. */
    async scheduler(
      label: string,
      options: SchedulerOptions = {},
      client: Leasehold = shared!,
    ): Promise<Scheduler> {
      const s = await createScheduler(client, {
        prefix: options.prefix ?? prefixFor(`cron-${label}`),
        runner: label,
        ...options,
      });
      schedulers.push(s);
      return s;
    },
  };
}
