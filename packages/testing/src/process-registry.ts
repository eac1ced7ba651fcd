import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';

// Children and temp dirs that must not outlive this process, even when a test forgets close()
// or the runner exits early. 'exit' handlers must be synchronous: SIGKILL and rmSync are.
const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();
let installed = false;

function install(): void {
  if (installed) return;
  installed = true;
  process.once('exit', () => {
    for (const child of children) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of tempDirs) {
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // best effort at exit
      }
    }
  });
}

export function trackChild(child: ChildProcess): void {
  install();
  children.add(child);
  child.once('exit', () => children.delete(child));
}

export function trackTempDir(dir: string): void {
  install();
  tempDirs.add(dir);
}

export function untrackTempDir(dir: string): void {
  tempDirs.delete(dir);
}
