// One replica of a service that schedules jobs with @leasehold/cron, for tests that kill, pause,
// skew and stop replicas. Driven by JSON lines on stdin ({ seq, cmd, ...args }); each answer is a
// line with the same seq. Scheduler events are lines of their own ({ event, ... }).
//
//   ETCD_ENDPOINTS=... CRON_PREFIX=... NAME=a OFFSET_MS=0 TTL_SECONDS=3 [MAX_CLOCK_SKEW_MS=...] \
//   PG_URL=... FENCE_TABLE=... RUNS_TABLE=... node replica.mjs
//
// Each run writes one row into $RUNS_TABLE through @leasehold/fence's withFence, fenced by the
// run's token on the resource '<job>@<fire time>'; then it works for `runMs` and stamps the
// row's end. OFFSET_MS skews this replica's wall clock (the scheduler's `now` option).
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from '@leasehold/core';
import { createScheduler } from '@leasehold/cron';
import { isStaleTokenError } from '@leasehold/fence';
import { withFence } from '@leasehold/fence/postgres';
import pg from 'pg';

const env = process.env;
const name = env.NAME ?? 'replica';
const offsetMs = Number(env.OFFSET_MS ?? 0);
const send = (msg) =>
  process.stdout.write(`${JSON.stringify(msg, (_, v) => (typeof v === 'bigint' ? `${v}` : v))}\n`);
const errorOf = (err) => (err ? { error: err.name, message: err.message } : {});

const client = await connect({
  endpoints: env.ETCD_ENDPOINTS.split(','),
  session: { ttlSeconds: Number(env.TTL_SECONDS ?? 3) },
});
const pool = new pg.Pool({ connectionString: env.PG_URL, max: 4 });
const scheduler = await createScheduler(client, {
  prefix: env.CRON_PREFIX,
  runner: name,
  now: () => new Date(Date.now() + offsetMs),
  ...(env.MAX_CLOCK_SKEW_MS ? { maxClockSkewMs: Number(env.MAX_CLOCK_SKEW_MS) } : {}),
});

const at = () => Date.now();
const fire = (e) => ({ job: e.job, fire: e.fireTime.toISOString(), at: at() });
scheduler.onClaimed((e) =>
  send({ event: 'claimed', ...fire(e), token: e.token, attempt: e.attempt }),
);
scheduler.onSkipped((e) =>
  send({ event: 'skipped', ...fire(e), reason: e.reason, holder: e.holder?.runner }),
);
scheduler.onStarted((e) =>
  send({ event: 'started', ...fire(e), token: e.token, attempt: e.attempt }),
);
scheduler.onFinished((e) =>
  send({
    event: 'finished',
    ...fire(e),
    token: e.token,
    outcome: e.outcome,
    durationMs: Math.round(e.durationMs),
    ...errorOf(e.error),
  }),
);
scheduler.onLost((e) => send({ event: 'lost', ...fire(e), token: e.token, ...errorOf(e.error) }));
scheduler.onError((e) => send({ event: 'error', job: e.job, ...errorOf(e.error) }));

function job({ runMs = 0, honorSignal = true }) {
  return async ({ token, signal, fireTime, job, attempt }) => {
    const fireIso = fireTime.toISOString();
    const startMs = at();
    try {
      await withFence(
        pool,
        { resource: `${job}@${fireIso}`, token, table: env.FENCE_TABLE },
        (tx) =>
          tx.query(
            `INSERT INTO "${env.RUNS_TABLE}" (job, fire, token, runner, attempt, start_ms) VALUES ($1, $2, $3::int8, $4, $5, $6)`,
            [job, fireIso, token.toString(), name, attempt, startMs],
          ),
      );
      send({ event: 'wrote', job, fire: fireIso, token, at: at() });
    } catch (err) {
      send({
        event: 'write-failed',
        job,
        fire: fireIso,
        stale: isStaleTokenError(err),
        ...errorOf(err),
      });
      throw err;
    }
    if (runMs > 0) await sleep(runMs, undefined, honorSignal ? { signal } : {}).catch(() => {});
    await pool.query(
      `UPDATE "${env.RUNS_TABLE}" SET end_ms = $1 WHERE job = $2 AND fire = $3 AND token = $4::int8`,
      [at(), job, fireIso, token.toString()],
    );
  };
}

let stopping;
async function stop(drainMs = 10_000) {
  stopping ??= (async () => {
    await scheduler.stop({ drainMs });
    await client.close();
    await pool.end();
    send({ event: 'stopped', at: at() });
  })();
  return stopping;
}

/** This replica's wall clock: the scheduler's `now`. */
const clock = () => Date.now() + offsetMs;

const handlers = {
  // `atPhaseMs` of `periodMs`: wait until this replica's clock is that far into a period, so that
  // the IPC round trip does not decide when it starts. `before`/`after`: its clock around the
  // schedule() call, which plans the start-up claims: what a test derives its expectations from.
  // `stopSelf`: right after answering, the replica stops itself (SIGSTOP), a stall between
  // planning its start-up claims and sending them (with a start jitter, they wait a timer).
  async schedule({
    job: jobName,
    schedule,
    options,
    runMs,
    honorSignal,
    atPhaseMs,
    periodMs,
    stopSelf,
  }) {
    if (atPhaseMs !== undefined) {
      await sleep((atPhaseMs - (clock() % periodMs) + periodMs) % periodMs);
    }
    const before = clock();
    scheduler.schedule(jobName, schedule, job({ runMs, honorSignal }), options);
    const after = clock();
    if (stopSelf) setImmediate(() => process.kill(process.pid, 'SIGSTOP'));
    return { next: scheduler.next(jobName)?.toISOString(), before, after };
  },
  async stop({ drainMs }) {
    await stop(drainMs);
    return {};
  },
};

process.on('SIGTERM', () => void stop().then(() => process.exit(0)));
send({ ready: true, pid: process.pid });
for await (const line of createInterface({ input: process.stdin })) {
  const { seq, cmd, ...args } = JSON.parse(line);
  handlers[cmd](args).then(
    (answer) => send({ seq, ...answer }),
    (err) => send({ seq, failed: true, ...errorOf(err) }),
  );
}
await stop();
process.exit(0);
