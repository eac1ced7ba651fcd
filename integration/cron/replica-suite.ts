/**
 * What the multi-process @leasehold/cron replica tests share: replicas in processes of their own
 * on the run's etcd, each run writing one fenced row into a PostgreSQL schema of the file's own;
 * key prefixes removed after each test; the records read as a user would.
 */
import { connect } from '@leasehold/core';
import { createScheduler, type HistoryEntry } from '@leasehold/cron';
import { afterAll, afterEach } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import { countRuns, Proc, replicaEnv, replicaScript, runsSchema, type Row } from './harness.js';

/** Registers the hooks of a replica test file (inside its `describeWith` on PostgreSQL `url`). */
export function replicaSuite(url: string) {
  const endpoints = sharedEndpoints();
  const admin = etcdClient(endpoints);
  afterAll(() => admin.close());
  // Records sit on 2-minute retention leases: each test's prefixes go right after it.
  const prefixes: string[] = [];
  afterEach(async () => {
    for (const prefix of prefixes.splice(0)) await admin.delete().prefix(prefix);
  });
  const db = runsSchema(url, 'cron');
  return {
    db,
    /** A key prefix of the current test's own, removed after it. */
    cronPrefix: (label: string): string => {
      const prefix = uniquePrefix(`cron-${label}`);
      prefixes.push(prefix);
      return prefix;
    },
    /** A replica process on `prefix` (lease TTL 2 s unless `extra` says otherwise). */
    start: (name: string, prefix: string, extra: Record<string, string> = {}) =>
      Proc.start(
        name,
        replicaScript,
        replicaEnv(endpoints, prefix, { TTL_SECONDS: '2', ...db.env(), ...extra }),
      ),
    /** The records of `job` under `prefix`, read as any user would: scheduler.history(). */
    historyOf: async (prefix: string, job: string): Promise<HistoryEntry[]> => {
      const client = await connect({ endpoints });
      try {
        const scheduler = await createScheduler(client, { prefix });
        try {
          return await scheduler.history(job, { limit: 1000 });
        } finally {
          await scheduler.stop();
        }
      } finally {
        await client.close();
      }
    },
  };
}

/** Fires whose record names `runner`: a killed or paused runner's claims, not misses. */
export const claimedBy = (history: HistoryEntry[], runner: string) =>
  new Set(history.filter((h) => h.runner === runner).map((h) => h.fireTime.toISOString()));

/** Milliseconds until the wall clock is `phaseMs` into a period of `periodMs`. */
export const untilPhase = (periodMs: number, phaseMs: number) =>
  (phaseMs - (Date.now() % periodMs) + periodMs) % periodMs;

/** Logs a run's fires, duplicates, misses and runs per replica. */
export const summary = (label: string, c: ReturnType<typeof countRuns>, rows: Row[]) => {
  const per = new Map<string, number>();
  for (const r of rows) per.set(r.runner, (per.get(r.runner) ?? 0) + 1);
  console.log(
    `[cron ${label}] ${c.fires} fires: duplicates ${c.duplicates}, misses ${c.misses}; runs per replica ${JSON.stringify(Object.fromEntries(per))}`,
  );
};
