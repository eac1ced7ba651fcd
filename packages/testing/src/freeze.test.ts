import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
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
    // two-core host); each round checks the moment freeze() resolves, then lets it spin again.
    const pid = await busyChild();
    for (let round = 0; round < 20; round++) {
      expect(runningThreads(pid), `round ${round}: spinning`).toBeGreaterThan(0);
      await freeze(pid, 'busy child');
      expect(runningThreads(pid), `round ${round}`).toBe(0);
      process.kill(pid, 'SIGCONT');
      // SIGCONT makes the stopped threads runnable before kill() returns; wait for it anyway.
      await vi.waitFor(() => expect(runningThreads(pid)).toBeGreaterThan(0), { timeout: 5_000 });
    }
  });
});
