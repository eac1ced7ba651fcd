/**
 * The keeper: a small process between `leasehold` and the command it runs, so that the command
 * is stopped on time even when `leasehold` itself cannot act.
 *
 * `leasehold` holds the lease and tells the keeper, over an IPC channel, the local deadline of
 * its session each time a keepalive moves it. The keeper stops the command (SIGTERM to its
 * process group, SIGKILL after the grace period) when:
 * - `leasehold` says the lock or leadership is lost;
 * - the last deadline it was told passes: `leasehold` is frozen (SIGSTOP, a stalled event loop)
 *   or its updates stopped for any other reason, so the lock can no longer be trusted;
 * - the channel closes: `leasehold` died (SIGKILL, a crash) and will never release or renew.
 *
 * Deadlines are on CLOCK_MONOTONIC (`process.hrtime`), which is one clock for every process on
 * the machine. The keeper imports nothing of the SDK, so it starts in a few tens of ms.
 *
 * The command runs in a process group of its own (a new session), so that a lost lock stops
 * every process the command started, not just the first. Terminal signals therefore reach it
 * only through `leasehold`, which forwards them exactly once; the keeper ignores them itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { KeeperReport, KeeperRequest, StopCause } from './supervise.js';

const monoMs = () => Number(process.hrtime.bigint()) / 1e6;

let child: ChildProcess | undefined;
let exited = false;
let stopping: StopCause | undefined;
let graceMs = 0;
let deadlineTimer: NodeJS.Timeout | undefined;
let deadlineAt = Infinity;

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

function stop(cause: StopCause): void {
  if (stopping !== undefined || exited || child?.pid === undefined) return;
  stopping = cause;
  report({ type: 'stopping', cause });
  signalGroup('SIGTERM');
  setTimeout(() => signalGroup('SIGKILL'), graceMs).unref();
}

function armDeadline(at: number): void {
  deadlineAt = at;
  clearTimeout(deadlineTimer);
  const check = () => {
    const left = deadlineAt - monoMs();
    if (left <= 0) return stop('deadline');
    deadlineTimer = setTimeout(check, Math.min(left, 2 ** 31 - 1));
  };
  check();
}

function start(request: Extract<KeeperRequest, { type: 'start' }>): void {
  graceMs = request.graceMs;
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
    armDeadline(request.deadlineAt);
  });
  child.once('exit', (code, signal) => {
    exited = true;
    clearTimeout(deadlineTimer);
    // After a loss nothing of the command may outlive it: stragglers in its group go too.
    if (stopping !== undefined) signalGroup('SIGKILL');
    report({ type: 'exit', code, signal, stopped: stopping }, () => process.exit(0));
  });
}

process.on('message', (message: KeeperRequest) => {
  switch (message.type) {
    case 'start':
      return start(message);
    case 'deadline':
      return armDeadline(message.at);
    case 'signal':
      return signalGroup(message.signal);
    case 'lost':
      return stop('lost');
  }
});

process.on('disconnect', () => {
  if (child === undefined) process.exit(0);
  stop('parent-gone');
});
