import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG, simulate } from './fixtures.js';
import { checkRun } from './index.js';
import { inspectPng } from './png.js';
import { findChromium, screenshot } from './screenshot.js';
import { renderTimeline } from './timeline.js';

/** CI keeps the picture as an artifact; elsewhere it goes to a temporary directory. */
const ciState = process.env.LEASEHOLD_CI_STATE;

describe('timeline in headless Chromium', () => {
  let dir = '';
  beforeAll(async () => {
    dir = ciState
      ? join(ciState, 'artifacts', 'faults')
      : await mkdtemp(join(tmpdir(), 'timeline-'));
    await mkdir(dir, { recursive: true });
  });
  afterAll(async () => {
    if (!ciState && dir) await rm(dir, { recursive: true, force: true });
  });

  it('says why and resolves false when Chromium is absent', async () => {
    const saved = process.env.CHROMIUM_PATH;
    process.env.CHROMIUM_PATH = join(tmpdir(), 'no-such-chromium');
    const messages: string[] = [];
    try {
      expect(
        await screenshot('x.html', join(dir, 'never.png'), { log: (m) => messages.push(m) }),
      ).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.CHROMIUM_PATH;
      else process.env.CHROMIUM_PATH = saved;
    }
    expect(messages[0]).toMatch(/no Chromium found/);
    await expect(stat(join(dir, 'never.png'))).rejects.toThrow();
  });

  it('renders a run of a few thousand events to a non-blank PNG', async (context) => {
    if (!(await findChromium())) {
      // CI installs chromium (scripts/setup.sh): there a missing browser is a failure.
      if (ciState || process.env.CI) throw new Error('chromium is not installed');
      context.skip('chromium is not installed (apt-get install chromium)');
    }
    const { history, logs } = simulate({
      rounds: 400,
      workers: 5,
      pauseRounds: [40, 150, 260],
      partitionRounds: [90, 200, 330],
      fencing: false,
    });
    expect(history.length).toBeGreaterThan(4000);
    const result = checkRun({
      history,
      logs,
      config: { ...CONFIG, fencing: false, faults: ['pause-holder', 'partition'] },
    });
    expect(result.violations.length).toBeGreaterThan(0);
    const html = join(dir, 'timeline-synthetic.html');
    const png = join(dir, 'timeline-synthetic.png');
    await writeFile(html, renderTimeline(history, logs, result));
    const blankHtml = join(dir, 'blank.html');
    const blankPng = join(dir, 'blank.png');
    await writeFile(blankHtml, '<!doctype html><html><body></body></html>');

    expect(await screenshot(html, png, { timeoutMs: 90_000 })).toBe(true);
    expect(await screenshot(blankHtml, blankPng, { timeoutMs: 90_000 })).toBe(true);

    const page = inspectPng(await readFile(png));
    const blank = inspectPng(await readFile(blankPng));
    expect(page).toMatchObject({ width: 1600, height: 1000 });
    expect(blank.distinctColours).toBeLessThanOrEqual(2);
    // Token hues, fault shading, markers and text: far from a flat page.
    expect(page.distinctColours).toBeGreaterThan(50);
    expect((await stat(png)).size).toBeGreaterThan(5 * (await stat(blankPng)).size);
  }, 200_000);
});
