/**
 * What the semaphore and read/write lock process tests share: permit-worker processes writing
 * through @leasehold/fence to a PostgreSQL schema of the suite's own, key prefixes whose leases
 * are revoked after each test (killed workers leave keys behind), and the evidence the checks
 * read: PostgreSQL's log and its occupancy counts.
 *
 * Exclusion is judged by the occupancy counts, not by comparing the processes' clocks: a worker
 * counts itself in (one PostgreSQL update) after its hold is granted and out before it releases,
 * so a correct lock orders every count-out before the next holder's count-in through etcd
 * (release → deletion → the waiter's watch → grant), and PostgreSQL's row lock orders the counts.
 * Wall-clock stamps of different processes (`performance.timeOrigin + performance.now()`) are
 * only as comparable as each process's sample of the wall clock at start-up; counts in one
 * database need no clock at all.
 */
import { fileURLToPath } from 'node:url';
import { fenceTableDDL } from '@leasehold/fence/postgres';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import { WorkerProcess } from '../setup/worker-process.js';
import { ownSchema } from '../fence/stores.js';

const script = fileURLToPath(new URL('./workers/permit-worker.mjs', import.meta.url));
const FENCE_TABLE = 'hold_fence';
const LOG_TABLE = 'hold_log';
const OCCUPANCY_TABLE = 'hold_occupancy';

/** Wall-clock ms, as the workers stamp their events. */
export const now = () => performance.timeOrigin + performance.now();

/** How many holders a worker counted on its resource, itself included, as it counted itself in. */
export interface Occupancy {
  readonly readers: number;
  readonly writers: number;
}

/** Sets up a suite's schema and clean-up (call inside `describe`); returns its helpers. */
export function holderSuite(url: string, label: string) {
  const endpoints = sharedEndpoints();
  const admin = etcdClient(endpoints);
  afterAll(() => admin.close());
  const schema = ownSchema(url, label);
  beforeAll(async () => {
    const db = schema.admin();
    await db.query(fenceTableDDL({ table: `${schema.name}.${FENCE_TABLE}` }));
    await db.query(
      `CREATE TABLE "${schema.name}"."${LOG_TABLE}" (id bigserial PRIMARY KEY, resource text NOT NULL, worker text NOT NULL, token int8 NOT NULL, note text NOT NULL, at_ms int8 NOT NULL)`,
    );
    await db.query(
      `CREATE TABLE "${schema.name}"."${OCCUPANCY_TABLE}" (resource text PRIMARY KEY, readers int NOT NULL DEFAULT 0, writers int NOT NULL DEFAULT 0)`,
    );
  });
  const prefixes: string[] = [];
  afterEach(async () => {
    for (const prefix of prefixes.splice(0)) {
      const kvs = await admin.getAll().prefix(prefix).exec();
      const leases = new Set(kvs.kvs.map((kv) => kv.lease).filter((lease) => lease !== '0'));
      for (const ID of leases) await admin.leaseClient.leaseRevoke({ ID }).catch(() => undefined);
      await admin.delete().prefix(prefix);
    }
  });
  const env = {
    FENCE_PG_URL: schema.url,
    FENCE_TABLE,
    FENCE_LOG_TABLE: LOG_TABLE,
    OCCUPANCY_TABLE,
  };
  return {
    admin,
    /** A key prefix of the test's own, cleaned up after it. */
    lockPrefix: (name: string): string => {
      const prefix = uniquePrefix(name);
      prefixes.push(prefix);
      return prefix;
    },
    /** A permit-worker process on `prefix` whose shared session has `ttlSeconds`. */
    worker: (name: string, prefix: string, ttlSeconds: number): Promise<WorkerProcess> =>
      WorkerProcess.start(name, script, env, [endpoints.join(','), prefix, String(ttlSeconds)]),
    /** The fenced writes PostgreSQL accepted on resources matching `resource`, in commit order. */
    logOf: async (resource: RegExp) => {
      const { rows } = await schema
        .admin()
        .query<{ resource: string; worker: string; token: string; note: string }>(
          `SELECT resource, worker, token::text AS token, note FROM "${schema.name}"."${LOG_TABLE}" ORDER BY id`,
        );
      return rows
        .filter((r) => resource.test(r.resource))
        .map((r) => ({ ...r, token: BigInt(r.token) }));
    },
    /** The keys of a queue now. */
    keysOf: (range: string) => admin.getAll().prefix(range).keys(),
  };
}
