import { spawn, type ChildProcess } from 'node:child_process';
import { EtcdHarnessError } from './errors.js';
import { freeze } from './freeze.js';
import { waitHealthy } from './health.js';
import { LogTail } from './log-tail.js';
import { trackChild } from './process-registry.js';
import { saveSnapshot, type SnapshotFiles } from './snapshot.js';
import { withDeadline } from './wait.js';
import type { EtcdMember } from './types.js';

const STOP_GRACE_MS = 10_000;
const KILL_WAIT_MS = 5_000;

export interface BinaryMemberConfig {
  name: string;
  clientUrl: string;
  /** Plaintext URL for health checks and snapshots (see `controlUrlOf`). */
  controlUrl: string;
  /** Headers for the harness's own calls (root's token once authentication is on). */
  controlHeaders: () => Promise<Record<string, string>>;
  binary: string;
  args: string[];
  startupTimeoutMs: number;
  log: (line: string) => void;
  snapshots: SnapshotFiles;
}

/** One etcd child process. The data dir lives outside it, so stop/kill/start keep the data. */
export class BinaryMember implements EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private exitInfo: string | undefined;
  private tail: LogTail;
  private paused = false;

  constructor(private readonly config: BinaryMemberConfig) {
    this.name = config.name;
    this.clientUrl = config.clientUrl;
    this.tail = new LogTail(config.name, config.log);
  }

  /** Spawns etcd (if not running) and waits until `/health` is true. */
  async start(signal?: AbortSignal): Promise<void> {
    if (!this.child) this.spawn();
    await waitHealthy(this.config.controlUrl, {
      deadlineMs: this.config.startupTimeoutMs,
      signal,
      failure: () =>
        this.exitInfo === undefined
          ? undefined
          : new EtcdHarnessError(
              'ETCD_STARTUP_FAILED',
              `etcd member ${this.name} exited during startup (${this.exitInfo})\n${this.tail.describe()}`,
            ),
      describe: () => this.tail.describe(),
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill('SIGTERM');
    // A stopped process handles SIGTERM only once it runs again.
    if (this.paused) this.resumeProcess(child);
    try {
      await withDeadline(this.exited, STOP_GRACE_MS, `graceful stop of ${this.name}`);
    } catch {
      await this.kill();
    }
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill('SIGKILL');
    await withDeadline(this.exited, KILL_WAIT_MS, `SIGKILL of ${this.name}`);
  }

  async pause(): Promise<void> {
    const child = this.requireRunning('pause');
    this.paused = true;
    // Resolves once etcd is frozen for real, not when the signal is merely pending.
    await freeze(child.pid!, `etcd member ${this.name}`);
  }

  async resume(): Promise<void> {
    const child = this.requireRunning('resume');
    this.resumeProcess(child);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async snapshot(): Promise<string> {
    this.requireRunning('snapshot');
    if (this.paused) {
      throw new EtcdHarnessError(
        'ETCD_INVALID_OPTION',
        `cannot snapshot etcd member ${this.name}: it is paused (resume it first)`,
      );
    }
    const file = await this.config.snapshots.next(this.name);
    const headers = await this.config.controlHeaders();
    await saveSnapshot(
      this.config.controlUrl,
      file,
      `etcd member ${this.name}`,
      undefined,
      headers,
    );
    return file;
  }

  private resumeProcess(child: ChildProcess): void {
    child.kill('SIGCONT');
    this.paused = false;
  }

  private requireRunning(action: string): ChildProcess {
    if (!this.child) {
      throw new EtcdHarnessError(
        'ETCD_INVALID_OPTION',
        `cannot ${action} etcd member ${this.name}: it is not running (start it first)`,
      );
    }
    return this.child;
  }

  private spawn(): void {
    const child = spawn(this.config.binary, this.config.args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: etcdFreeEnv(),
    });
    this.child = child;
    this.exitInfo = undefined;
    this.paused = false;
    this.tail = new LogTail(this.name, this.config.log);
    trackChild(child);
    // Always drain both pipes: a full pipe would block etcd.
    child.stdout?.on('data', (chunk: Buffer) => this.tail.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => this.tail.push(chunk));
    this.exited = new Promise<void>((resolve) => {
      const onGone = (info: string) => {
        this.tail.flush();
        this.exitInfo ??= info;
        if (this.child === child) this.child = undefined;
        resolve();
      };
      child.once('error', (error) => onGone(`spawn failed: ${error.message}`));
      child.once('exit', (code, signal) =>
        onGone(signal ? `signal ${signal}` : `exit code ${code}`),
      );
    });
  }
}

/**
 * The environment without ETCD_* and ETCDCTL_* variables: etcd and etcdctl read them as flags,
 * and the test runner's ETCD_ENDPOINTS etc. must not leak in.
 */
export function etcdFreeEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...Object.fromEntries(
      Object.entries(process.env).filter(
        ([key]) => !key.startsWith('ETCD_') && !key.startsWith('ETCDCTL_'),
      ),
    ),
    ...extra,
  };
}
