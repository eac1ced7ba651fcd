import type { CheckContext } from './context.js';
import type { Violation } from './types.js';

const DEFAULT_CALL_TIMEOUT_MS = 5_000;

/**
 * Liveness of cron: every fire runs at least once when a live replica was up for it. A replica
 * is up for fire F when it had its job scheduled a period before F, lived past F + the job's late
 * tolerance, could run within that tolerance of F (measured lag), and no fault touched it, nor the
 * cluster, from a TTL before F to a TTL after (a fault on another replica does not excuse it:
 * cron is meant to survive one replica's skew, freeze or death). F is then done if some replica
 * claimed it (or was told another had); a skip for overlap counts only while a run was really
 * going (or a runner had just been hit by a fault: its marker lives until its lease expires).
 */
export function checkCronFires(context: CheckContext): Violation[] {
  const { model, config } = context;
  const cron = config.cron;
  if (!cron) return [];
  const replicas = [...model.workloadOf].filter(([, w]) => w === 'cron').map(([p]) => p);
  if (replicas.length === 0) return [];
  const ttlMs = config.ttlSeconds * 1000;
  const callMs = config.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const workers = new Set(model.workloadOf.keys());
  const cronProcesses = new Set(replicas);
  const skewMs = Math.max(0, ...model.faults.map((f) => Math.abs(Number(f.detail.skewMs ?? 0))));

  const touched = (from: number, to: number, byTarget: (target: string) => boolean) =>
    model.faults.some((f) => f.start <= to && (f.end ?? model.endAt) >= from && byTarget(f.target));
  const upFor = (replica: string, fireMs: number): boolean => {
    const ready = (model.readyAt.get(replica) ?? []).some((at) => at <= fireMs - cron.everyMs);
    const last = model.stoppingAt.get(replica) ?? model.lastAtByProcess.get(replica) ?? 0;
    if (!ready || last < fireMs + cron.lateToleranceMs) return false;
    const around = [fireMs - cron.everyMs - skewMs, fireMs + cron.lateToleranceMs + ttlMs] as const;
    if (touched(around[0], around[1], (t) => t === replica)) return false;
    // A replica whose loop could not run until past the late tolerance may miss it.
    if (context.freeAfter(replica, fireMs) - fireMs >= cron.lateToleranceMs) return false;
    return true;
  };
  const clusterQuiet = (fireMs: number) =>
    !touched(
      fireMs - ttlMs - cron.everyMs,
      fireMs + cron.lateToleranceMs + ttlMs,
      (t) => !workers.has(t),
    );

  const events = new Map<number, typeof model.cronEvents>();
  for (const line of model.cronEvents) {
    if (line.fireTime === undefined) continue;
    const fireMs = Date.parse(line.fireTime);
    let list = events.get(fireMs);
    if (!list) events.set(fireMs, (list = []));
    list.push(line);
  }
  const ran = new Set(model.holds.filter((h) => h.kind === 'cron').map((h) => h.fireMs));
  const runs = model.holds.filter((h) => h.kind === 'cron');
  const overlapExcused = (skipAt: number) =>
    runs.some((r) => r.start <= skipAt && r.end >= skipAt - 2 * callMs) ||
    touched(skipAt - ttlMs - callMs, skipAt, (t) => cronProcesses.has(t));

  const violations: Violation[] = [];
  const first = Math.ceil(model.startAt / cron.everyMs) * cron.everyMs;
  for (let fireMs = first; fireMs <= model.endAt; fireMs += cron.everyMs) {
    const up = replicas.filter((r) => upFor(r, fireMs));
    if (up.length === 0 || !clusterQuiet(fireMs)) continue;
    const seen = events.get(fireMs) ?? [];
    if (ran.has(fireMs)) continue;
    if (seen.some((e) => e.op === 'cron-claim' || e.reason === 'claimed-elsewhere')) continue;
    if (seen.some((e) => e.reason === 'overlap' && overlapExcused(e.at))) continue;
    const fire = new Date(fireMs).toISOString();
    const said = seen.length
      ? `; they said: ${seen.map((e) => `${e.process} ${e.reason ?? e.op}`).join(', ')}`
      : '; no replica said anything about it';
    violations.push({
      rule: 'liveness',
      kind: 'cron-fire',
      at: fireMs,
      message: `cron fire ${fire} never ran although ${up.join(', ')} ${up.length === 1 ? 'was' : 'were'} up for it${said}`,
    });
  }
  return violations;
}
