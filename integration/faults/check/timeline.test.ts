import { describe, expect, it } from 'vitest';
import { CONFIG, simulate } from './fixtures.js';
import { checkRun } from './index.js';
import { renderTimeline } from './timeline.js';

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

  it('has the summary, a lane per worker, token-coloured bars, faults and violations', () => {
    expect(html).toContain(result.summary.replace(/&/g, '&amp;'));
    for (const lane of ['w1', 'w2', 'w3', 'w4']) expect(html).toContain(`>${lane}</div>`);
    expect(html).not.toContain('>nemesis</div>');
    const holds = html.match(/<rect class="hold lock"[^>]*fill="hsl\(\d+,65%,\d+%\)"/g) ?? [];
    expect(holds.length).toBe(13);
    expect(new Set(holds.map((h) => /fill="([^"]+)"/.exec(h)?.[1])).size).toBeGreaterThan(10);
    expect(html).toContain('class="fault"');
    expect(html).toContain('<text x="2" y="0">pause-holder</text>');
    expect(html).toContain('<text x="2" y="0">partition</text>');
    expect(html).toContain('class="mark write ok"');
    expect((html.match(/class="mark violation"/g) ?? []).length).toBe(result.violations.length);
    expect(result.violations.length).toBeGreaterThan(0);
    expect(html).toContain('class="mark lost-signal"');
    expect(html).toContain('class="cron"');
  });

  it('escapes what it prints', () => {
    const odd = simulate({ rounds: 1 }).history.map((l) => ({ ...l, name: '<b>&"x"' }));
    const page = renderTimeline(odd, {}, checkRun({ history: odd, logs: {}, config: CONFIG }));
    expect(page).not.toContain('<b>&');
    expect(page).toContain('&lt;b&gt;&amp;&quot;x&quot;');
  });
});
