// The election workload: `lead()` the election; while leading, write to every resource with the
// term's token in rounds for a short or a long term (see `holdRounds`), proclaim a new value once,
// then return so that `lead()` resigns and another candidate gets a term; campaign again.
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
let termPlan;

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
        const untrack = trackDeadline(leadership.session, token);
        try {
          const plan = termPlan;
          const proclaiming = holdRounds(
            resources,
            token,
            leadership.session,
            () => leadership.isLeader,
            plan,
            signal,
          );
          await proclaim(leadership, token, signal);
          await proclaiming;
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
          termPlan = planHold();
          emitGranted('campaign', id, term, leadership, termPlan);
          const mine = term;
          leadership.onLost((err) => emitLost(mine, err, leadership.session));
        },
        onLost: (err) => noteClusterChange(err),
      },
    );
    if (resign)
      emit({ type: 'ok', op: 'resign', id: resign.id, workload, name, token: resign.token });
    else if (!term) emit({ type: 'fail', op: 'campaign', id, workload, name, reason: 'aborted' });
  } catch (err) {
    if (!term)
      emit({
        type: 'fail',
        op: 'campaign',
        id,
        workload,
        name,
        reason: reasonOf(err),
        detail: detailOf(err),
      });
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

/**
 * Once per term, a while after it starts, the leader proclaims a new value (a guarded put to its
 * own key): its key's mod revision moves on while its create revision, the token, stays.
 */
async function proclaim(leadership, token, signal) {
  await pause(random.between(config.roundGapMs), signal);
  if (signal.aborted || stopSignal.aborted) return;
  const pid = nextId();
  emit({ type: 'invoke', op: 'proclaim', id: pid, workload, name, token });
  try {
    await leadership.proclaim(`${config.process}:${token}:proclaimed`);
    emit({ type: 'ok', op: 'proclaim', id: pid, workload, name, token });
  } catch (err) {
    emit({ type: 'fail', op: 'proclaim', id: pid, workload, name, token, reason: reasonOf(err) });
  }
}
