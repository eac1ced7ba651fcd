/**
 * The nemesis: every fault kind the suite injects, each logged as `fault-start` / `fault-end`
 * lines in the run's history. Targets and durations come from the run's seeded PRNG; faults
 * aimed at a worker wait (bounded) for a worker in the right state (holding between two rounds of
 * writes, holding long enough to meet its deadline, waiting in the queue, releasing) and are
 * skipped if none comes: the runner then tries again, and a run that never got a kind in is
 * flagged by the checker (`coverage`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultKind, HistoryLine } from './check/index.js';
import type { FaultCluster } from './cluster.js';
import { ELECTION_TIMEOUT_MS } from './member.js';
import type { Random } from './prng.js';
import type { Workload, WorkerProc } from './workers.js';

/** Kinds that work on any cluster. */
export const SINGLE_MEMBER_KINDS: readonly FaultKind[] = [
  'pause-holder',
  'kill-holder',
  'kill-mid-acquire',
  'kill-mid-release',
  'pause-member',
  'kill-member',
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
  'clock-skew',
];

/** Kinds that need three members: leaders, quorums, membership and member-to-member links. */
export const CLUSTER_KINDS: readonly FaultKind[] = [
  'pause-leader',
  'kill-leader',
  'partition-member',
  'partition-leader',
  'quorum-loss',
  'replace-member',
  'wipe-member',
  'slow-links',
];

export const FAULT_KINDS: readonly FaultKind[] = [...SINGLE_MEMBER_KINDS, ...CLUSTER_KINDS];

export interface NemesisControl {
  cluster: FaultCluster;
  random: Random;
  seed: number;
  ttlMs: number;
  /** The SDK's deadline for one attempt on one member (the workers' setting). */
  attemptTimeoutMs: number;
  /** Live workers the nemesis may aim at. */
  workers(): WorkerProc[];
  emit(line: Omit<HistoryLine, 'at' | 'process'>): void;
  /** Marks a worker killed on purpose; the runner replaces it. */
  markKilled(worker: WorkerProc): void;
  /** While held, exited workers are not replaced (a restore is under way). */
  holdRestarts(held: boolean): void;
  /** The highest token any worker reported. */
  maxToken(): bigint;
}

const TARGET_WAIT_MS = 10_000;
/** How long a cut-off majority may take to elect: ten elections' worth, for split votes and load. */
const ELECTION_WAIT_MS = 10 * ELECTION_TIMEOUT_MS;

let faultSeq = 0;

/** Injects one fault of `kind`; resolves once it has ended. False when no target came. */
export async function inject(ctl: NemesisControl, kind: FaultKind): Promise<boolean> {
  const id = `f${++faultSeq}`;
  const start = (target: string, extra: Record<string, unknown> = {}) =>
    ctl.emit({ type: 'fault-start', fault: kind, target, id, seed: ctl.seed, ...extra });
  const end = (target: string, extra: Record<string, unknown> = {}) =>
    ctl.emit({ type: 'fault-end', fault: kind, target, id, seed: ctl.seed, ...extra });
  const { random, cluster, ttlMs } = ctl;
  const freezeMs = () => ttlMs + random.between(1_000, 2_000);
  const three = cluster.members.length === 3;
  const ofWorkload =
    (...workloads: Workload[]) =>
    (w: WorkerProc) =>
      workloads.includes(w.workload);

  switch (kind) {
    case 'pause-holder': {
      const w = await pick(ctl, (w) => w.idleHolding());
      if (!w) return false;
      const ms = freezeMs();
      start(w.name, { ms, name: nameOf(w) });
      w.signal('SIGSTOP');
      await sleep(ms);
      w.signal('SIGCONT');
      end(w.name);
      return true;
    }
    case 'stall-loop': {
      const w = await pick(ctl, (w) => w.idleHolding());
      if (!w) return false;
      const ms = freezeMs();
      start(w.name, { ms, name: nameOf(w) });
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
      // A release takes a few milliseconds: watch for one closely.
      const w = await pick(ctl, when, 10, kind === 'kill-mid-release' ? 1 : 5);
      if (!w) return false;
      start(w.name, { name: nameOf(w) });
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
      if (kind.endsWith('leader') && !three) return false;
      const member = kind.endsWith('leader')
        ? await cluster.leader()
        : await cluster.follower(() => random.next());
      if (!member) return false;
      const ms = random.between(1_500, 3_500);
      start(member.slot, { ms });
      if (kind.startsWith('pause')) {
        member.pause();
        await sleep(ms);
        member.resume();
      } else {
        await member.kill();
        await sleep(ms);
        await cluster.startMember(member);
      }
      end(member.slot);
      return true;
    }
    case 'restart-cluster': {
      start('cluster');
      await cluster.restartAll();
      end('cluster');
      return true;
    }
    case 'snapshot-restore': {
      start('cluster');
      const snapshot = await cluster.snapshot();
      // Tokens go on growing after the snapshot; the restore takes the revision back below them.
      await sleep(random.between(1_500, 3_000));
      ctl.holdRestarts(true);
      try {
        await cluster.restore(snapshot);
        // Recovery as documented for etcd 3.4: raise the revision above every token issued
        // before clients come back, or a new holder could be issued a token a resource has
        // already accepted from someone else.
        await cluster.bumpRevision(Number(ctl.maxToken()) + 100);
      } finally {
        ctl.holdRestarts(false);
      }
      end('cluster');
      return true;
    }
    case 'partition': {
      // Aimed at a holder that will still hold when its deadline passes, so the run sees the
      // loss the fault is about.
      const ms = freezeMs();
      const w = await pick(ctl, (w) => w.workload !== 'cron' && w.holdLeftMs() > ms + 500);
      if (!w) return false;
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
      end('all', { delayMs });
      return true;
    }
    case 'slow-links': {
      // One lock worker's links to every member but one slower than an attempt may take, just
      // before it releases: its calls there time out and are retried on the fast member, while
      // the first copies still arrive, late, after the retries (and the worker's next key) have
      // landed. Each copy arrives a whole attempt before its cancel does.
      if (!three) return false;
      const w = await pick(
        ctl,
        (w) => w.workload === 'lock' && w.holdLeftMs() > 0 && w.holdLeftMs() < 300,
      );
      if (!w) return false;
      const fast = random.between(0, cluster.members.length - 1);
      const delayMs = ctl.attemptTimeoutMs * 2 + random.between(500, 1_000);
      const ms = delayMs + ctl.attemptTimeoutMs + random.between(500, 1_000);
      const slow = cluster.members.map((_, i) => i).filter((i) => i !== fast);
      start(w.name, { ms, delayMs, member: cluster.members[fast]!.slot });
      for (const i of slow) w.setNetwork('delay', delayMs, i);
      await sleep(ms);
      for (const i of slow) w.setNetwork('pass', undefined, i);
      end(w.name, { delayMs, member: cluster.members[fast]!.slot });
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
      const w = await pick(
        ctl,
        (w) => w.workload !== 'cron' && w.hold?.key !== undefined && w.hold.leaseId !== undefined,
      );
      if (!w) return false;
      const hold = w.hold!;
      start(w.name, { token: hold.token });
      const timed =
        kind === 'revoke-lease'
          ? await cluster.revokeLease(hold.leaseId!)
          : await cluster.deleteKey(hold.key!);
      // When the deletion was sent and acknowledged: it happened in between.
      end(w.name, { token: hold.token, ...timed });
      return true;
    }
    case 'clock-skew': {
      // A cron replica's wall clock ahead or behind by more than the job's late tolerance.
      const w = await pick(ctl, ofWorkload('cron'));
      if (!w) return false;
      const skewMs = (random.next() < 0.5 ? -1 : 1) * random.between(1_500, 3_000);
      const ms = random.between(3_000, 5_000);
      start(w.name, { skewMs, ms });
      w.command({ cmd: 'skew', ms: skewMs });
      await sleep(ms);
      w.command({ cmd: 'skew', ms: 0 });
      end(w.name, { skewMs });
      return true;
    }
    case 'partition-member':
    case 'partition-leader': {
      // One member cut off from the other two; clients still reach it. A cut-off leader keeps
      // leading (and answering keepalives from its own lease table) until it misses a quorum.
      if (!three) return false;
      const member =
        kind === 'partition-leader'
          ? await cluster.leader()
          : await cluster.follower(() => random.next());
      if (!member) return false;
      const ms = random.between(2_500, 4_000);
      start(member.slot, { ms });
      cluster.partition([[member], cluster.members.filter((m) => m !== member)]);
      const cutAt = now();
      await sleep(ms);
      // The cut lasts until the majority leads itself: on a loaded host its election can outlast
      // the planned window, and a cut healed mid-election tests nothing. etcd's election takes
      // 1-2 election timeouts, more after a split vote; past ELECTION_WAIT_MS it counts as failed.
      const majority = cluster.members.filter((m) => m !== member);
      const leader = await untilResolved(() => cluster.leaderOf(majority), ELECTION_WAIT_MS);
      // Without one, what each member believed, for whoever reads the history.
      const named = leader ? undefined : await cluster.named();
      cluster.heal();
      end(member.slot, {
        leader: leader?.slot ?? 'none',
        heldMs: Math.round(now() - cutAt),
        ...(named && { named }),
      });
      return true;
    }
    case 'quorum-loss': {
      // Every member cut off from every other for longer than the TTL: no leader, no writes, no
      // keepalives; every session must give up by its own deadline.
      if (!three) return false;
      const ms = ttlMs + random.between(1_000, 2_000);
      start('cluster', { ms });
      cluster.partition(cluster.members.map((m) => [m]));
      await sleep(ms);
      const leader = await cluster.leader();
      cluster.heal();
      end('cluster', { leader: leader?.slot ?? 'none' });
      return true;
    }
    case 'replace-member':
    case 'wipe-member': {
      if (!three || !(await cluster.healthy())) return false;
      const member = await cluster.follower(() => random.next());
      start(member.slot, { name: member.name });
      const detail =
        kind === 'replace-member' ? await cluster.replace(member) : await cluster.wipe(member);
      end(member.slot, { detail: detail ?? member.name });
      return true;
    }
    default:
      throw new Error(`unknown fault kind ${String(kind)}`);
  }
}

const now = () => performance.timeOrigin + performance.now();

/** The name the worker holds, waits for or releases: what a fault on it is about. */
const nameOf = (w: WorkerProc): string | undefined =>
  w.hold?.line.name ?? w.waiting?.name ?? [...w.pending.values()].find((l) => l.name)?.name;

/** A live worker matching `when`, chosen with the run's PRNG; waits up to `seconds`. */
async function pick(
  ctl: NemesisControl,
  when: (w: WorkerProc) => boolean,
  seconds = TARGET_WAIT_MS / 1000,
  everyMs = 5,
): Promise<WorkerProc | undefined> {
  return waitUntil(
    () => {
      const candidates = ctl.workers().filter((w) => w.alive && when(w));
      return candidates.length > 0 ? ctl.random.pick(candidates) : undefined;
    },
    seconds * 1000,
    everyMs,
  );
}

/** `waitUntil` for an asynchronous probe, which is never called twice at once. */
async function untilResolved<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 20,
): Promise<T | undefined> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (performance.now() >= deadline) return undefined;
    await sleep(everyMs);
  }
}

/** Polls `probe` every `everyMs` (5) until it returns a value or `timeoutMs` passes. */
export async function waitUntil<T>(
  probe: () => T | undefined | false,
  timeoutMs: number,
  everyMs = 5,
): Promise<T | undefined> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (performance.now() >= deadline) return undefined;
    await sleep(everyMs);
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
