import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG, HistoryBuilder, simulate } from './fixtures.js';
import { checkRun, writeRunArtifacts } from './index.js';

describe('checkRun', () => {
  it('passes a fenced run with a paused holder and reports what happened', () => {
    const { history, logs } = simulate({ rounds: 30, pauseRounds: [5, 17], partitionRounds: [9] });
    const config = { ...CONFIG, faults: ['pause-holder', 'partition'] };
    const { violations, summary, report } = checkRun({ history, logs, config });
    expect(violations).toEqual([]);
    expect(report.zombies).toMatchObject({ attempted: 4, rejected: 2, prevented: 2, accepted: 0 });
    expect(report.faults.byKind).toEqual({ 'pause-holder': 2, partition: 1 });
    expect(report.latency.takeover).toMatchObject({
      count: 2,
      p50Ms: 2000,
      maxMs: 2000,
      boundMs: 3000,
    });
    // One sample per workload asking (lock and cron); cron's is reported, not judged.
    expect(report.latency.recovery).toMatchObject({ count: 2, boundMs: 1000 });
    expect(summary).toBe(
      'faults seed=42: ops 166 ok / 2 stale / 2 lost / 0 unknown / 0 failed; ' +
        'faults partition×1 pause-holder×2; ' +
        'violations 0 (S1 0 S2 0 S3 0 S4 0 S5 0 S6 0 S7 0 S8 0 liveness 0 coverage 0); ' +
        'zombie writes 4 attempted, 2 rejected, 2 prevented, 0 accepted, 0 landed before a newer write; ' +
        'takeover p50 2.0 s max 2.0 s (bound 3.0 s); recovery p50 0.1 s max 0.1 s (bound 1.0 s)',
    );
    expect(report.summary).toBe(summary);
  });

  it('catches the same run without fencing (the negative control)', () => {
    const { history, logs } = simulate({ rounds: 30, pauseRounds: [5], fencing: false });
    const { violations, summary, report } = checkRun({
      history,
      logs,
      config: { ...CONFIG, fencing: false, faults: ['pause-holder'] },
    });
    expect(new Set(violations.map((v) => v.rule))).toEqual(new Set(['S1', 'S2']));
    expect(report.zombies).toMatchObject({ attempted: 2, accepted: 2 });
    expect(summary).toMatch(
      /^faults seed=42 fencing=off: .*violations 4 \(S1 2 S2 2 S3 0 S4 0 S5 0 S6 0 S7 0 S8 0 liveness 0 coverage 0\).* 2 accepted/,
    );
  });

  it('sorts violations by time and counts an unanswered operation as unknown', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 9, 0);
    const missing = b.write('w1', { token: 9, at: 2, resource: 'redis' });
    b.write('w1', { token: 9, at: 10 });
    b.write('w2', { token: 3, at: 30 });
    b.write('w1', { token: 9, at: 40, outcome: 'none' });
    const logs = b.logsFromAcks();
    logs.redis = logs.redis?.filter((e) => e.writeId !== missing) ?? [];
    const { violations, report } = checkRun({ history: b.lines, logs, config: CONFIG });
    expect(violations.map((v) => v.rule)).toEqual(['S3', 'S1']);
    expect(report.operations).toMatchObject({ ok: 4, unknown: 1, total: 5 });
  });

  it('writes report.json, timeline.html and summary.txt', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'faults-run-'));
    try {
      const { history, logs } = simulate({ rounds: 5, pauseRounds: [2] });
      const config = { ...CONFIG, faults: ['pause-holder', 'kill-leader'] };
      const result = checkRun({ history, logs, config });
      const paths = await writeRunArtifacts(dir, { history, logs, result, config });
      const report = JSON.parse(await readFile(paths.report, 'utf8')) as Record<string, unknown>;
      expect(report).toMatchObject({
        seed: 42,
        summary: result.summary,
        faults: { notInjected: ['kill-leader'] },
      });
      // A kind the run listed and never got in is a violation of its own.
      expect(result.violations.filter((v) => v.rule === 'coverage')).toHaveLength(1);
      expect(await readFile(paths.summary, 'utf8')).toBe(`${result.summary}\n`);
      expect(await readFile(paths.timeline, 'utf8')).toContain('<svg');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
