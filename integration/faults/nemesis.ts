/**
 * The nemesis: every fault kind the suite injects, each logged as `fault-start` / `fault-end`
 * lines in the run's history. Targets and durations come from the run's seeded PRNG; faults
 * aimed at a worker wait (bounded) for a worker in the right state (holding between two rounds of
 * writes, waiting in the queue, releasing) and are skipped if none comes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultKind, HistoryLine } from './check/index.js';
import type { FaultCluster } from './cluster.js';
import type { Random } from './prng.js';
import type { WorkerProc } from './workers.js';

export const FAULT_KINDS: readonly FaultKind[] = [
  'pause-holder',
  'kill-holder',
  'kill-mid-acquire',
  'kill-mid-release',
  'pause-member',
  'kill-member',
  'pause-leader',
  'kill-leader',
  'restart-cluster',
  'partition',
  'reset',
  'flap',
  'delay',
  'compact',
  'revoke-lease',
  'delete-key',
  'stall-loop',
  'snapshot-restore',
];

export interface NemesisControl {
  cluster: FaultCluster;
  random: Random;
  seed: number;
  ttlMs: number;
  /** Resources each round of writes goes to. */
  resourceCount: number;
  /** Live workers the nemesis may aim at. */
  workers(): WorkerProc[];
  emit(line: Omit<HistoryLine, 'at' | 'process'>): void;
  /** Marks the worker's current hold as frozen (belief overlap expected). */
  markFrozen(worker: WorkerProc): void;
  /** Marks a worker killed on purpose; the runner replaces it. */
  markKilled(worker: WorkerProc): void;
  /** While held, exited workers are not replaced (a restore is under way). */
  holdRestarts(held: boolean): void;
  /** The highest token any worker reported. */
  maxToken(): bigint;
}

const TARGET_WAIT_MS = 10_000;

let faultSeq = 0;

/** Injects one fault of `kind`; resolves once it has ended. False when no target came. */
export async function inject(ctl: NemesisControl, kind: FaultKind): Promise<boolean> {
  const id = `f${++faultSeq}`;
  const start = (target: string, extra: Record<string, unknown> = {}) =>
    ctl.emit({ type: 'fault-start', fault: kind, target, id, seed: ctl.seed, ...extra });
  const end = (target: string) =>
    ctl.emit({ type: 'fault-end', fault: kind, target, id, seed: ctl.seed });
  const { random, cluster, ttlMs } = ctl;
  const freezeMs = () => ttlMs + random.between(1_000, 2_000);

  switch (kind) {
    case 'pause-holder': {
      const w = await pick(ctl, (w) => w.idleHolding(ctl.resourceCount));
      if (!w) return false;
      const ms = freezeMs();
      start(w.name, { ms });
      ctl.markFrozen(w);
      w.signal('SIGSTOP');
      await sleep(ms);
      w.signal('SIGCONT');
      end(w.name);
      return true;
    }
    case 'stall-loop': {
      const w = await pick(ctl, (w) => w.idleHolding(ctl.resourceCount));
      if (!w) return false;
      const ms = freezeMs();
      start(w.name, { ms });
      ctl.markFrozen(w);
      const before = w.stallsEnded;
      w.command({ cmd: 'stall', ms });
      // The stall ends when the worker says so (or the process is gone).
      await waitUntil(() => !w.alive || w.stallsEnded > before, ms + 10_000);
      end(w.name);
      return true;
    }
    case 'kill-holder':
    case 'kill-mid-acquire':
    case 'kill-mid-release': {
      const when: (w: WorkerProc) => boolean =
        kind === 'kill-holder'
          ? (w) => w.hold !== undefined
          : kind === 'kill-mid-acquire'
            ? (w) => w.waiting !== undefined
            : (w) => w.releasing;
      const w = await pick(ctl, when, kind === 'kill-mid-release' ? 2 : 10);
      if (!w) return false;
      start(w.name);
      ctl.markKilled(w);
      w.signal('SIGKILL');
      await w.exited;
      end(w.name);
      return true;
    }
    case 'pause-member':
    case 'pause-leader':
    case 'kill-member':
    case 'kill-leader': {
      const member = kind.endsWith('leader')
        ? await cluster.leader()
        : await cluster.follower(() => random.next());
      if (!member) return false;
      const ms = random.between(1_500, 3_500);
      start(member.name, { ms });
      if (kind.startsWith('pause')) {
        await member.pause();
        await sleep(ms);
        await member.resume();
      } else {
        await member.kill();
        await sleep(ms);
        await member.start();
      }
      end(member.name);
      return true;
    }
    case 'restart-cluster': {
      start('cluster');
      await Promise.all(cluster.members.map((m) => m.stop()));
      await Promise.all(cluster.members.map((m) => m.start()));
      end('cluster');
      return true;
    }
    case 'snapshot-restore': {
      const member = cluster.members[0]!;
      start(member.name);
      const snapshot = await member.snapshot();
      // Tokens go on growing after the snapshot; the restore takes the revision back below them.
      await sleep(random.between(1_500, 3_000));
      ctl.holdRestarts(true);
      try {
        await cluster.etcd.restore(snapshot);
        // Recovery as documented for etcd 3.4: raise the revision above every token issued
        // before clients come back, or a new holder could be issued a token a resource has
        // already accepted from someone else.
        await cluster.bumpRevision(Number(ctl.maxToken()) + 100);
      } finally {
        ctl.holdRestarts(false);
      }
      end(member.name);
      return true;
    }
    case 'partition': {
      const w = await pick(ctl, (w) => w.hold !== undefined);
      if (!w) return false;
      const ms = freezeMs();
      start(w.name, { ms });
      w.setNetwork('stall');
      await sleep(ms);
      w.setNetwork('pass');
      end(w.name);
      return true;
    }
    case 'reset': {
      // Aimed at the moment a waiter times out: its withdraw must get through a reset network.
      const w = await pick(ctl, (w) => dueWithin(w, 200, 5_000) !== undefined);
      if (!w) return false;
      const due = dueWithin(w, 200, 5_000)!;
      await sleep(Math.max(0, due - now() - 30));
      start(w.name);
      w.setNetwork('reset');
      await sleep(random.between(200, 500));
      w.setNetwork('pass');
      end(w.name);
      return true;
    }
    case 'flap': {
      const w = await pick(ctl, (w) => w.hold !== undefined || w.waiting !== undefined);
      if (!w) return false;
      const until = now() + random.between(2_000, 3_000);
      start(w.name);
      while (now() < until && w.alive) {
        w.setNetwork(random.next() < 0.5 ? 'reset' : 'stall');
        await sleep(random.between(50, 250));
        w.setNetwork('pass');
        await sleep(random.between(100, 400));
      }
      w.setNetwork('pass');
      end(w.name);
      return true;
    }
    case 'delay': {
      const ms = random.between(2_000, 4_000);
      const delayMs = random.between(50, 250);
      const targets = ctl.workers();
      start('all', { ms, delayMs });
      for (const w of targets) w.setNetwork('delay', delayMs);
      await sleep(ms);
      for (const w of targets) if (w.alive) w.setNetwork('pass');
      end('all');
      return true;
    }
    case 'compact': {
      // A waiter is cut off while the queue moves on and the history it would resume its watch
      // from is compacted away: when it comes back, its watch is cancelled and must re-read.
      const w = await pick(ctl, (w) => w.waiting !== undefined);
      if (!w) return false;
      start(w.name);
      w.setNetwork('stall');
      await sleep(random.between(400, 700));
      await cluster.compact();
      await sleep(random.between(200, 400));
      w.setNetwork('pass');
      end(w.name);
      return true;
    }
    case 'revoke-lease':
    case 'delete-key': {
      const w = await pick(ctl, (w) => w.hold?.key !== undefined && w.hold.leaseId !== undefined);
      if (!w) return false;
      const hold = w.hold!;
      start(w.name, { token: hold.token });
      if (kind === 'revoke-lease') await cluster.revokeLease(hold.leaseId!);
      else await cluster.deleteKey(hold.key!);
      end(w.name);
      return true;
    }
    default:
      throw new Error(`unknown fault kind ${String(kind)}`);
  }
}

const now = () => performance.timeOrigin + performance.now();

/** A live worker matching `when`, chosen with the run's PRNG; waits up to `seconds`. */
async function pick(
  ctl: NemesisControl,
  when: (w: WorkerProc) => boolean,
  seconds = TARGET_WAIT_MS / 1000,
): Promise<WorkerProc | undefined> {
  return waitUntil(() => {
    const candidates = ctl.workers().filter((w) => w.alive && when(w));
    return candidates.length > 0 ? ctl.random.pick(candidates) : undefined;
  }, seconds * 1000);
}

/** Polls `probe` every 5 ms until it returns a value or `timeoutMs` passes. */
export async function waitUntil<T>(
  probe: () => T | undefined | false,
  timeoutMs: number,
): Promise<T | undefined> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (performance.now() >= deadline) return undefined;
    await sleep(5);
  }
}

/** When the worker's pending acquire times out, if that is between `min` and `max` ms away. */
function dueWithin(w: WorkerProc, min: number, max: number): number | undefined {
  const waiting: (HistoryLine & { timeoutMs?: number }) | undefined = w.waiting;
  if (waiting?.op !== 'acquire' || waiting.timeoutMs === undefined) return undefined;
  const due = waiting.at + waiting.timeoutMs;
  const left = due - now();
  return left >= min && left <= max ? due : undefined;
}
