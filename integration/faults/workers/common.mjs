// What every fault-suite worker shares: its configuration (one JSON object in FAULTS_CONFIG),
// the history lines it prints on stdout (one JSON object per event, the format the checker
// reads), the resources it writes to (fenced or, for the negative control, not), and the stdin
// commands the runner sends (`stall`, `stop`).
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, isClusterChangedError, isLeaseholdError } from '@leasehold/core';
import { isStaleTokenError } from '@leasehold/fence';

/** @type {{ process: string, workload: string, name: string, endpoints: string[], lockPrefix: string, electionPrefix: string, cronPrefix: string, ttlSeconds: number, callTimeoutMs: number, recheckIntervalMs: number, fenced: boolean, seed: number, holdMs: [number, number], longHoldMs: [number, number], longHoldShare: number, roundGapMs: [number, number], acquireTimeoutMs: [number, number], cron: { everyMs: number, lateToleranceMs: number }, resources: { memory?: string, postgres?: { url: string, fenceTable: string, logTable: string }, redis?: { url: string, prefix: string } } }} */
export const config = JSON.parse(process.env.FAULTS_CONFIG ?? '{}');

export const now = () => performance.timeOrigin + performance.now();

// How late this process's timers run, measured by a ticker every LAG_TICK_MS: each tick later
// than one tick period is a `lag` line (`ms`: how late it ran), so the checker knows how long
// this process could not run any timer, the SDK's included. Lateness below one period is within
// the measurement's resolution, which the checker adds to every bound that uses lag.
export const LAG_TICK_MS = 20;
let expected = performance.now() + LAG_TICK_MS;
setInterval(() => {
  const t = performance.now();
  const late = t - expected;
  expected = t + LAG_TICK_MS;
  if (late >= LAG_TICK_MS) emit({ type: 'info', op: 'lag', ms: Math.round(late) });
}, LAG_TICK_MS).unref();
/** How overdue the ticker is right now: a block that just ended and no tick has measured yet. */
export const lagNow = () => Math.max(0, Math.round(performance.now() - expected));

let lineSeq = 0;
/** Prints one history line; `at` is taken now, so call it at the moment of the event. */
export function emit(line) {
  const full = { at: now(), process: config.process, pid: process.pid, seq: ++lineSeq, ...line };
  process.stdout.write(`${JSON.stringify(full)}\n`);
}

let opSeq = 0;
export const nextId = () => ++opSeq;

/** mulberry32: a small seeded PRNG, so a worker's choices replay with the run's seed. */
export function prng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, between: ([lo, hi]) => lo + Math.floor(next() * (hi - lo + 1)) };
}
export const random = prng(config.seed ?? 1);

/** The SDK's own reason on a loss error (`expired-in-queue`, `deleted`, `deadline`…), if any. */
export const detailOf = (err) => (typeof err?.reason === 'string' ? err.reason : undefined);

/** The `reason` of a `fail` line for an error. */
export function reasonOf(err) {
  if (isStaleTokenError(err)) return 'stale';
  if (stopSignal.aborted && err === stopSignal.reason) return 'aborted';
  if (err?.code === 'LOCK_TIMEOUT' || err?.code === 'CAMPAIGN_TIMEOUT') return 'timeout';
  if (err?.name === 'AbortError' || err?.code === 'ABORT_ERR') return 'aborted';
  if (isLeaseholdError(err)) return `error:${err.code}`;
  return `error:${err?.code ?? err?.name ?? 'unknown'}`;
}

const stop = new AbortController();
/** Stops the workload, once, and says so: a cron replica claims nothing after this line. */
function stopping(why) {
  if (stop.signal.aborted) return;
  emit({ type: 'info', op: 'stopping', workload: config.workload, reason: why });
  stop.abort(new Error(why));
}
/** Aborts when the runner asks the worker to stop (a `stop` command or stdin closing). */
export const stopSignal = stop.signal;

let clusterChanged = false;
let reconnectAllowed;
const reconnectGiven = new Promise((resolve) => (reconnectAllowed = resolve));

/** Notes a `ClusterChangedError` (a snapshot restore): the workload then reconnects. */
export function noteClusterChange(err) {
  if (clusterChanged) return;
  if (!isClusterChangedError(err) && !isClusterChangedError(err?.cause)) return;
  clusterChanged = true;
  emit({ type: 'info', op: 'cluster-changed', workload: config.workload });
}

export const clusterHasChanged = () => clusterChanged;

/**
 * After a change of cluster, closes `client` and connects afresh once the runner allows it (as an
 * operator restarts clients after a restore, once the revision is above every token issued).
 */
export async function reconnect(client) {
  await Promise.race([client.close().catch(() => {}), sleep(3_000)]);
  await Promise.race([reconnectGiven, new Promise((r) => stopSignal.addEventListener('abort', r))]);
  if (stopSignal.aborted) return client;
  for (;;) {
    try {
      const fresh = await connect(connectOptions());
      fresh.onCleanupError(() => {});
      probed = fresh;
      clusterChanged = false;
      emit({ type: 'info', op: 'reconnected', workload: config.workload });
      return fresh;
    } catch (err) {
      if (stopSignal.aborted) throw err;
      await pause(200);
    }
  }
}

const handlers = new Map();
/** Handles a workload's own stdin command (`skew` for cron). */
export const onCommand = (cmd, fn) => handlers.set(cmd, fn);

/**
 * Commands from the runner, one JSON line each: `stall` blocks the event loop for `ms` (a long
 * synchronous task: no timer, no socket, no keepalive runs meanwhile), `stop` ends the workload.
 */
export function listen() {
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const msg = JSON.parse(line);
    if (msg.cmd === 'stall') {
      emit({ type: 'info', op: 'stall', phase: 'start', ms: msg.ms });
      const end = performance.now() + msg.ms;
      while (performance.now() < end) {
        // busy: the event loop is blocked on purpose
      }
      emit({ type: 'info', op: 'stall', phase: 'end', ms: msg.ms });
    } else if (handlers.has(msg.cmd)) {
      handlers.get(msg.cmd)(msg);
    } else if (msg.cmd === 'reconnect') {
      reconnectAllowed();
    } else if (msg.cmd === 'stop') {
      stopping('stop');
    }
  });
  rl.on('close', () => stopping('stdin closed'));
}

/** The session's local deadline as it is (raw: kept once lost), on the history's clock. */
export const deadlineOf = (session) => performance.timeOrigin + session.deadlineAtMs;

/**
 * Emits the hold's raw local deadline whenever it moves (polled every 100 ms) until the returned
 * stop is called. It reads `deadlineAtMs`, which checks nothing: tracking is not a read of the
 * hold, so it never trips a loss itself.
 */
export function trackDeadline(session, token) {
  let last = 0;
  const tick = () => {
    const deadlineAt = deadlineOf(session);
    if (deadlineAt === last) return;
    last = deadlineAt;
    emit({
      type: 'info',
      op: 'deadline',
      workload: config.workload,
      name: config.name,
      token,
      deadlineAt,
    });
  };
  tick();
  const timer = setInterval(tick, 100);
  return () => clearInterval(timer);
}

/**
 * Reads whether the hold is still held (`isHeld()`: the SDK compares its clock with the deadline
 * on this read) and says so in a `check` line with the time the read began and the raw deadline
 * after it, which the checker holds to: no "held" once the clock had passed the deadline.
 */
export function check(token, session, isHeld) {
  const readAt = now();
  const held = isHeld();
  emit({
    type: 'info',
    op: 'check',
    workload: config.workload,
    name: config.name,
    token,
    held,
    readAt,
    deadlineAt: deadlineOf(session),
  });
  return held;
}

/**
 * How long this hold is kept: short (a few hundred ms) or, for a share of holds, several TTLs,
 * so some holds meet partitions and deadlines while they last.
 */
export function planHold() {
  const long = random.next() < config.longHoldShare;
  return { long, ms: random.between(long ? config.longHoldMs : config.holdMs) };
}

/**
 * The writes of one hold: rounds until `plan.ms` has passed (at least two), the even ones reading
 * the hold first (a `check` line; when it says lost the hold ends), the odd ones not, as code that
 * checked once per round trip would not: a holder paused or cut off between rounds sends zombie
 * writes that only the resource can refuse. The loss signal (`ended`) is heard at the start of
 * each reading round, not in between, for the same reason. Returns once done.
 */
export async function holdRounds(resources, token, session, isHeld, plan, ended) {
  const until = now() + plan.ms;
  for (let round = 0; !stopSignal.aborted; round++) {
    const checked = round % 2 === 0 && config.fenced;
    if (checked && ended.aborted) return;
    if (!(await writeAll(resources, token, session, checked ? isHeld : undefined))) return;
    if (round >= 1 && now() >= until) return;
    await pause(plan.long ? random.between(config.roundGapMs) : plan.ms);
  }
}

let writeSeq = 0;

/**
 * Writes once to every resource under `token` (fenced unless the run is the negative control).
 * With `isHeld`, the round first reads the hold (a `check` line) and, if it is lost, every write
 * is refused locally (a zombie the SDK prevented); without it the writes go out whatever the
 * hold's state, and only the resource can refuse them. Each invoke carries the raw deadline.
 */
export async function writeAll(resources, token, session, isHeld) {
  const held = isHeld ? check(token, session, isHeld) : true;
  for (const [resource, write] of Object.entries(resources.writers)) {
    const id = nextId();
    const writeId = `${config.process}-${++writeSeq}`;
    const base = {
      op: 'write',
      id,
      workload: config.workload,
      name: config.name,
      token,
      resource,
      writeId,
    };
    emit({ type: 'invoke', ...base, deadlineAt: deadlineOf(session) });
    if (!held) {
      emit({ type: 'fail', ...base, reason: 'lost' });
      continue;
    }
    try {
      await write({ name: config.name, token, writeId, process: config.process });
      emit({ type: 'ok', ...base });
    } catch (err) {
      if (isStaleTokenError(err)) emit({ type: 'fail', ...base, reason: 'stale' });
      else
        emit({
          type: 'info',
          ...base,
          reason: reasonOf(err),
          message: String(err?.message ?? err),
        });
    }
  }
  return held;
}

const WRITE_TIMEOUT_MS = 3_000;

/** Clients of the run's resources: `writers[resource](entry)` and `close()`. */
export async function openResources() {
  const writers = {};
  const closers = [];
  const { memory, postgres, redis } = config.resources;
  if (memory) {
    writers.memory = async (entry) => {
      const res = await fetch(`${memory}/write`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...entry, fenced: config.fenced }),
        signal: AbortSignal.timeout(WRITE_TIMEOUT_MS),
      });
      const body = await res.json();
      if (body.stale) {
        const { StaleTokenError } = await import('@leasehold/fence');
        throw new StaleTokenError(entry.name, BigInt(entry.token), BigInt(body.highest));
      }
      if (!body.ok) throw new Error(`memory resource: ${JSON.stringify(body)}`);
    };
  }
  if (postgres) {
    const { default: pg } = await import('pg');
    const { withFence } = await import('@leasehold/fence/postgres');
    const pool = new pg.Pool({
      connectionString: postgres.url,
      max: 2,
      statement_timeout: WRITE_TIMEOUT_MS,
    });
    pool.on('error', () => {});
    const insert = `INSERT INTO ${postgres.logTable} (name, token, write_id, process) VALUES ($1, $2::int8, $3, $4)`;
    const args = (e) => [e.name, e.token, e.writeId, e.process];
    writers.postgres = config.fenced
      ? (e) =>
          withFence(pool, { resource: e.name, token: e.token, table: postgres.fenceTable }, (tx) =>
            tx.query(insert, args(e)),
          )
      : (e) => pool.query(insert, args(e));
    closers.push(() => pool.end());
  }
  if (redis) {
    const { Redis } = await import('ioredis');
    const { fencedExec, safeRedisOptions } = await import('@leasehold/fence/redis');
    const client = new Redis(redis.url, { ...safeRedisOptions, commandTimeout: WRITE_TIMEOUT_MS });
    client.on('error', () => {});
    const logKey = `${redis.prefix}log`;
    const valueKey = (name) => `${redis.prefix}{${name}}:value`;
    const record = (e) =>
      JSON.stringify({ name: e.name, token: e.token, writeId: e.writeId, process: e.process });
    writers.redis = config.fenced
      ? // The value and the log entry are written by the fence's own script, so the log is in
        // commit order and holds exactly the writes the fence accepted.
        (e) =>
          fencedExec(client, {
            fenceKey: `${redis.prefix}{${e.name}}:fence`,
            token: e.token,
            resource: e.name,
            commands: [
              ['HSET', valueKey(e.name), 'value', e.writeId, 'token', e.token],
              ['RPUSH', logKey, record(e)],
            ],
          })
      : (e) =>
          client
            .multi()
            .hset(valueKey(e.name), 'value', e.writeId, 'token', e.token)
            .rpush(logKey, record(e))
            .exec();
    closers.push(() => client.quit().catch(() => client.disconnect()));
  }
  return {
    writers,
    close: () => Promise.allSettled(closers.map((close) => close())),
  };
}

/** Connect options every workload uses: short TTL, short call deadlines, the run's prefixes. */
export function connectOptions() {
  return {
    endpoints: config.endpoints,
    lockPrefix: config.lockPrefix,
    electionPrefix: config.electionPrefix,
    callTimeoutMs: config.callTimeoutMs,
    attemptTimeoutMs: config.attemptTimeoutMs,
    dialTimeoutMs: 10_000,
    recheckIntervalMs: config.recheckIntervalMs,
    session: { ttlSeconds: config.ttlSeconds },
  };
}

/**
 * Starts a worker: hears the runner's commands, opens the resources and connects. Clean-up
 * failures are the SDK's business during faults: listened to, so they print no warnings.
 */
export async function start() {
  listen();
  const resources = await openResources();
  const client = await connect(connectOptions());
  client.onCleanupError(() => {});
  probed = client;
  await probeRtt();
  void probeEvery(RTT_PROBE_MS);
  return { resources, client };
}

// This process's own round trip to etcd (a read through its client: its proxy, its connection,
// its event loop), measured every RTT_PROBE_MS and printed as `rtt` lines: how long news from etcd
// (a watch event) takes to reach this process, for the checker's deletion bound.
const RTT_PROBE_MS = 500;
let probed;
async function probeRtt() {
  const t0 = now();
  try {
    await probed.holder(config.name);
  } catch {
    // unanswered within the call deadline: the sample is still a lower bound
  }
  emit({ type: 'info', op: 'rtt', ms: Math.round((now() - t0) * 10) / 10 });
}
async function probeEvery(ms) {
  while (!stopSignal.aborted) {
    await pause(ms);
    if (!stopSignal.aborted && !clusterChanged) await probeRtt();
  }
}

/** A hold granted: its token, raw local deadline, key, lease and planned length. */
export function emitGranted(op, id, token, hold, plan) {
  emit({
    type: 'ok',
    op,
    id,
    workload: config.workload,
    name: config.name,
    token,
    deadlineAt: deadlineOf(hold.session),
    key: hold.key,
    leaseId: hold.session.leaseId.toString(16),
    ...(plan && { holdMs: plan.ms }),
  });
}

/**
 * A hold's loss signal fired (`err` may be undefined), with the raw deadline then and how
 * overdue this process's timers are; a change of cluster is noted too.
 */
export function emitLost(token, err, session) {
  emit({
    type: 'info',
    op: 'lost',
    workload: config.workload,
    name: config.name,
    token,
    reason: err?.code,
    detail: err?.reason,
    ...(session && { deadlineAt: deadlineOf(session) }),
    lagNow: lagNow(),
  });
  noteClusterChange(err);
}

/** Sleeps unless the workload is stopping (or `also` aborts). */
export const pause = (ms, also) =>
  sleep(ms, undefined, { signal: also ? AbortSignal.any([stopSignal, also]) : stopSignal }).catch(
    () => {},
  );

/** Ends the process once the workload is done, even if a handle would keep it alive. */
export async function finish(client, resources) {
  const deadline = setTimeout(() => process.exit(0), 5_000);
  deadline.unref();
  await client.close().catch(() => {});
  await resources.close();
  emit({ type: 'info', op: 'exit', workload: config.workload, reason: 'stopped' });
  process.exit(0);
}
