import { readdirSync, readFileSync } from 'node:fs';
import { EtcdHarnessError } from './errors.js';
import { delay } from './wait.js';

/**
 * Sends SIGSTOP to `pid` and resolves once every thread of it is stopped. `kill()` returns
 * before that: the stop is only pending until each thread next enters the kernel, and a thread
 * busy on another core can keep answering requests meanwhile (on a loaded host, for
 * milliseconds). Without `/proc` (not Linux), resolves once the signal is sent.
 */
export async function freeze(pid: number, what: string, timeoutMs = 5_000): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  const giveUpAt = performance.now() + timeoutMs;
  for (;;) {
    const running = runningThreads(pid);
    if (running === 0) return;
    if (performance.now() > giveUpAt) {
      throw new EtcdHarnessError(
        'ETCD_TIMEOUT',
        `${what} did not stop within ${timeoutMs} ms of SIGSTOP (${running} threads not yet stopped, running or blocked in the kernel)`,
      );
    }
    await delay(1);
  }
}

/**
 * Threads of `pid` not yet stopped: state other than `T`/`t` (stopped, traced) or `Z`/`X` (a
 * thread that is exiting). 0 when `/proc` cannot tell (not Linux, or the process is gone).
 */
export function runningThreads(pid: number): number {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  let running = 0;
  for (const task of tasks) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
    } catch {
      continue; // the thread exited between the two reads
    }
    // "pid (comm) S ...": the name may hold spaces and parentheses, the state follows the last ')'.
    const state = stat[stat.lastIndexOf(')') + 2];
    if (state !== 'T' && state !== 't' && state !== 'Z' && state !== 'X') running++;
  }
  return running;
}
