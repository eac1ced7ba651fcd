/**
 * leaseholdRunCoordinator with two real node-cron 4 instances (two processes) on a 1 s task with
 * `distributed: true`: each fire runs on one instance, with the claim's token, and the claims are
 * kept as records after node-cron calls onComplete.
 */
import { connect } from '@leasehold/core';
import { leaseholdRunCoordinator } from '@leasehold/cron';
import { afterAll, afterEach, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import { describeWith, findPostgres } from '../fence/stores.js';
import {
  countRuns,
  nodeCronScript,
  Proc,
  replicaEnv,
  runsSchema,
  waitForFires,
} from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());
const prefixes: string[] = [];
afterEach(async () => {
  for (const prefix of prefixes.splice(0)) await admin.delete().prefix(prefix);
});

const postgres = await findPostgres();

describeWith(postgres, '@leasehold/cron node-cron coordinator', (url) => {
  const db = runsSchema(url, 'nodecron');

  it('two node-cron instances: each of at least 15 fires runs once, claims are kept with how each run ended', async () => {
    const prefix = uniquePrefix('cron-node-cron');
    prefixes.push(prefix);
    const task = 'node-cron-task';
    // Runs of fires whose second is a multiple of 3 throw. Both track their task
    // (coordinator.track): node-cron itself tells its coordinator only that a run ended.
    const env = replicaEnv(endpoints, prefix, {
      ...db.env(),
      TASK: task,
      FAIL_EVERY: '3',
      TRACK: '1',
    });
    const instances = await Promise.all(
      ['x', 'y'].map((name) => Proc.start(name, nodeCronScript, env)),
    );
    await waitForFires(() => db.rows(task), 17, '17 fires run', 60_000);
    for (const p of instances) expect(await p.endInput()).toEqual({ code: 0, signal: null });

    const rows = await db.rows(task);
    const counts = countRuns(rows, 1000);
    const per = Object.fromEntries(
      ['x', 'y'].map((n) => [n, rows.filter((r) => r.runner === n).length]),
    );
    console.log(
      `[cron node-cron] ${counts.fires} fires: duplicates ${counts.duplicates}, misses ${counts.misses}; runs per instance ${JSON.stringify(per)}`,
    );
    expect(counts.duplicates).toBe(0);
    expect(counts.missing).toEqual([]);
    expect(counts.fires).toBeGreaterThanOrEqual(15);
    // node-cron skipped on the other instance: 'not-elected' is its word for "claimed elsewhere".
    const notElected = instances.flatMap((p) =>
      p.all('skipped').filter((m) => m.reason === 'not-elected'),
    );
    expect(notElected.length).toBeGreaterThanOrEqual(counts.fires - 2);
    expect(instances.flatMap((p) => p.all('no-claim'))).toEqual([]);

    // Claims are kept after onComplete: every fire that ran has its record, with the same token
    // and, where the task is tracked, its real outcome.
    await using client = await connect({ endpoints });
    const history = await leaseholdRunCoordinator(client, { prefix }).history(task, {
      limit: 1000,
    });
    const outcomes = { ok: 0, error: 0 };
    for (const row of rows) {
      const entry = history.find((h) => h.fireTime.toISOString() === row.fire);
      const fails = new Date(row.fire).getUTCSeconds() % 3 === 0;
      const outcome = fails ? 'error' : 'ok';
      expect(entry, row.fire).toMatchObject({ token: row.token, runner: row.runner, outcome });
      if (outcome === 'error') expect(entry!.error).toBe(`Error: planned failure of ${row.fire}`);
      outcomes[outcome]++;
    }
    console.log(`[cron node-cron] outcomes recorded: ${JSON.stringify(outcomes)}`);
    // At least 15 fires in a row, one second apart: a third of them failed.
    expect(outcomes.error).toBeGreaterThanOrEqual(Math.floor(counts.fires / 3));
    expect(outcomes.ok).toBeGreaterThan(0);
  }, 120_000);
});
