/**
 * An election maker on the fakes of `clock.fake.ts`: one session (lease 255, one hour's TTL,
 * so it outlives every clock movement), a queue over the fake watch of `E/`.
 */
import { fakeClock, flush } from './clock.fake.js';
import { fakeEtcd, fakeWatch } from './etcd.fake.js';
import type { ElectionMaker } from './election.js';
import { Observer } from './observe.js';
import { Queue } from './queue.js';
import { Session } from './session.js';

/** The key of lease 255's candidacy in the election `e`. */
export const CANDIDATE_KEY = 'E/e/ff';

export async function fakeElections() {
  const clock = fakeClock();
  const fake = fakeEtcd();
  const session = await Session.create(fake.etcd, clock, () => {}, {
    ttlSeconds: 3_600,
    safetyMarginMs: 0,
  });
  await flush();
  const watch = fakeWatch('E/');
  const elections = new Queue(
    fake.etcd,
    watch.watch,
    clock,
    () => {},
    'election',
    () => session,
  );
  const closed = new AbortController().signal;
  const maker: ElectionMaker = {
    elections,
    clock,
    closed,
    sharedSession: async () => session,
    observeSegment: (segment, signal) => Observer.start(elections, segment, { signal }, closed),
  };
  return { clock, session, watch, maker, ...fake };
}
