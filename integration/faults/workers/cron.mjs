// The cron workload: one replica of a scheduler whose job fires every second; the run that wins a
// fire writes to every resource with the run's token (the first round checked against the run's
// signal, the second not) and ends. A run is a hold in the history: `ok cron-run` with the token
// and fire time when it starts, `invoke`/`ok release` when it ends. The replica's wall clock can
// be skewed by the runner (`skew` command): the scheduler reads it through its `now` option.
// Claims and skips are logged (`cron-claim`, `cron-skip`) for the checker and the timeline.
import { createScheduler } from '@leasehold/cron';
import {
  clusterHasChanged,
  config,
  emit,
  deadlineOf,
  emitLost,
  finish,
  onCommand,
  nextId,
  noteClusterChange,
  pause,
  random,
  reconnect,
  start,
  stopSignal,
  trackDeadline,
  writeAll,
} from './common.mjs';

let skewMs = 0;
onCommand('skew', (msg) => {
  skewMs = msg.ms;
  emit({ type: 'info', op: 'skew', workload: config.workload, ms: skewMs });
});
const skewedNow = () => new Date(Date.now() + skewMs);
/** Each run's session, by token, for its loss line's deadline. */
const sessions = new Map();

const started = await start();
const { resources } = started;
let { client } = started;
const { workload, name } = config;
const changed = () =>
  new Promise((resolve) => {
    const timer = setInterval(() => {
      if (clusterHasChanged() || stopSignal.aborted) resolve(clearInterval(timer));
    }, 50);
  });

// One scheduler per connection: after a change of cluster the replica stops it, reconnects and
// schedules the job again.
while (!stopSignal.aborted) {
  const scheduler = await schedule(client);
  emit({ type: 'info', op: 'ready', workload, name });
  await changed();
  await scheduler.stop({ drainMs: 3_000 }).catch(() => {});
  if (!stopSignal.aborted) client = await reconnect(client);
}

async function schedule(client) {
  let scheduler;
  // Starting checks the runner's lease: on a loaded machine or a cluster between leaders that
  // can time out, which is no reason to give the replica up.
  while (!scheduler) {
    try {
      scheduler = await createScheduler(client, {
        prefix: config.cronPrefix,
        runner: config.process,
        now: skewedNow,
      });
    } catch (err) {
      emit({ type: 'info', op: 'scheduler-failed', workload, reason: String(err?.code ?? err) });
      noteClusterChange(err);
      if (clusterHasChanged() || stopSignal.aborted) throw err;
      await pause(200);
    }
  }
  scheduler.onError((event) => {
    emit({
      type: 'info',
      op: 'cron-error',
      workload,
      name,
      ...(event.fireTime && { fireTime: event.fireTime.toISOString() }),
      reason: event.error?.code ?? event.error?.name,
      message: String(event.error?.message ?? event.error),
    });
    noteClusterChange(event.error);
  });
  scheduler.onLost((event) => {
    const token = event.token.toString();
    emitLost(token, event.error, sessions.get(token));
  });
  const fire = (event) => ({ workload, name, fireTime: event.fireTime.toISOString() });
  scheduler.onClaimed((event) =>
    emit({ type: 'info', op: 'cron-claim', ...fire(event), token: event.token.toString() }),
  );
  scheduler.onSkipped((event) =>
    emit({
      type: 'info',
      op: 'cron-skip',
      ...fire(event),
      reason: event.reason,
      ...(event.holder && {
        holder: {
          runner: event.holder.runner,
          token: event.holder.token?.toString(),
          fireTime: event.holder.fireTime,
        },
      }),
    }),
  );
  scheduler.schedule(
    name,
    { everyMs: config.cron.everyMs },
    async ({ token: bigToken, signal, fireTime }) => {
      const token = bigToken.toString();
      const id = nextId();
      emit({
        type: 'invoke',
        op: 'cron-run',
        id,
        workload,
        name,
        fireTime: fireTime.toISOString(),
      });
      const session = await client.sharedSession();
      emit({
        type: 'ok',
        op: 'cron-run',
        id,
        workload,
        name,
        token,
        fireTime: fireTime.toISOString(),
        deadlineAt: deadlineOf(session),
      });
      const untrack = trackDeadline(session, token);
      sessions.set(token, session);
      try {
        const isHeld = () => !signal.aborted;
        if (await writeAll(resources, token, session, config.fenced ? isHeld : undefined)) {
          await pause(random.between([100, 300]));
          await writeAll(resources, token, session, undefined);
        }
      } finally {
        untrack();
        setTimeout(() => sessions.delete(token), 10_000).unref();
        const rid = nextId();
        emit({ type: 'invoke', op: 'release', id: rid, workload, name, token });
        emit({ type: 'ok', op: 'release', id: rid, workload, name, token });
      }
    },
    { overlap: 'skip', lateToleranceMs: config.cron.lateToleranceMs },
  );
  return scheduler;
}

await finish(client, resources);
