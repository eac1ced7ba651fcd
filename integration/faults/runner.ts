/**
 * One fault run: an etcd of its own, the resources, worker processes for each workload, the
 * nemesis injecting faults from a seeded PRNG, then the offline check of the merged history
 * against the resources' logs. Writes history.jsonl, logs.json, report.json and timeline.html
 * into `integration/.scratch/faults/<run-id>/` (and into CI's artifacts folder when
 * `LEASEHOLD_CI_STATE` is set) and prints the one-line summary with the seed.
 */
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { plansFor } from './check/liveness.js';
import {
  checkRun,
  pageSize,
  screenshot,
  writeRunArtifacts,
  type CheckConfig,
  type CheckResult,
  type FaultKind,
  type HistoryLine,
  type ResourceLogs,
  type Violation,
} from './check/index.js';
import { FaultCluster } from './cluster.js';
import { ELECTION_TIMEOUT_MS } from './member.js';
import { observeDeletes } from './observer.js';
import { CLUSTER_KINDS, inject, waitUntil, type NemesisControl } from './nemesis.js';
import { prng, runSeed } from './prng.js';
import { Resources, type ResourceName } from './resources.js';
import { WorkerProc, type Workload } from './workers.js';

export interface RunOptions {
  /** Names the run (and its directory). */
  label: string;
  /** etcd members. Default 1. */
  members?: 1 | 3;
  /** Worker processes per workload. */
  workers: Partial<Record<Workload, number>>;
  /**
   * Fault kinds: injected in this order (`sequence`), or each once in a shuffled order and then
   * drawn at random until `durationMs` (`random`). Every kind listed must get in at least once
   * (a kind that finds no target is tried again); the checker flags one that never did.
   */
  faults: FaultKind[];
  /** Default `sequence`. */
  mode?: 'sequence' | 'random';
  /**
   * For `random`: how long the nemesis keeps injecting (default 30 000 ms). For `sequence`: the
   * least the run lasts from when the workloads are ready (default: until the last fault settled).
   */
  durationMs?: number;
  /** Workers' lease TTL. Default 2 s (etcd's minimum with the run's timing). */
  ttlSeconds?: number;
  /** Default all three. */
  resources?: ResourceName[];
  /** False: every workload writes unfenced (a negative control for elections and cron too). */
  fenced?: boolean;
  /** Default `FAULTS_SEED`, else random. */
  seed?: number;
  /** Also render timeline.png with headless Chromium (skipped, with a note, if it is absent). */
  screenshot?: boolean;
}

export interface RunOutcome {
  runId: string;
  dir: string;
  seed: number;
  result: CheckResult;
  /** The checker's violations (the same as `result.violations`). */
  violations: Violation[];
  /** Faults injected, by kind (a fault that found no target in time is not counted). */
  injected: Record<string, number>;
  history: HistoryLine[];
  logs: ResourceLogs;
  /** Resources left out (no server), with why. */
  missing: Partial<Record<ResourceName, string>>;
  /** Seed, directory, summary and the first violations: for a test's failure message. */
  describe(): string;
}

const NAMES: Record<Workload, string> = {
  lock: 'lock-a',
  unfenced: 'unfenced-a',
  election: 'elect-a',
  cron: 'cron-a',
};

const SCRATCH = fileURLToPath(new URL('../.scratch/faults/', import.meta.url));
const READY_MS = 60_000;
const PROGRESS_MS = 20_000;
const STOP_GRACE_MS = 8_000;
/** A kind that found no target is tried this many times before the run moves on. */
const INJECT_TRIES = 3;
/** The workers' per-attempt deadline on one member (the SDK's default, kept explicit). */
const ATTEMPT_TIMEOUT_MS = 1_000;
/** The lag ticker's period in the workers and here: the resolution of every lag measurement. */
const LAG_TICK_MS = 20;
const CRON = { everyMs: 1_000, lateToleranceMs: 2_000 };
const CALL_TIMEOUT_MS = 1_500;
const RECHECK_INTERVAL_MS = 1_000;
const HOLDER_FAULTS = new Set<FaultKind>([
  'pause-holder',
  'stall-loop',
  'kill-holder',
  'kill-mid-acquire',
  'kill-mid-release',
]);
const RESTARTS = new Set<FaultKind>([
  'restart-cluster',
  'snapshot-restore',
  'quorum-loss',
  'replace-member',
  'wipe-member',
]);

const now = () => performance.timeOrigin + performance.now();

export async function runFaults(options: RunOptions): Promise<RunOutcome> {
  const seed = options.seed ?? runSeed();
  const random = prng(seed);
  const ttlSeconds = options.ttlSeconds ?? 2;
  const members = options.members ?? 1;
  const needThree = options.faults.filter((kind) => CLUSTER_KINDS.includes(kind));
  if (members !== 3 && needThree.length > 0) {
    throw new Error(`fault kinds ${needThree.join(', ')} need a 3-member cluster (members: 3)`);
  }
  const runId = `${options.label}-${new Date().toISOString().replace(/[:.]/g, '-')}-${seed}`;
  const dir = join(SCRATCH, runId);
  console.log(`[faults] ${options.label}: seed ${seed} (replay with FAULTS_SEED=${seed})`);

  const history: HistoryLine[] = [];
  const workers: WorkerProc[] = [];
  const injected: Record<string, number> = {};
  let running = true;
  let restartsHeld = false;
  let workerSeq = 0;
  const held: Workload[] = [];

  await using cluster = await FaultCluster.start(members);
  // How late this process's timers run: the worker proxies and the memory resource live here.
  let expected = performance.now() + LAG_TICK_MS;
  const ticker = setInterval(() => {
    const t = performance.now();
    const late = t - expected;
    expected = t + LAG_TICK_MS;
    if (late >= LAG_TICK_MS) {
      history.push({ at: now(), process: 'runner', type: 'info', op: 'lag', ms: Math.round(late) });
    }
  }, LAG_TICK_MS);
  const resources = await Resources.open(
    options.resources ?? ['memory', 'postgres', 'redis'],
    options.label,
  );
  for (const why of Object.values(resources.missing)) {
    console.warn(`[faults] ${options.label}: resource left out: ${why}`);
  }
  const observer = await observeDeletes(cluster.endpoints, '/faults/', (line) =>
    history.push(line),
  );
  const live = () => workers.filter((w) => w.alive && w.killedAt === undefined);
  const lastOkWrite = new Map<Workload, number>();

  const reconnectsHeld = new Set<WorkerProc>();
  const onLine = (worker: WorkerProc, line: HistoryLine) => {
    history.push(line);
    if ((line.op as string) === 'cluster-changed') {
      // Clients come back only once the restore's recovery is done.
      if (restartsHeld) reconnectsHeld.add(worker);
      else worker.command({ cmd: 'reconnect' });
    }
    if (line.type === 'ok' && line.op === 'write') lastOkWrite.set(worker.workload, line.at);
  };

  const spawning = new Set<Promise<unknown>>();
  const replace = (workload: Workload): void => {
    const next = sleep(100).then(() => (running ? spawn(workload) : undefined));
    spawning.add(next);
    void next.finally(() => spawning.delete(next)).catch(() => {});
  };

  const spawn = async (workload: Workload): Promise<WorkerProc> => {
    const worker = await WorkerProc.start(
      `w${++workerSeq}`,
      workload,
      cluster.endpoints,
      {
        name: NAMES[workload],
        lockPrefix: '/faults/lock/',
        electionPrefix: '/faults/election/',
        cronPrefix: '/faults/cron/',
        ttlSeconds,
        callTimeoutMs: CALL_TIMEOUT_MS,
        attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
        recheckIntervalMs: RECHECK_INTERVAL_MS,
        fenced: workload !== 'unfenced' && options.fenced !== false,
        seed: Math.floor(random.next() * 0xffffffff),
        holdMs: [150, 400],
        // Several TTLs: these holds meet partitions and deadlines while they last.
        longHoldMs: [ttlSeconds * 2_500, ttlSeconds * 4_000],
        longHoldShare: 0.3,
        roundGapMs: [150, 400],
        acquireTimeoutMs: [400, 3_000],
        cron: CRON,
        resources: resources.endpoints,
      },
      onLine,
    );
    workers.push(worker);
    void worker.exited.then((exit) => {
      history.push({
        at: exit.at,
        process: worker.name,
        pid: worker.pid,
        type: 'info',
        op: 'exit',
        workload,
        reason: exit.signal ?? `code ${exit.code}`,
      });
      void worker.closeProxies();
      if (!running) return;
      if (worker.killedAt === undefined) {
        console.warn(
          `[faults] ${options.label}: ${worker.name} (${workload}) exited unexpectedly ` +
            `(${exit.signal ?? `code ${exit.code}`}); stderr tail:\n${worker.stderr.slice(-2_000)}`,
        );
      }
      if (restartsHeld) held.push(workload);
      else replace(workload);
    });
    return worker;
  };

  const ctl: NemesisControl = {
    cluster,
    random,
    seed,
    ttlMs: ttlSeconds * 1000,
    attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
    workers: live,
    emit: (line) => history.push({ at: now(), process: 'nemesis', pid: process.pid, ...line }),
    markKilled: (worker) => {
      worker.killedAt = now();
    },
    holdRestarts: (hold) => {
      restartsHeld = hold;
      if (hold) return;
      for (const workload of held.splice(0)) replace(workload);
      for (const worker of reconnectsHeld) worker.command({ cmd: 'reconnect' });
      reconnectsHeld.clear();
    },
    maxToken: () =>
      history.reduce(
        (max, l) => (l.token !== undefined && BigInt(l.token) > max ? BigInt(l.token) : max),
        0n,
      ),
  };

  const workloads = (Object.entries(options.workers) as [Workload, number][]).filter(
    ([, n]) => n > 0,
  );
  /** Every workload has written successfully since `since`. */
  const progressed = (since: number) =>
    workloads.every(([workload]) => (lastOkWrite.get(workload) ?? 0) > since);

  const config: CheckConfig = {
    ttlSeconds,
    electionTimeoutMs: ELECTION_TIMEOUT_MS,
    attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
    callTimeoutMs: CALL_TIMEOUT_MS,
    recheckIntervalMs: RECHECK_INTERVAL_MS,
    lagResolutionMs: LAG_TICK_MS,
    cron: CRON,
    faults: [...new Set(options.faults)],
    seed,
    fencing: !workloads.some(([w]) => w === 'unfenced') && options.fenced !== false,
  };

  let failure: Error | undefined;
  try {
    for (const [workload, count] of workloads) {
      for (let i = 0; i < count; i++) await spawn(workload);
    }
    const started = now();
    if (!(await waitUntil(() => progressed(started), READY_MS))) {
      const stuck = workloads.filter(([w]) => !lastOkWrite.has(w)).map(([w]) => w);
      throw new Error(
        `the workloads ${stuck.join(', ')} made no progress within ${READY_MS} ms of starting ` +
          `(seed ${seed}; history in ${dir})`,
      );
    }

    // Random runs take every kind once first (shuffled), so none is left out by the draw.
    const sequence =
      (options.mode ?? 'sequence') === 'sequence'
        ? [...options.faults]
        : random.shuffle([...new Set(options.faults)]);
    const endAt = now() + (options.durationMs ?? (options.mode === 'random' ? 30_000 : 0));
    for (;;) {
      const kind =
        sequence.shift() ??
        (options.mode === 'random' && now() < endAt ? random.pick(options.faults) : undefined);
      if (kind === undefined) break;
      let got = false;
      for (let i = 0; i < INJECT_TRIES && !got; i++) got = await inject(ctl, kind);
      if (!got) continue;
      injected[kind] = (injected[kind] ?? 0) + 1;
      // Before the next fault (or the end of the run): every workload has made progress, the
      // fault's liveness bound has passed, and after a fault on a holder someone else has been
      // granted, so each fault's recovery is measured on its own and within the history.
      const ended = now();
      const start = [...history].reverse().find((l) => l.type === 'fault-start')!;
      const finish = [...history].reverse().find((l) => l.type === 'fault-end')!;
      const window = {
        id: String(start.id),
        fault: kind,
        target: String(start.target),
        start: start.at,
        end: ended,
        detail: { ...start, ...finish },
      };
      // Past every liveness bound of the fault, so its recovery is judged within the history.
      const bounds = plansFor(window, config).map(
        (plan) => (plan.from === 'start' ? start.at : ended) + plan.boundMs,
      );
      const settleAt = Math.max(
        (HOLDER_FAULTS.has(kind) ? start.at : ended) +
          ttlSeconds * 1000 +
          (RESTARTS.has(kind) ? 2_500 : 1_500),
        ...bounds,
      );
      // After a fault on a holder (or a waiter), someone else is granted the name it was about.
      const granted = () =>
        !HOLDER_FAULTS.has(kind) ||
        history.some(
          (l) =>
            l.type === 'ok' &&
            (l.op === 'acquire' || l.op === 'campaign') &&
            l.process !== start.target &&
            (start.name === undefined || l.name === start.name) &&
            l.at > start.at,
        );
      // That may wait for someone else's long hold (up to four TTLs) and then the target's lease.
      const waitMs = PROGRESS_MS + (HOLDER_FAULTS.has(kind) ? ttlSeconds * 5_000 : 0);
      await waitUntil(() => progressed(ended) && now() >= settleAt && granted(), waitMs);
      await sleep(random.between(300, 1_000));
    }
    await sleep(Math.max(1_000, endAt - now()));
  } catch (err) {
    failure = err instanceof Error ? err : new Error(String(err));
  } finally {
    running = false;
    clearInterval(ticker);
    await Promise.allSettled([...spawning]);
    await Promise.all(workers.map((w) => w.stop(STOP_GRACE_MS)));
    await Promise.all(workers.map((w) => w.closeProxies()));
  }
  await observer.close();
  const logs = await resources.logs();
  await resources.close();
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, 'workers.log'),
    workers.map((w) => `== ${w.name} (${w.workload}, pid ${w.pid})\n${w.stderr}`).join('\n'),
  );
  if (failure !== undefined) {
    await writeFile(join(dir, 'history.jsonl'), history.map((l) => JSON.stringify(l)).join('\n'));
    throw failure;
  }

  const result = checkRun({ history, logs, config });
  await writeFile(
    join(dir, 'history.jsonl'),
    history.map((l) => JSON.stringify(l)).join('\n') + '\n',
  );
  await writeFile(join(dir, 'logs.json'), `${JSON.stringify(logs, null, 2)}\n`);
  await writeRunArtifacts(dir, { history, logs, result, config });
  if (options.screenshot) {
    // Sized to the page, so the picture is the whole timeline and no empty space.
    const html = await readFile(join(dir, 'timeline.html'), 'utf8');
    await screenshot(join(dir, 'timeline.html'), join(dir, 'timeline.png'), pageSize(html));
  }
  const ci = process.env.LEASEHOLD_CI_STATE;
  if (ci) await cp(dir, join(ci, 'artifacts', 'faults', runId), { recursive: true });
  console.log(`[faults] ${options.label}: ${result.summary}`);

  return {
    runId,
    dir,
    seed,
    result,
    violations: result.violations,
    injected,
    history,
    logs,
    missing: resources.missing,
    describe: () =>
      [
        `fault run "${options.label}" seed ${seed} (replay: FAULTS_SEED=${seed}); artifacts in ${dir}`,
        result.summary,
        ...result.violations.slice(0, 10).map((v) => `  ${v.rule}: ${v.message}`),
      ].join('\n'),
  };
}
