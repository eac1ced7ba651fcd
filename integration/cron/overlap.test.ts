/**
 * What keeps a job from running twice at once, in one process against the run's etcd: the
 * running marker of `overlap: 'skip'` (and a claim whose answer came too late, which must not
 * leave that marker behind for good), and `overlap: 'replace'`, where a fire aborts the run going
 * on and the replaced run's fenced writes are refused.
 */
import { isRunReplacedError, type RunContext, type SkippedEvent } from '@leasehold/cron';
import { isStaleTokenError } from '@leasehold/fence';
import { etcdStore } from '@leasehold/fence/etcd';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { monitorLoopLag } from '../setup/lag.js';
import { limits } from '../../packages/cron/src/options.js';
import { inProcess } from './in-process.js';

const cron = inProcess();
const { admin } = cron;

describe("overlap 'skip'", () => {
  it('a claim of this replica that lands after its lost-answer check gave up does not block the job: the next fire records it lost and runs', async () => {
    const prefix = cron.prefixFor('cron-orphan');
    const session = await cron.client.session();
    const s = await cron.scheduler('r', { prefix, session });
    const runs: string[] = [];
    const overlaps: SkippedEvent[] = [];
    s.onSkipped((e) => e.reason === 'overlap' && overlaps.push(e));
    const period = 1000;
    s.schedule('job', '* * * * * *', ({ fireTime }) => void runs.push(fireTime.toISOString()), {
      retentionSeconds: 120,
    });
    await waitFor(() => runs.length >= 1, { what: 'a first run' });
    const records = Object.values(await admin.getAll().prefix(`${prefix}job/fire/`).strings());
    const instance = (JSON.parse(records[0]!) as { instance: string }).instance;

    // What the claim transaction of this scheduler writes, for a fire it never claimed as far as
    // it knows: an answer lost, the transaction delivered after the claimer stopped looking.
    const fireTime = new Date(Math.floor(Date.now() / period) * period - 3_600_000).toISOString();
    const record = {
      v: 1,
      job: 'job',
      fireTime,
      runner: 'r',
      instance,
      attempt: 'scheduled',
      claimedAt: new Date().toISOString(),
      state: 'running',
    };
    const retention = await admin.lease(120, { autoKeepAlive: false }).grant();
    const lease = session.leaseId.toString();
    const key = (k: string) => Buffer.from(`${prefix}job/${k}`);
    await waitFor(
      async () => {
        const res = await admin.kv.txn({
          compare: [
            { key: key('running'), target: 'Create', result: 'Equal', create_revision: '0' },
          ],
          success: [
            {
              request_put: {
                key: key(`fire/${fireTime}`),
                value: Buffer.from(JSON.stringify(record)),
                lease: retention,
              },
            },
            { request_put: { key: key(`claim/${fireTime}`), value: Buffer.from('r'), lease } },
            {
              request_put: {
                key: key('running'),
                value: Buffer.from(JSON.stringify({ fireTime, runner: 'r', instance })),
                lease,
              },
            },
          ],
          failure: [],
        });
        return res.succeeded || undefined;
      },
      { what: 'the late claim lands between two runs' },
    );
    const landedAt = Date.now();
    const before = runs.length;
    // The next fire finds the marker, sees it is an orphan of its own, records it lost, and runs.
    await waitFor(() => runs.length >= before + 3, {
      timeoutMs: 10 * period,
      what: `3 runs after the late claim landed (overlap skips so far: ${overlaps.length})`,
    });
    const entry = (await s.history('job', { limit: 1000 })).find(
      (h) => h.fireTime.toISOString() === fireTime,
    );
    expect(entry?.outcome).toBe('lost');
    expect(entry?.error).toMatch(/landed after/);
    expect(await admin.get(`${prefix}job/claim/${fireTime}`).exists()).toBe(false);
    console.log(
      `[cron orphan] ${runs.length - before} runs in ${Date.now() - landedAt} ms after the late claim; ${overlaps.length} overlap skips`,
    );
  });
});

describe("overlap 'replace'", () => {
  it("a fire aborts the run going on, on this replica or another, with RunReplacedError; the replaced run's fenced writes are refused once the new run wrote", async () => {
    const prefix = cron.prefixFor('cron-replace');
    const fencePrefix = cron.prefixFor('cron-replace-fence');
    const store = etcdStore(cron.client, { prefix: fencePrefix });
    interface Run {
      replica: string;
      fire: string;
      token: bigint;
      startedAt: number;
      endedAt?: number;
      abortedAt?: number;
      reason?: unknown;
      accepted: number;
      refusedAfter?: number;
    }
    const runs: Run[] = [];
    using lag = monitorLoopLag();
    // The slowest fenced write any run made: this host's etcd round trip under this load, what
    // the replaced run's read of the marker costs too.
    let roundTripMs = 0;
    // Each run writes to one fenced resource for the whole job every 100 ms, ignoring its
    // signal: only the fence stops the writes of a replaced run. It lasts the 2 s period plus a
    // marker check plus 1.5 s, so that a replacement from the other replica (due a check and a
    // read after the next run starts) falls inside the overlap, where the check below holds it.
    const RUN_MS = 2_000 + limits.replaceCheckMs + 1_500;
    const job =
      (replica: string) =>
      async ({ token, signal, fireTime }: RunContext) => {
        const run: Run = {
          replica,
          fire: fireTime.toISOString(),
          token,
          startedAt: Date.now(),
          accepted: 0,
        };
        runs.push(run);
        signal.addEventListener('abort', () => {
          run.abortedAt = Date.now();
          run.reason = signal.reason;
        });
        try {
          for (const until = Date.now() + RUN_MS; Date.now() < until; await sleep(100)) {
            const sentAt = performance.now();
            try {
              await store.write({ resource: 'job', token, value: run.fire });
              run.accepted++;
            } catch (err) {
              if (!isStaleTokenError(err)) throw err;
              run.refusedAfter ??= Date.now();
            }
            roundTripMs = Math.max(roundTripMs, performance.now() - sentAt);
          }
        } finally {
          run.endedAt = Date.now();
        }
      };
    const replicas = await Promise.all(
      ['a', 'b'].map(async (name) => {
        const s = await cron.scheduler(name, { prefix }, await cron.ownClient());
        s.schedule('job', '*/2 * * * * *', job(name), {
          overlap: 'replace',
          retentionSeconds: 120,
        });
        return s;
      }),
    );
    // Which replica claims a fire is a race: wait until one replacement crossed replicas too
    // (with two replicas each fire is about a coin toss: a minute of 2 s fires that all go to
    // one replica has odds below 2^-20).
    const replacedBy = (r: Run) =>
      runs.reduce<Run | undefined>(
        (next, n) => (n.token > r.token && (!next || n.token < next.token) ? n : next),
        undefined,
      );
    await waitFor(
      () =>
        runs.filter((r) => r.reason !== undefined).length >= 4 &&
        runs.some((r) => {
          const by = replacedBy(r);
          return isRunReplacedError(r.reason) && by !== undefined && by.replica !== r.replica;
        }),
      { timeoutMs: 60_000, what: '4 runs replaced, one by the other replica' },
    );
    const stoppingAt = Date.now();
    await Promise.all(replicas.map((s) => s.stop({ drainMs: RUN_MS + 2_000 })));

    const byToken = [...runs].sort((x, y) => (x.token < y.token ? -1 : 1));
    const history = await replicas[0]!.history('job', { limit: 100 });
    let across = 0;
    let replaced = 0;
    for (let i = 0; i + 1 < byToken.length; i++) {
      const [old, next] = [byToken[i]!, byToken[i + 1]!];
      // On the same replica at once (the abort comes before the new run starts); from another
      // at its next check of the marker plus one read. Both replicas share this process's loop,
      // so its worst lag can delay either side; each Date.now() stamp is whole ms.
      const boundMs =
        (old.replica === next.replica ? 0 : limits.replaceCheckMs + roundTripMs) +
        2 * lag.maxLagMs +
        2;
      if (!isRunReplacedError(old.reason)) {
        // A run still going when the next one started must have been replaced, unless stop()
        // came before its replacement was due (then it was stopped instead).
        // (A run that ended before its replacement was due ended as it was.)
        const due = next.startedAt + boundMs < Math.min(old.endedAt ?? Infinity, stoppingAt);
        expect(due, `${old.fire} not replaced by ${next.fire}: ${String(old.reason)}`).toBe(false);
        continue;
      }
      replaced++;
      if (old.replica !== next.replica) across++;
      expect(
        old.abortedAt! - next.startedAt,
        `${old.fire} replaced by ${next.fire}`,
      ).toBeLessThanOrEqual(boundMs);
      // It kept writing (it ignores its signal): refused once the new run had written.
      expect(old.refusedAfter, `${old.fire}'s writes after ${next.fire} started`).toBeDefined();
      expect(history.find((h) => h.token === old.token)?.outcome).toBe('replaced');
    }
    // Every fire ran at most once, and the fence holds the newest run's token.
    expect(new Set(runs.map((r) => r.fire)).size).toBe(runs.length);
    expect(await store.highestToken('job')).toBe(byToken.at(-1)!.token);
    expect(replaced).toBeGreaterThanOrEqual(4);
    expect(across).toBeGreaterThanOrEqual(1);
    console.log(
      `[cron replace] ${runs.length} runs, ${runs.filter((r) => isRunReplacedError(r.reason)).length} replaced (${across} by the other replica; round trip ${roundTripMs.toFixed(0)} ms, lag ${lag.maxLagMs.toFixed(0)} ms); aborted ${byToken
        .slice(0, -1)
        .map((r, i) => (r.abortedAt === undefined ? '-' : r.abortedAt - byToken[i + 1]!.startedAt))
        .join(', ')} ms after the next run started`,
    );
  }, 120_000);
});
