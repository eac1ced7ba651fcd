/**
 * `leasehold inspect` shows `@leasehold/cron` jobs as a scheduler left them: the schedule its
 * replicas announced, the next fire, and the newest fires with runner, outcome and token.
 */
import { connect } from '@leasehold/core';
import { createScheduler } from '@leasehold/cron';
import { describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { cleanUpAfter, runCli } from './harness.js';

const endpoints = sharedEndpoints();

interface JobJson {
  name: string;
  schedule: string | { everyMs: number } | null;
  timeZone: string | null;
  next: string | null;
  recent: { fireTime: string; token: string; runner: string; outcome: string }[];
}

describe('leasehold inspect and cron jobs', () => {
  it('--json lists each job with its schedule, next fire and newest fires as the scheduler recorded them', async () => {
    const cronPrefix = cleanUpAfter(uniquePrefix('cli-inspect-cron'));
    await using client = await connect({ endpoints });
    const scheduler = await createScheduler(client, { prefix: cronPrefix, runner: 'replica-a' });
    const runs: bigint[] = [];
    scheduler.schedule('reports/nightly', '* * * * * *', ({ token }) => void runs.push(token), {
      timeZone: 'Europe/Berlin',
    });
    scheduler.schedule('sweep', { everyMs: 1000 }, () => {});
    try {
      await waitFor(async () => (await scheduler.history('reports/nightly')).length >= 2, {
        what: 'two recorded fires',
      });
      const { code, stdout, stderr } = await runCli([
        'inspect',
        '--json',
        '--cron-prefix',
        cronPrefix,
        '--endpoints',
        endpoints.join(','),
      ]);
      expect(stderr).toBe('');
      expect(code).toBe(0);
      const doc = JSON.parse(stdout) as { cronPrefix: string; jobs: JobJson[] };
      expect(doc.cronPrefix).toBe(cronPrefix);
      expect(doc.jobs.map((j) => j.name)).toEqual(['reports/nightly', 'sweep']);
      const [nightly, sweep] = doc.jobs as [JobJson, JobJson];
      expect(nightly).toMatchObject({ schedule: '* * * * * *', timeZone: 'Europe/Berlin' });
      expect(sweep.schedule).toEqual({ everyMs: 1000 });
      expect(Date.parse(nightly.next!)).toBeGreaterThan(Date.now() - 5_000);
      const history = await scheduler.history('reports/nightly', { limit: 3 });
      const shown = nightly.recent.filter((r) => r.outcome !== 'running');
      expect(shown.length).toBeGreaterThan(0);
      for (const r of shown) {
        const same = history.find((h) => h.fireTime.toISOString() === r.fireTime);
        if (!same) continue; // a newer fire recorded between the two reads
        expect(r).toMatchObject({ token: same.token.toString(), runner: 'replica-a' });
      }
      const filtered = await runCli([
        'inspect',
        '--json',
        '--prefix',
        'sw',
        '--cron-prefix',
        cronPrefix,
        '--endpoints',
        endpoints.join(','),
      ]);
      expect((JSON.parse(filtered.stdout) as { jobs: JobJson[] }).jobs.map((j) => j.name)).toEqual([
        'sweep',
      ]);
    } finally {
      await scheduler.stop();
    }
  });
});
