// The lock workload (and, with `fenced: false`, the negative control): acquire the lock, write to
// every resource in rounds for a short hold or one of several TTLs (see `holdRounds`: the even
// rounds read the hold first, the odd ones do not), release; over and over until stopped. The
// hold ends early when its loss signal fires or a read says it is lost.
import {
  clusterHasChanged,
  config,
  detailOf,
  emit,
  emitGranted,
  emitLost,
  finish,
  nextId,
  noteClusterChange,
  pause,
  random,
  reasonOf,
  reconnect,
  start,
  stopSignal,
  holdRounds,
  planHold,
  trackDeadline,
} from './common.mjs';

const started = await start();
const { resources } = started;
let { client } = started;
const { workload, name } = config;
emit({ type: 'info', op: 'ready', workload, name });

while (!stopSignal.aborted) {
  if (clusterHasChanged()) client = await reconnect(client);
  const id = nextId();
  const timeoutMs = random.between(config.acquireTimeoutMs);
  emit({ type: 'invoke', op: 'acquire', id, workload, name, timeoutMs });
  let lock;
  try {
    lock = await client.acquire(name, { timeoutMs, signal: stopSignal });
  } catch (err) {
    emit({
      type: 'fail',
      op: 'acquire',
      id,
      workload,
      name,
      reason: reasonOf(err),
      detail: detailOf(err),
    });
    noteClusterChange(err);
    await pause(random.between([20, 120]));
    continue;
  }
  const token = lock.token.toString();
  const plan = planHold();
  emitGranted('acquire', id, token, lock, plan);
  const ended = new AbortController();
  lock.onLost((err) => {
    emitLost(token, err, lock.session);
    ended.abort();
  });
  const untrack = trackDeadline(lock.session, token);
  await holdRounds(resources, token, lock.session, () => lock.isHeld, plan, ended.signal);
  untrack();
  const rid = nextId();
  emit({ type: 'invoke', op: 'release', id: rid, workload, name, token });
  try {
    await lock.release();
    emit({ type: 'ok', op: 'release', id: rid, workload, name, token });
  } catch (err) {
    emit({
      type: 'fail',
      op: 'release',
      id: rid,
      workload,
      name,
      token,
      reason: reasonOf(err),
      message: String(err?.stack ?? err),
    });
  }
}
await finish(client, resources);
