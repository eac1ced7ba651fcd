// The lock workload (and, with `fenced: false`, the negative control): acquire the lock, write to
// every resource, wait a while as work would, write again, release; over and over until stopped.
// The first round of writes checks the hold first; the second does not, as code that checked
// once per hold would not, so a holder paused between them sends zombie writes that only the
// resource can refuse.
import {
  clusterHasChanged,
  config,
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
  trackDeadline,
  writeAll,
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
    emit({ type: 'fail', op: 'acquire', id, workload, name, reason: reasonOf(err) });
    noteClusterChange(err);
    await pause(random.between([20, 120]));
    continue;
  }
  const token = lock.token.toString();
  emitGranted('acquire', id, token, lock);
  lock.onLost((err) => emitLost(token, err));
  const untrack = trackDeadline(
    () => lock.isHeld,
    () => lock.session.remainingMs(),
    token,
  );
  const held = () => lock.isHeld;
  if (await writeAll(resources, token, config.fenced ? held : undefined)) {
    await pause(random.between(config.holdMs));
    await writeAll(resources, token, undefined);
  }
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
