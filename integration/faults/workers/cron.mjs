// The cron workload: one replica of a scheduler whose job fires every second; the run that wins a
// fire writes to every resource with the run's token (the first round checked against the run's
// signal, the second not) and ends. A run is a hold in the history: `ok cron-run` with the token
// when it starts, `invoke`/`ok release` when it ends.
import { createScheduler } from '@leasehold/cron';
import {
  clusterHasChanged,
  config,
  emit,
  emitLost,
  finish,
  nextId,
  noteClusterChange,
  now,
  pause,
  random,
  reconnect,
  start,
  stopSignal,
  trackDeadline,
  writeAll,
} from './common.mjs';

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
      });
    } catch (err) {
      emit({ type: 'info', op: 'scheduler-failed', workload, reason: String(err?.code ?? err) });
      noteClusterChange(err);
      if (clusterHasChanged() || stopSignal.aborted) throw err;
      await pause(200);
    }
  }
  scheduler.onError((event) => noteClusterChange(event.error));
  scheduler.onLost((event) => emitLost(event.token.toString(), event.error));
  scheduler.schedule(
    name,
    { everyMs: 1_000 },
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
        deadlineAt: now() + session.remainingMs(),
      });
      const untrack = trackDeadline(
        () => !signal.aborted,
        () => session.remainingMs(),
        token,
      );
      try {
        if (await writeAll(resources, token, config.fenced ? () => !signal.aborted : undefined)) {
          await pause(random.between([100, 300]));
          await writeAll(resources, token, undefined);
        }
      } finally {
        untrack();
        const rid = nextId();
        emit({ type: 'invoke', op: 'release', id: rid, workload, name, token });
        emit({ type: 'ok', op: 'release', id: rid, workload, name, token });
      }
    },
    { overlap: 'skip', lateToleranceMs: 2_000 },
  );
  return scheduler;
}

await finish(client, resources);
