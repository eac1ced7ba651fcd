// The election workload: `lead()` the election; while leading, write to every resource with the
// term's token a few rounds (the first checked against the term's signal, the later ones not),
// then return so that `lead()` resigns and another candidate gets a term; campaign again.
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
  emit({ type: 'invoke', op: 'campaign', id, workload, name });
  let term;
  let resign;
  try {
    await client.lead(
      name,
      config.process,
      async ({ token: bigToken, signal, leadership }) => {
        const token = bigToken.toString();
        const untrack = trackDeadline(
          () => leadership.isLeader,
          () => leadership.session.remainingMs(),
          token,
        );
        try {
          const rounds = random.between([2, 3]);
          for (let round = 0; round < rounds && !stopSignal.aborted; round++) {
            const held = round === 0 ? () => !signal.aborted : undefined;
            if (!(await writeAll(resources, token, held))) break;
            await pause(random.between(config.holdMs));
          }
        } finally {
          untrack();
        }
        resign = { id: nextId(), token };
        emit({ type: 'invoke', op: 'resign', id: resign.id, workload, name, token });
      },
      {
        signal: stopSignal,
        recampaign: false,
        onElected: (leadership) => {
          term = leadership.token.toString();
          emitGranted('campaign', id, term, leadership);
          leadership.onLost((err) => emitLost(term, err));
        },
        onLost: (err) => noteClusterChange(err),
      },
    );
    if (resign)
      emit({ type: 'ok', op: 'resign', id: resign.id, workload, name, token: resign.token });
    else if (!term) emit({ type: 'fail', op: 'campaign', id, workload, name, reason: 'aborted' });
  } catch (err) {
    if (!term) emit({ type: 'fail', op: 'campaign', id, workload, name, reason: reasonOf(err) });
    else if (resign)
      emit({
        type: 'fail',
        op: 'resign',
        id: resign.id,
        workload,
        name,
        reason: reasonOf(err),
        message: String(err?.stack ?? err),
      });
    noteClusterChange(err);
    await pause(random.between([20, 120]));
  }
}
await finish(client, resources);
