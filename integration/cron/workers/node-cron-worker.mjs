// A node-cron 4 instance whose `distributed: true` task is coordinated by leasehold's claims.
// Each fire the task runs writes one row, fenced by its claim's token, through
// @leasehold/fence's withFence. Exits cleanly when stdin ends.
//
//   ETCD_ENDPOINTS=... CRON_PREFIX=... NAME=a TASK=t PG_URL=... FENCE_TABLE=... RUNS_TABLE=... \
//   [TRACK=1] [FAIL_EVERY=N] node node-cron-worker.mjs
//
// TRACK=1: the coordinator tracks the task (coordinator.track), so records say how each run
// ended. FAIL_EVERY=N: the run of a fire whose second is a multiple of N throws, after its row.
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';
import { leaseholdRunCoordinator } from '@leasehold/cron';
import { withFence } from '@leasehold/fence/postgres';
import cron from 'node-cron';
import pg from 'pg';

const env = process.env;
const name = env.NAME;
const send = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

const client = await connect({
  endpoints: env.ETCD_ENDPOINTS.split(','),
  session: { ttlSeconds: 3 },
});
const pool = new pg.Pool({ connectionString: env.PG_URL, max: 2 });
const coordinator = leaseholdRunCoordinator(client, { prefix: env.CRON_PREFIX, runner: name });
coordinator.onError((e) => send({ event: 'error', message: e.error.message }));
// Runs and record writes still going, so that a clean exit waits for them.
const pending = new Set();
const track = (promise) => {
  pending.add(promise);
  void promise.finally(() => pending.delete(promise)).catch(() => {});
  return promise;
};
const tracked = {
  shouldRun: (key, ttlMs) => coordinator.shouldRun(key, ttlMs),
  onComplete: (key) => track(coordinator.onComplete(key)),
};

const task = cron.schedule('* * * * * *', (ctx) => track(run(ctx)), {
  name: env.TASK,
  distributed: true,
  runCoordinator: tracked,
});

async function run(ctx) {
  const claim = coordinator.claimOf(env.TASK, ctx.date);
  if (!claim) return send({ event: 'no-claim', fire: ctx.date.toISOString() });
  const fire = ctx.date.toISOString();
  await withFence(
    pool,
    { resource: `${env.TASK}@${fire}`, token: claim.token, table: env.FENCE_TABLE },
    (tx) =>
      tx.query(
        `INSERT INTO "${env.RUNS_TABLE}" (job, fire, token, runner, attempt, start_ms) VALUES ($1, $2, $3::int8, $4, 'node-cron', $5)`,
        [env.TASK, fire, claim.token.toString(), name, Date.now()],
      ),
  );
  send({ event: 'ran', fire, token: claim.token.toString() });
  const failEvery = Number(env.FAIL_EVERY ?? 0);
  if (failEvery > 0 && ctx.date.getUTCSeconds() % failEvery === 0) {
    throw new Error(`planned failure of ${fire}`);
  }
}
if (env.TRACK === '1') coordinator.track(task);
task.on('execution:skipped', (ctx) =>
  send({ event: 'skipped', fire: ctx.date.toISOString(), reason: ctx.reason }),
);

send({ ready: true, pid: process.pid });
for await (const _ of createInterface({ input: process.stdin })) {
  // stdin is only for the end signal
}
await task.stop();
await task.destroy();
while (pending.size > 0) await Promise.allSettled([...pending]);
await client.close();
await pool.end();
process.exit(0);
