import { describe, expect, it } from 'vitest';
import { Leasehold } from './client.js';
import { fakeClock, flush } from './clock.fake.js';
import { fakeEtcd } from './etcd.fake.js';
import { StallMonitor, type StallEvent } from './stall.js';

describe('StallMonitor', () => {
  function monitor(thresholdMs = 500) {
    const clock = fakeClock();
    const live = ['a'];
    const stalls: [number, string[]][] = [];
    const m = new StallMonitor(
      clock,
      thresholdMs,
      100,
      () => live,
      (ms, before) => {
        stalls.push([ms, before]);
      },
    );
    return { clock, live, stalls, m };
  }

  it('reports a blocked loop as its timer lateness, with what was live before the stall', () => {
    const { clock, live, stalls, m } = monitor();
    m.start();
    clock.advance(1_000); // ticking on time: nothing to report
    expect(stalls).toEqual([]);
    clock.stall(1_600); // the loop is blocked: no timer runs
    live.length = 0; // (what ended during the stall is still reported)
    clock.advance(0);
    expect(stalls).toEqual([[1_500, ['a']]]); // due 100 ms into the stall, ran 1500 ms late
  });

  it('idles on the first tick that finds nothing to watch, and start() resumes it', () => {
    const { clock, live, stalls, m } = monitor();
    m.start();
    live.length = 0;
    clock.advance(100); // this tick finds nothing live
    expect(m.running).toBe(false);
    expect(clock.pending).toBe(0);
    clock.stall(2_000);
    clock.advance(0);
    expect(stalls).toEqual([]);
    live.push('b');
    m.start();
    clock.stall(1_000);
    clock.advance(0);
    expect(stalls).toEqual([[900, ['b']]]);
  });

  it('ignores lateness below the threshold, and stops when told', () => {
    const { clock, stalls, m } = monitor(500);
    m.start();
    m.start(); // idempotent: one timer
    clock.stall(550); // 450 ms late
    clock.advance(0);
    expect(stalls).toEqual([]);
    expect(clock.pending).toBe(1);
    m.stop();
    expect(m.running).toBe(false);
    expect(clock.pending).toBe(0);
    clock.stall(5_000);
    clock.advance(0);
    expect(stalls).toEqual([]);
  });
});

describe('client.onStall', () => {
  async function setup() {
    const clock = fakeClock();
    const fake = fakeEtcd();
    const prefixes = { lockPrefix: 'L/', electionPrefix: 'E/' };
    const client = new Leasehold(fake.etcd, clock, prefixes, 5_000, {}, 500);
    const session = await client.session({ ttlSeconds: 10, safetyMarginMs: 0 });
    await flush();
    const events: StallEvent[] = [];
    client.onStall((event) => events.push(event));
    return { clock, client, session, events };
  }

  it('reports a stall with the lease and the time left on it right after', async () => {
    const { clock, session, events } = await setup();
    clock.stall(1_200);
    const left = session.timeLeftMs();
    clock.advance(0);
    expect(events).toEqual([
      { stalledMs: 1_100, leaseId: session.leaseId, remainingMs: left, lost: false },
    ]);
  });

  it('a stall past the deadline is reported with lost: true and 0 left, whichever timer runs first', async () => {
    const { clock, session, events } = await setup();
    clock.stall(10_500);
    clock.advance(0);
    expect(events).toEqual([
      { stalledMs: 10_400, leaseId: session.leaseId, remainingMs: 0, lost: true },
    ]);
    expect(session.isLost).toBe(true);
  });

  it('a session the first read after the stall found lost is still reported by the late tick', async () => {
    const { clock, session, events } = await setup();
    clock.stall(10_500);
    expect(session.timeLeftMs()).toBe(0); // this read ends the session before any timer runs
    clock.advance(0);
    expect(events).toEqual([
      { stalledMs: 10_400, leaseId: session.leaseId, remainingMs: 0, lost: true },
    ]);
  });

  it('reports no session closed before the stall, and idles once none is live', async () => {
    const { clock, session, events } = await setup();
    await session.close();
    clock.stall(5_000); // the monitor last looked while the session was live
    clock.advance(0);
    expect(events).toEqual([]);
    expect(clock.pending).toBe(0);
  });
});
