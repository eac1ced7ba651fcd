import type { CheckContext } from './context.js';
import type { FaultWindow, Operation } from './model.js';
import type { CheckConfig, Violation } from './types.js';

/**
 * - takeover: a holder died or froze; measured from the fault's start to the first acquire or
 *   campaign by another process of the name the target held or wanted (TTL + 1 s).
 * - recovery: measured from the fault's end, for each workload that was asking, to its first
 *   successful acquire, campaign or write (leader/member faults: election timeout + 1 s; network
 *   faults: 1 s; cluster restart or restore: TTL + 2 s; the others below): one workload's
 *   progress does not vouch for another's. Cron runs only at its fire times, so its recovery is
 *   reported, not judged.
 * - lock-free: after a cluster restart or restore, the first acquire or campaign (TTL + 2 s).
 */
export type Measure = 'takeover' | 'recovery' | 'lock-free';

export interface LatencySample {
  faultId: string;
  /** For recovery: the workload measured. */
  workload?: string;
  fault: string;
  target: string;
  measure: Measure;
  /** The time the latency is measured from (fault start or end). */
  fromAt: number;
  boundMs: number;
  latencyMs?: number;
  /**
   * ok / late: measured; missing: demand but no success although the history runs past the
   * bound; unobserved: the history ends before the bound; no-demand: nobody asked in time.
   */
  status: 'ok' | 'late' | 'missing' | 'unobserved' | 'no-demand';
}

const HOLDER_FAULTS = new Set([
  'pause-holder',
  'kill-holder',
  'kill-mid-acquire',
  'kill-mid-release',
  'stall-loop',
]);
const FREEZES = new Set(['pause-holder', 'stall-loop']);
const MEMBER_FAULTS = new Set([
  'pause-member',
  'kill-member',
  'pause-leader',
  'kill-leader',
  'replace-member',
  'wipe-member',
]);
/** A healed member's higher term forces one more election (etcd 3.4 runs without pre-vote). */
const MEMBER_PARTITIONS = new Set(['partition-member', 'partition-leader']);
const RESTART_FAULTS = new Set(['restart-cluster', 'snapshot-restore']);
const PROGRESS = new Set(['acquire', 'campaign', 'write', 'cron-run']);
const GRANTS = new Set(['acquire', 'campaign']);

interface Plan {
  measure: Measure;
  from: 'start' | 'end';
  boundMs: number;
}

/** The bounds each fault's recovery is held to, from the run's config. */
export function plansFor(fault: FaultWindow, config: CheckConfig): Plan[] {
  const ttlMs = config.ttlSeconds * 1000;
  const override = (key: string, fallback: number): number => config.boundsMs?.[key] ?? fallback;
  const kind = fault.fault;
  if (HOLDER_FAULTS.has(kind)) {
    // A freeze shorter than the TTL leaves the holder its lock: nothing to take over.
    const short = FREEZES.has(kind) && fault.end !== undefined && fault.end - fault.start < ttlMs;
    if (!short)
      return [{ measure: 'takeover', from: 'start', boundMs: override(kind, ttlMs + 1000) }];
    return [{ measure: 'recovery', from: 'end', boundMs: override(`${kind}:short`, 1000) }];
  }
  if (MEMBER_FAULTS.has(kind)) {
    return [
      {
        measure: 'recovery',
        from: 'end',
        boundMs: override(kind, config.electionTimeoutMs + 1000),
      },
    ];
  }
  const attemptMs = config.attemptTimeoutMs ?? 1000;
  const electionMs = config.electionTimeoutMs;
  // A watch on a member that was cut off hears nothing new (the member has no new entries, yet
  // answers progress requests): the client's periodic re-read is what corrects it.
  const recheckMs = config.recheckIntervalMs ?? 5000;
  if (MEMBER_PARTITIONS.has(kind)) {
    // Randomised election timeouts run up to twice the setting.
    return [
      {
        measure: 'recovery',
        from: 'end',
        boundMs: override(kind, 2 * electionMs + attemptMs + recheckMs + 1000),
      },
    ];
  }
  if (kind === 'quorum-loss') {
    // Every session gave up by its deadline; an old holder's key may live on with its lease,
    // which the new leader (elected within two election timeouts) refreshes by a TTL and one
    // more election timeout, unless the holder's own revoke gets through first.
    const boundMs = ttlMs + 3 * electionMs + attemptMs + recheckMs;
    return [{ measure: 'recovery', from: 'end', boundMs: override(kind, boundMs) }];
  }
  if (kind === 'slow-links') {
    // A call sent on a slow link just before the fault ended still waits out its delay.
    const delayMs = Number(fault.detail.delayMs ?? 0);
    return [
      { measure: 'recovery', from: 'end', boundMs: override(kind, delayMs + attemptMs + 1000) },
    ];
  }
  if (RESTART_FAULTS.has(kind)) {
    // Keys come back with their leases, at a full TTL; a session lost to the change of cluster
    // does not revoke its lease, so a lock held in the snapshot is free only once it expires.
    return [
      { measure: 'recovery', from: 'end', boundMs: override(kind, ttlMs + 2000) },
      { measure: 'lock-free', from: 'end', boundMs: override(`${kind}:lock-free`, ttlMs + 2000) },
    ];
  }
  return [{ measure: 'recovery', from: 'end', boundMs: override(kind, 1000) }];
}

export interface LivenessResult {
  samples: LatencySample[];
  violations: Violation[];
}

export function checkLiveness(context: CheckContext): LivenessResult {
  const samples: LatencySample[] = [];
  const violations: Violation[] = [];
  for (const fault of context.model.faults) {
    for (const plan of plansFor(fault, context.config)) {
      const fromAt = plan.from === 'start' ? fault.start : fault.end;
      if (fromAt === undefined) continue; // the run ended during the fault
      const workloads: (string | undefined)[] =
        plan.measure === 'recovery' ? workloadsOf(context) : [undefined];
      for (const workload of workloads) {
        const sample = measure(context, fault, plan, fromAt, workload);
        samples.push(sample);
        if (sample.status !== 'late' && sample.status !== 'missing') continue;
        if (workload === 'cron') continue; // reported, not judged: see above
        const seen =
          sample.status === 'late'
            ? `came after ${fmt(sample.latencyMs ?? 0)}`
            : `never came (history runs ${fmt(context.model.endAt - fromAt)} past it)`;
        violations.push({
          rule: 'liveness',
          kind: plan.measure,
          at: fromAt,
          message:
            `${fault.fault} ${fault.id} (target ${fault.target || '-'}): ${plan.measure}` +
            `${workload ? ` of the ${workload} workload` : ''} from the ` +
            `fault's ${plan.from} ${seen}; bound ${fmt(plan.boundMs)}`,
        });
      }
    }
  }
  return { samples, violations };
}

function measure(
  context: CheckContext,
  fault: FaultWindow,
  plan: Plan,
  fromAt: number,
  workload?: string,
): LatencySample {
  const relevant = relevantOps(context, fault, plan).filter(
    (o) => workload === undefined || o.workload === workload,
  );
  const success = relevant
    .filter((o) => o.type === 'ok' && o.doneAt !== undefined && o.doneAt > fromAt)
    .sort((a, b) => (a.doneAt ?? 0) - (b.doneAt ?? 0))[0];
  const boundMs =
    plan.measure === 'takeover'
      ? takeoverBound(context, fault, plan)
      : plan.measure === 'lock-free'
        ? lockFreeBound(context, fromAt, plan)
        : plan.boundMs;
  const base = {
    faultId: fault.id,
    ...(workload === undefined ? {} : { workload }),
    fault: fault.fault,
    target: fault.target,
    measure: plan.measure,
    fromAt,
    boundMs,
  };
  const limit = fromAt + boundMs;
  const demand = relevant.some(
    (o) => o.invokeAt <= limit && (o.doneAt === undefined || o.doneAt > fromAt),
  );
  if (success?.doneAt !== undefined) {
    const latencyMs = success.doneAt - fromAt;
    if (latencyMs <= boundMs) return { ...base, latencyMs, status: 'ok' };
    return { ...base, latencyMs, status: demand ? 'late' : 'no-demand' };
  }
  if (context.model.endAt < limit) return { ...base, status: 'unobserved' };
  return { ...base, status: demand ? 'missing' : 'no-demand' };
}

/**
 * A takeover waits for the target's key to go (its lease: the TTL) and also for anyone else who
 * held the name when the fault began (a waiter killed behind a long hold): the bound runs from
 * the later of the two, with the same slack.
 */
function takeoverBound(context: CheckContext, fault: FaultWindow, plan: Plan): number {
  const slackMs = plan.boundMs - context.config.ttlSeconds * 1000;
  const names = new Set(
    context.model.operations
      .filter((o) => o.process === fault.target && o.invokeAt <= fault.start && o.name)
      .map((o) => o.name),
  );
  let busyUntil = fault.start;
  for (const hold of context.model.holds) {
    if (hold.process === fault.target || !names.has(hold.name)) continue;
    if (hold.start <= fault.start && hold.end > fault.start)
      busyUntil = Math.max(busyUntil, hold.end);
  }
  return Math.max(plan.boundMs, busyUntil - fault.start + slackMs);
}

/**
 * After a cluster restart or restore, a lock held through it by a live holder (a long hold whose
 * session survived) is not wedged: the first grant may wait for that hold to end, so the bound
 * runs from the latest end of a hold that was believed at the fault's end, with the same slack.
 */
function lockFreeBound(context: CheckContext, fromAt: number, plan: Plan): number {
  const slackMs = plan.boundMs - context.config.ttlSeconds * 1000;
  let busyUntil = fromAt;
  for (const hold of context.model.holds) {
    if (hold.start <= fromAt && hold.end > fromAt) busyUntil = Math.max(busyUntil, hold.end);
  }
  return Math.max(plan.boundMs, busyUntil - fromAt + slackMs);
}

/** The workloads whose operations the history holds, in a stable order. */
function workloadsOf(context: CheckContext): string[] {
  return [...new Set(context.model.operations.map((o) => o.workload))].sort();
}

function relevantOps(context: CheckContext, fault: FaultWindow, plan: Plan): Operation[] {
  const { operations } = context.model;
  if (plan.measure === 'recovery') return operations.filter((o) => PROGRESS.has(o.op));
  if (plan.measure === 'lock-free') return operations.filter((o) => GRANTS.has(o.op));
  // Takeover: the names the target held or was working on when the fault began.
  const names = new Set<string>();
  for (const hold of context.model.holds) {
    if (hold.process === fault.target && hold.start <= fault.start && hold.end >= fault.start) {
      names.add(hold.name);
    }
  }
  for (const o of operations) {
    if (
      o.process === fault.target &&
      o.invokeAt <= fault.start &&
      (o.doneAt === undefined || o.doneAt >= fault.start) &&
      o.name
    ) {
      names.add(o.name);
    }
  }
  return operations.filter(
    (o) =>
      GRANTS.has(o.op) && o.process !== fault.target && (names.size === 0 || names.has(o.name)),
  );
}

function fmt(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
