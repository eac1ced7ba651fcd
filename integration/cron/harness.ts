/**
 * What the @leasehold/cron process tests share: worker processes driven over stdio, a PostgreSQL
 * schema where every run writes one fenced row, and the counts (duplicates, misses) read back
 * from that table.
 */
import { fileURLToPath } from 'node:url';
import { fenceTableDDL } from '@leasehold/fence/postgres';
import { beforeAll } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { ownSchema } from '../fence/stores.js';

export const replicaScript = fileURLToPath(new URL('./workers/replica.mjs', import.meta.url));
export const nodeCronScript = fileURLToPath(
  new URL('./workers/node-cron-worker.mjs', import.meta.url),
);

export { WorkerProcess as Proc, type Msg } from '../setup/worker-process.js';

export interface Row {
  job: string;
  fire: string;
  token: bigint;
  runner: string;
  attempt: string;
  start: number;
  end: number | undefined;
}

/** A schema of the suite's own with the fence table and the runs table, created before its tests. */
export function runsSchema(url: string, label: string) {
  const schema = ownSchema(url, label);
  const FENCE_TABLE = 'cron_fence';
  const RUNS_TABLE = 'cron_runs';
  beforeAll(async () => {
    const db = schema.admin();
    await db.query(fenceTableDDL({ table: `${schema.name}.${FENCE_TABLE}` }));
    await db.query(
      `CREATE TABLE "${schema.name}"."${RUNS_TABLE}" (id bigserial PRIMARY KEY, job text NOT NULL, fire text NOT NULL, token int8 NOT NULL, runner text NOT NULL, attempt text NOT NULL, start_ms int8 NOT NULL, end_ms int8)`,
    );
  });
  return {
    env: (): Record<string, string> => ({ PG_URL: schema.url, FENCE_TABLE, RUNS_TABLE }),
    /** Every run of `job` recorded, in fire order. */
    async rows(job: string): Promise<Row[]> {
      const { rows } = await schema.admin().query<{
        job: string;
        fire: string;
        token: string;
        runner: string;
        attempt: string;
        start_ms: string;
        end_ms: string | null;
      }>(`SELECT job, fire, token::text AS token, runner, attempt, start_ms::text AS start_ms, end_ms::text AS end_ms FROM "${schema.name}"."${RUNS_TABLE}" WHERE job = $1 ORDER BY fire, id`, [job]);
      return rows.map((r) => ({
        job: r.job,
        fire: r.fire,
        token: BigInt(r.token),
        runner: r.runner,
        attempt: r.attempt,
        start: Number(r.start_ms),
        end: r.end_ms === null ? undefined : Number(r.end_ms),
      }));
    },
  };
}

/**
 * Duplicates (runs beyond the first of a fire) and misses (fires between the first and the last
 * fire run, every `periodMs`, that have no run and are not in `accounted`: fires a killed or
 * paused runner had claimed) of a job, from its rows.
 */
export function countRuns(rows: Row[], periodMs: number, accounted: Set<string> = new Set()) {
  const byFire = new Map<string, Row[]>();
  for (const row of rows) byFire.set(row.fire, [...(byFire.get(row.fire) ?? []), row]);
  const fires = [...byFire.keys()].sort();
  const duplicates = rows.length - byFire.size;
  const missing: string[] = [];
  if (fires.length > 0) {
    const first = Date.parse(fires[0]!);
    const last = Date.parse(fires[fires.length - 1]!);
    for (let t = first; t <= last; t += periodMs) {
      const id = new Date(t).toISOString();
      if (!byFire.has(id) && !accounted.has(id)) missing.push(id);
    }
  }
  return { fires: byFire.size, duplicates, misses: missing.length, missing, byFire };
}

/** Waits until `job` has runs of at least `n` distinct fires in the table. */
export async function waitForFires(
  rows: () => Promise<Row[]>,
  n: number,
  what: string,
  timeoutMs = 60_000,
): Promise<Row[]> {
  return waitFor(
    async () => {
      const all = await rows();
      return new Set(all.map((r) => r.fire)).size >= n ? all : undefined;
    },
    { timeoutMs, intervalMs: 200, what },
  );
}

/** Replicas' environment for the run's etcd and a test's own prefix. */
export const replicaEnv = (endpoints: string[], prefix: string, extra: Record<string, string>) => ({
  ETCD_ENDPOINTS: endpoints.join(','),
  CRON_PREFIX: prefix,
  ...extra,
});
