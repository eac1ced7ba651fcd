import { describe, expect, it } from 'vitest';
import { CONFIG, fireAt, HistoryBuilder, simulate } from './fixtures.js';
import { checkRun } from './index.js';
import { pageSize, renderTimeline } from './timeline.js';

describe('renderTimeline', () => {
  const { history, logs } = simulate({
    rounds: 12,
    pauseRounds: [4],
    partitionRounds: [7],
    fencing: false,
  });
  const result = checkRun({
    history,
    logs,
    config: { ...CONFIG, fencing: false, faults: ['pause-holder'] },
  });
  const html = renderTimeline(history, logs, result);

  it('is one self-contained page: no network assets', () => {
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).not.toMatch(/\s(src|href)\s*=/i);
    expect(html).not.toMatch(/@import|url\(/i);
    expect(
      html.match(/https?:\/\/[^"'\s]*/g)?.every((u) => u === 'http://www.w3.org/2000/svg'),
    ).toBe(true);
  });

  it('has the summary, a row per worker labelled with its workload, bars, faults, violations', () => {
    expect(html).toContain(result.summary.replace(/&/g, '&amp;'));
    for (const lane of ['w1', 'w2', 'w3'])
      expect(html).toContain(`<span class="wl lock">lock</span> ${lane}</div>`);
    expect(html).toContain('<span class="wl cron">cron</span> w4</div>');
    expect(html).not.toContain('nemesis</div>');
    const holds = html.match(/<rect class="hold lock"[^>]*fill="hsl\(\d+,65%,\d+%\)"/g) ?? [];
    expect(holds.length).toBe(13);
    expect(new Set(holds.map((h) => /fill="([^"]+)"/.exec(h)?.[1])).size).toBeGreaterThan(10);
    expect(html).toContain('<text x="2" y="0">pause-holder w');
    expect(html).toContain('<text x="2" y="0">partition w');
    expect(html).toContain('class="mark write ok"');
    expect((html.match(/class="mark violation"/g) ?? []).length).toBe(result.violations.length);
    expect(result.violations.length).toBeGreaterThan(0);
    expect(html).toContain('class="mark lost-signal"');
    expect(html).toContain('class="hold cron"');
  });

  it('draws a fault on its target’s row only, and one on the cluster across every row', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0)
      .acquire('w2', 'L', 6, 100)
      .fault('partition', 'w2', 200, 900)
      .fault('quorum-loss', 'cluster', 1000, 1500);
    b.line('w1', 2000, { type: 'info', op: 'exit' });
    const page = renderTimeline(
      b.lines,
      {},
      checkRun({ history: b.lines, logs: {}, config: CONFIG }),
    );
    const faults = page.match(/<rect class="fault(?: wide)?"[^>]*>/g) ?? [];
    const rowOf = (tag: string) => ({
      y: Number(/ y="([\d.]+)"/.exec(tag)?.[1]),
      h: Number(/height="([\d.]+)"/.exec(tag)?.[1]),
    });
    const [one, wide] = faults.map(rowOf);
    expect(faults[0]).not.toContain('wide');
    expect(faults[1]).toContain('class="fault wide"');
    expect(one?.h).toBe(40); // one row
    expect(wide!.h).toBeGreaterThanOrEqual(80); // both rows
    expect(one!.y).toBeGreaterThan(wide!.y); // w2 is the second row
  });

  it('packs fault labels so that none overlap, and prints a token only where it fits', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 123456789, 0);
    for (let i = 0; i < 12; i++) b.fault('delay', 'all', 100 + i * 30, 200 + i * 30);
    b.line('w1', 60_000, { type: 'info', op: 'exit' });
    const page = renderTimeline(
      b.lines,
      {},
      checkRun({ history: b.lines, logs: {}, config: CONFIG }),
    );
    const labels = [
      ...page.matchAll(/class="fault-label" data-t0="([\d.]+)" data-y="([\d.]+)"/g),
    ].map((m) => ({ x: (Number(m[1]) * 1400) / 60_000, y: Number(m[2]) }));
    expect(labels).toHaveLength(12);
    const width = 'delay all'.length * 7 + 6;
    for (const [i, a] of labels.entries()) {
      for (const c of labels.slice(i + 1)) {
        const apart = a.y !== c.y || Math.abs(a.x - c.x) >= width;
        expect(apart).toBe(true);
      }
    }
    // The hold lasts 60 s at 1400 px: its 9-digit token fits; a 1 ms hold's would not.
    expect(page).toMatch(/class="token-label"[^>]*transform/);
    const tiny = new HistoryBuilder().acquire('w1', 'L', 123456789, 0).release('w1', 'L', 1);
    tiny.line('w1', 60_000, { type: 'info', op: 'exit' });
    const small = renderTimeline(
      tiny.lines,
      {},
      checkRun({ history: tiny.lines, logs: {}, config: CONFIG }),
    );
    expect(small).toMatch(/class="token-label"[^>]* style="display:none"/);
  });

  it('shows each cron fire: claims and skips at the fire time', () => {
    const b = new HistoryBuilder()
      .ready('w1', 0)
      .cronClaim('w1', fireAt(1000), 7, 1005)
      .cronRun('w1', 'cron-a', 7, 1006, 100, fireAt(1000))
      .cronSkip('w2', fireAt(1000), 'claimed-elsewhere', 1008);
    const page = renderTimeline(
      b.lines,
      {},
      checkRun({ history: b.lines, logs: {}, config: CONFIG }),
    );
    expect(page).toContain('class="mark fire claimed"');
    expect(page).toContain('class="mark fire skipped"');
    expect(page).toContain('skipped fire');
  });

  it('says how big a screenshot must be to hold the whole timeline', () => {
    const size = pageSize(html);
    expect(size.width).toBeGreaterThan(1400);
    // Axis, label band, four rows and the header: no empty half.
    expect(size.height).toBeGreaterThan(4 * 40);
    expect(size.height).toBeLessThan(600);
  });

  it('escapes what it prints', () => {
    const odd = simulate({ rounds: 1 }).history.map((l) => ({ ...l, name: '<b>&"x"' }));
    const page = renderTimeline(odd, {}, checkRun({ history: odd, logs: {}, config: CONFIG }));
    expect(page).not.toContain('<b>&');
    expect(page).toContain('&lt;b&gt;&amp;&quot;x&quot;');
  });
});
