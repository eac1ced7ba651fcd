// One replica of a service that runs a scheduled job: every replica schedules it, and each fire
// runs on exactly one of them. The job writes one row per fire into PostgreSQL, fenced by the
// run's token, so a replica that lost its claim without knowing it (paused, cut off) cannot
// overwrite what a later run wrote. run.mjs starts three of these.
//
//   DATABASE_URL=postgres://... ETCD_ENDPOINTS=http://127.0.0.1:2379 node replica.mjs <name>
import { connect } from '@leasehold/core';
import { createScheduler } from '@leasehold/cron';
import { isStaleTokenError } from '@leasehold/fence';
import { postgresStore, postgresStoreDDL } from '@leasehold/fence/postgres';
import pg from 'pg';

const [name = 'a'] = process.argv.slice(2);
const log = (line) => console.log(`[${name}] ${line}`);

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
const valueTable = process.env.VALUE_TABLE ?? 'cron_replicas_runs';
// In a real service this is a migration; IF NOT EXISTS makes it safe for three replicas at once.
for (const ddl of postgresStoreDDL({ valueTable })) {
  await pool.query(ddl).catch((err) => {
    if (err.code !== '23505' && err.code !== '42P07') throw err; // created by another replica
  });
}
const store = postgresStore(pool, { valueTable });

const client = await connect({ endpoints: process.env.ETCD_ENDPOINTS ?? 'http://127.0.0.1:2379' });
const scheduler = await createScheduler(client, {
  prefix: process.env.CRON_PREFIX ?? '/leasehold/cron/',
  runner: name,
});

scheduler.onSkipped(({ fireTime, reason, holder }) =>
  log(`skipped ${fireTime.toISOString()}: ${reason}${holder?.runner ? ` (${holder.runner})` : ''}`),
);
scheduler.onFinished(({ fireTime, outcome, durationMs }) =>
  log(`finished ${fireTime.toISOString()}: ${outcome} in ${Math.round(durationMs)} ms`),
);

/**
 * The job. `fireTime` names the fire (the same on every replica, whatever its clock says);
 * `token` is the claim's fencing token: every write carries it.
 * @param {import('@leasehold/cron').RunContext} run
 */
async function report({ token, fireTime, signal }) {
  const fire = fireTime.toISOString();
  log(`ran ${fire} with token ${token}`);
  if (signal.aborted) return; // the lease was lost, or we are shutting down
  try {
    await store.write({ resource: `report ${fire}`, token, value: `written by ${name}` });
  } catch (err) {
    if (!isStaleTokenError(err)) throw err;
    log(`fenced off: ${err.message}`);
  }
}

scheduler.schedule('report', '* * * * * *', report, { maxRunMs: 10_000 });
log(
  `scheduled "report"; next fire ${scheduler.next('report')?.toISOString()} (pid ${process.pid})`,
);

// SIGTERM: stop claiming, let a running report finish (at most 5 s), then leave.
const stop = async () => {
  await scheduler.stop({ drainMs: 5_000 });
  await client.close();
  await pool.end();
  log('stopped');
};
for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => void stop());
