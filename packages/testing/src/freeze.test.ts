import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { freeze, runningThreads } from './freeze.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A process whose main thread spins, as a busy etcd does: it only stops when interrupted. */
async function busyChild(): Promise<number> {
  const child = spawn(process.execPath, ['-e', 'console.log("up"); for (;;) {}'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  children.push(child);
  await once(child.stdout, 'data');
  return child.pid!;
}

describe.runIf(existsSync('/proc/self/task'))('freeze', () => {
  it('resolves only once every thread of a busy process is stopped', async () => {
    // Right after kill(SIGSTOP) some thread is often still running (half the time on an idle
    // two-core host); each of these trials checks the moment freeze() resolves.
    for (let trial = 0; trial < 20; trial++) {
      const pid = await busyChild();
      expect(runningThreads(pid)).toBeGreaterThan(0);
      await freeze(pid, 'busy child');
      expect(runningThreads(pid), `trial ${trial}`).toBe(0);
      process.kill(pid, 'SIGKILL');
    }
  });
});
