/**
 * Is anything of a process group still running? Used by the keeper (the rest of a group after
 * its leader exited keeps its grace) and by leasehold (after the keeper was killed, the lock is
 * released only once the command's group is gone). No dependencies: the keeper imports it.
 */
import { readdirSync, readFileSync } from 'node:fs';

const monoMs = () => Number(process.hrtime.bigint()) / 1e6;

/**
 * True while a process of group `pgid` runs (or cannot be told apart from running). kill(-pgid,
 * 0) also counts zombies: processes that exited but were not reaped — on Linux, /proc tells
 * them apart, which matters under a PID 1 that never reaps.
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    // EPERM: members we may not signal (they changed user): they run and we cannot stop them.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  if (process.platform !== 'linux') return true;
  let pids: string[];
  try {
    pids = readdirSync('/proc');
  } catch {
    return true;
  }
  for (const pid of pids) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // it just exited
    }
    // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') return true;
  }
  return false;
}

/** Resolves to true once group `pgid` is gone, or to false if it still runs at `until` (monotonic ms). */
export async function groupGone(pgid: number, until: number, pollMs = 20): Promise<boolean> {
  for (;;) {
    if (!groupAlive(pgid)) return true;
    const left = until - monoMs();
    if (left <= 0) return false;
    await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, left)));
  }
}
