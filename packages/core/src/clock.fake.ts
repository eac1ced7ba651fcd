/**
 * Test doubles for timing maths: a clock that moves only when told to, and a scripted etcd
 * surface for the session's lease calls. Real etcd behaviour is tested in integration/.
 */
import { EventEmitter } from 'node:events';
import type { Clock } from './clock.js';
import { EtcdUnavailableError } from './errors.js';
import type { Etcd } from './etcd.js';

export interface FakeClock extends Clock {
  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void;
  /** Moves time forward without firing anything: an event loop that was stalled. */
  stall(ms: number): void;
  readonly pending: number;
}

export function fakeClock(start = 1_000): FakeClock {
  let now = start;
  let next = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  const fireDue = (until: number) => {
    for (;;) {
      const due = [...timers.entries()]
        .filter(([, t]) => t.at <= until)
        .sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!due) return;
      timers.delete(due[0]);
      now = Math.max(now, due[1].at);
      due[1].fn();
    }
  };
  return {
    now: () => now,
    setTimeout: (fn, delayMs) => {
      timers.set(++next, { at: now + Math.max(0, delayMs), fn });
      return next;
    },
    clearTimeout: (handle) => void timers.delete(handle as number),
    advance(ms) {
      const target = now + ms;
      fireDue(target);
      now = target;
    },
    stall(ms) {
      now += ms;
    },
    get pending() {
      return timers.size;
    },
  };
}

/** A keepalive stream whose answers the test sends. */
export class FakeStream extends EventEmitter {
  readonly written: unknown[] = [];
  ended = false;
  cancelled = false;
  write(item: unknown): void {
    this.written.push(item);
  }
  end(): void {
    this.ended = true;
  }
  cancel(): void {
    this.cancelled = true;
  }
  /** etcd's answer to the oldest unanswered keepalive. */
  answer(ttlSeconds: number): void {
    this.emit('data', { TTL: String(ttlSeconds), header: { revision: '1', cluster_id: '1' } });
  }
}

/** The slice of `Etcd` a session uses, scripted. */
export function fakeEtcd(options: { grantTtl?: number } = {}) {
  const streams: FakeStream[] = [];
  const revokes: string[] = [];
  const state = { answers: 0, revokeFailures: 0, leaseGone: false };
  const header = { revision: '1', cluster_id: '1', member_id: '1', raft_term: '1' };
  const etcd = {
    options: { callTimeoutMs: 1_000, endpoints: ['http://fake:1'] },
    get answers() {
      return state.answers;
    },
    call: async <T>(_what: string, run: (o: { deadline: number }) => Promise<T>) =>
      run({ deadline: 0 }),
    observe: () => {},
    onChanged: () => ({ [Symbol.dispose]: () => {} }),
    stream: async <S>(open: (client: unknown) => Promise<S>) => open(etcd.client),
    client: {
      leaseClient: {
        leaseGrant: async ({ TTL }: { TTL: number }) => ({
          ID: '255',
          TTL: String(options.grantTtl ?? TTL),
          header,
        }),
        leaseRevoke: async ({ ID }: { ID: string }) => {
          revokes.push(ID);
          if (state.revokeFailures-- > 0) throw new EtcdUnavailableError('etcd is down (fake)');
          if (state.leaseGone) throw new Error('etcdserver: requested lease not found');
          return { header };
        },
        leaseKeepAlive: async () => {
          const stream = new FakeStream();
          streams.push(stream);
          return stream;
        },
      },
    },
  };
  return { etcd: etcd as unknown as Etcd, streams, revokes, state };
}

/** Lets pending promise callbacks run. */
export const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
