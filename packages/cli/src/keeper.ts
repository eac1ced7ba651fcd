/**
 * The keeper: a small process between `leasehold` and the command it runs, so that the command
 * is stopped on time even when `leasehold` itself cannot act.
 *
 * `leasehold` holds the lease and tells the keeper, over an IPC channel, the local deadline of
 * its session several times per keepalive interval (every message is also a sign of life). The
 * keeper stops the command (SIGTERM to its process group, SIGKILL after the grace period) when:
 * - `leasehold` says the lock or leadership is lost: SIGTERM at once, SIGKILL after the grace;
 * - `leasehold` falls silent (frozen by SIGSTOP, a stalled event loop): SIGTERM at the deadline
 *   minus the grace (at once if that has passed), SIGKILL at the deadline, so that nothing of
 *   the command runs when etcd can expire the lease;
 * - the channel closes: `leasehold` died (SIGKILL, a crash) and will never release or renew:
 *   SIGTERM at once, SIGKILL after the grace or at the deadline, whichever comes first;
 * - the deadline passes while `leasehold` is still heard (it is about to report the loss).
 * With a grace of 0, or when the SIGKILL is due already, the keeper sends SIGKILL alone.
 *
 * Deadlines are on CLOCK_MONOTONIC (`process.hrtime`), which is one clock for every process on
 * the machine. The keeper imports nothing of the SDK, so it starts in a few tens of ms.
 *
 * The command runs in a process group of its own (a new session), so that a lost lock stops
 * every process the command started, not just the first. Terminal signals therefore reach it
 * only through `leasehold`, which forwards them exactly once; the keeper ignores them itself.
 * When the group's leader exits during a stop (a shell wrapper), the rest of the group keeps
 * what is left of its grace before the SIGKILL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { groupAlive, groupGone } from './group.js';
import type { KeeperReport, KeeperRequest, StopCause } from './supervise.js';

const monoMs = () => Number(process.hrtime.bigint()) / 1e6;

/** How long the keeper waits for a SIGKILLed group to be gone before it reports the exit. */
const KILL_WAIT_MS = 2_000;

let child: ChildProcess | undefined;
let exited = false;
let stopping: StopCause | undefined;
let graceMs = 0;
/** No message from leasehold for this long: it is frozen or stalled. */
let silenceMs = Infinity;
let heardAt = monoMs();
let deadlineTimer: NodeJS.Timeout | undefined;
let deadlineAt = Infinity;
/** When the group gets SIGKILL, once stopping. */
let killAt = Infinity;

// Forwarded by leasehold; a terminal's Ctrl-C or Ctrl-Z must not stop the keeper itself (a
// stopped keeper could not enforce the deadline while the command runs on).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU'] as const) {
  process.on(signal, () => {});
}

function report(message: KeeperReport, then?: () => void): void {
  if (!process.connected) return then?.();
  try {
    process.send!(message, undefined, {}, () => then?.());
  } catch {
    then?.();
  }
}

/** Signals the command's whole process group (it leads one: it was spawned detached). */
function signalGroup(signal: NodeJS.Signals): void {
  const pid = child?.pid;
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is gone (every member exited): nothing to signal.
  }
}

/** Stops the command: SIGTERM now, SIGKILL at `killBy` (at once if that has come). */
function stop(cause: StopCause, killBy: number): void {
  if (stopping !== undefined || exited || child?.pid === undefined) return;
  stopping = cause;
  clearTimeout(deadlineTimer);
  const now = monoMs();
  killAt = Math.max(now, graceMs === 0 ? now : killBy);
  const killInMs = Math.round(killAt - now);
  report({ type: 'stopping', cause, killInMs });
  if (killInMs <= 0) return signalGroup('SIGKILL');
  signalGroup('SIGTERM');
  setTimeout(() => signalGroup('SIGKILL'), killInMs).unref();
}

/** Acts on the deadline, or sets a timer for the next moment it may have to. */
function check(): void {
  clearTimeout(deadlineTimer);
  if (stopping !== undefined || exited) return;
  const now = monoMs();
  const silent = now - heardAt >= silenceMs;
  // Nobody will act for leasehold: the SIGKILL must land by the deadline.
  if (silent && now >= deadlineAt - graceMs) return stop('deadline', deadlineAt);
  if (now >= deadlineAt) return stop('deadline', now + graceMs);
  const next = silent
    ? deadlineAt - graceMs
    : Math.min(deadlineAt, Math.max(deadlineAt - graceMs, heardAt + silenceMs));
  deadlineTimer = setTimeout(check, Math.min(Math.max(1, next - now), 2 ** 31 - 1));
}

function heard(at: number): void {
  heardAt = monoMs();
  deadlineAt = at;
  if (child?.pid !== undefined) check();
}

function start(request: Extract<KeeperRequest, { type: 'start' }>): void {
  graceMs = request.graceMs;
  silenceMs = request.silenceMs;
  deadlineAt = request.deadlineAt;
  heardAt = monoMs();
  child = spawn(request.file, request.args, {
    stdio: 'inherit',
    env: request.env,
    detached: true,
  });
  child.once('error', (err: NodeJS.ErrnoException) => {
    if (child?.pid !== undefined) return; // an error after the spawn is reported by 'exit'
    exited = true;
    report({ type: 'spawn-error', code: err.code ?? 'UNKNOWN', message: err.message }, () =>
      process.exit(0),
    );
  });
  child.once('spawn', () => {
    report({ type: 'started', pid: child!.pid! });
    check();
  });
  child.once('exit', (code, signal) => {
    exited = true;
    clearTimeout(deadlineTimer);
    const done = (lingering: boolean) =>
      report({ type: 'exit', code, signal, stopped: stopping, lingering }, () => process.exit(0));
    if (stopping === undefined) return done(false);
    // After a loss nothing of the command may outlive it. The rest of its group (the leader
    // may be a shell wrapper) keeps what is left of its grace, then gets SIGKILL.
    const pgid = child!.pid!;
    void groupGone(pgid, killAt)
      .then(async (gone) => {
        if (gone) return true;
        signalGroup('SIGKILL');
        return groupGone(pgid, monoMs() + KILL_WAIT_MS);
      })
      .then((gone) => done(!gone && groupAlive(pgid)));
  });
}

process.on('message', (message: KeeperRequest) => {
  switch (message.type) {
    case 'start':
      return start(message);
    case 'deadline':
      return heard(message.at);
    case 'signal':
      heardAt = monoMs();
      return signalGroup(message.signal);
    case 'lost':
      return stop('lost', monoMs() + graceMs);
  }
});

process.on('disconnect', () => {
  if (child === undefined) process.exit(0);
  const now = monoMs();
  stop('parent-gone', Math.min(now + graceMs, Math.max(now, deadlineAt)));
});
