import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, fireAt, HistoryBuilder } from './fixtures.js';
import { checkCronOnce } from './s7-cron-once.js';

const check = (b: HistoryBuilder) =>
  checkCronOnce(createContext(b.lines, b.logsFromAcks(), CONFIG));

describe('S7: each cron fire runs at most once', () => {
  it('flags a fire two replicas both claimed and ran, by beliefs and by the fenced row', () => {
    const fire = fireAt(1000);
    const b = new HistoryBuilder()
      .cronClaim('w1', fire, 20, 1005)
      .cronRun('w1', 'cron-a', 20, 1006, 200, fire)
      .cronClaim('w2', fire, 21, 1007)
      .cronRun('w2', 'cron-a', 21, 1008, 200, fire);
    b.write('w1', { name: 'cron-a', token: 20, at: 1010, workload: 'cron' });
    b.write('w2', { name: 'cron-a', token: 21, at: 1020, workload: 'cron' });
    const violations = check(b);
    expect(violations.map((v) => v.kind).sort()).toEqual(['beliefs', 'fenced-row']);
    expect(violations[0]?.message).toContain('claimed 2 times: token 20 by w1, token 21 by w2');
  });

  it('flags two claims of one fire even if only one ran', () => {
    const fire = fireAt(1000);
    const b = new HistoryBuilder().cronClaim('w1', fire, 20, 1005).cronClaim('w2', fire, 21, 1007);
    expect(check(b)).toMatchObject([{ rule: 'S7', kind: 'beliefs' }]);
  });

  it('accepts one claim per fire, a run adopted on retry, and the skips of the others', () => {
    const b = new HistoryBuilder()
      .cronClaim('w1', fireAt(1000), 20, 1005)
      .cronClaim('w1', fireAt(1000), 20, 1006)
      .cronRun('w1', 'cron-a', 20, 1006, 200, fireAt(1000))
      .cronSkip('w2', fireAt(1000), 'claimed-elsewhere', 1007)
      .cronClaim('w2', fireAt(2000), 22, 2005)
      .cronRun('w2', 'cron-a', 22, 2006, 200, fireAt(2000));
    b.write('w1', { name: 'cron-a', token: 20, at: 1010, workload: 'cron' });
    b.write('w2', { name: 'cron-a', token: 22, at: 2010, workload: 'cron' });
    expect(check(b)).toEqual([]);
  });
});
