import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { checkCronFires } from './cron-fires.js';
import { CONFIG, fireAt, HistoryBuilder, T0 } from './fixtures.js';

const cron = { everyMs: 1000, lateToleranceMs: 2000 };
const check = (b: HistoryBuilder) =>
  checkCronFires(createContext(b.lines, b.logsFromAcks(), { ...CONFIG, cron }));

/** Two replicas ready at 0, stopping at 12 s, that run every fire but those in `missing`. */
function replicas(missing: number[] = [], skips: [number, string][] = []): HistoryBuilder {
  const b = new HistoryBuilder().ready('w1', 0).ready('w2', 0);
  for (let fire = fireAt(1000), token = 100; fire <= fireAt(12_000); fire += 1000, token++) {
    const at = fire - T0;
    if (missing.includes(at)) continue;
    const skip = skips.find(([s]) => s === at);
    if (skip) {
      b.cronSkip('w1', fire, skip[1], at + 5);
      continue;
    }
    b.cronClaim('w1', fire, token, at + 5).cronRun('w1', 'cron-a', token, at + 6, 100, fire);
    b.cronSkip('w2', fire, 'claimed-elsewhere', at + 7);
  }
  for (const w of ['w1', 'w2']) b.line(w, 12_000, { type: 'info', op: 'stopping' });
  return b
    .line('w1', 14_500, { type: 'info', op: 'exit' })
    .line('w2', 14_500, { type: 'info', op: 'exit' });
}

describe('liveness of cron: every fire runs when a live replica was up', () => {
  const missingAt = fireAt(5000) - T0;

  it('flags a fire nobody claimed while both replicas were up and nothing went wrong', () => {
    const violations = check(replicas([missingAt]));
    expect(violations).toMatchObject([{ rule: 'liveness', kind: 'cron-fire' }]);
    expect(violations[0]?.message).toContain('w1, w2 were up for it');
  });

  it('flags a fire skipped for overlap when no run was going', () => {
    // A run that ended within two call deadlines before the skip may still have held the
    // marker (its finish, the claim that met it): only a skip with none so close counts.
    const at = (s: number) => fireAt(s) - T0;
    const near = check(replicas([], [[at(6000), 'overlap']]));
    expect(near).toEqual([]);
    const far = check(replicas([at(3000), at(4000), at(5000)], [[at(6000), 'overlap']]));
    expect(far.map((v) => v.message.slice(0, 34).trim())).toEqual(
      [3000, 4000, 5000, 6000].map((s) => `cron fire ${new Date(fireAt(s)).toISOString()}`),
    );
  });

  it('accepts every fire run, and a miss the cluster or every replica’s trouble explains', () => {
    expect(check(replicas())).toEqual([]);
    const cluster = replicas([missingAt]).fault(
      'quorum-loss',
      'cluster',
      missingAt - 500,
      missingAt + 800,
    );
    expect(check(cluster)).toEqual([]);
    // One replica frozen does not excuse the other.
    const one = replicas([missingAt]).fault('pause-holder', 'w1', missingAt - 500, missingAt + 800);
    expect(check(one)).toHaveLength(1);
    const both = one.fault('stall-loop', 'w2', missingAt - 500, missingAt + 800);
    expect(check(both)).toEqual([]);
  });
});
