/**
 * A workload process of a fault run: spawned with its configuration, reached by etcd only through
 * fault proxies of its own (one per member, so the nemesis can cut, stall, delay or reset this
 * process alone), followed through the history lines it prints, and told what it is doing now
 * (holding, waiting, releasing) so the nemesis can hit it at the right moment.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { TcpFaultProxy, type FaultMode } from '@leasehold/testing';
import type { HistoryLine } from './check/index.js';

export type Workload = 'lock' | 'election' | 'cron' | 'unfenced';

const SCRIPTS: Record<Workload, string> = {
  lock: 'lock.mjs',
  unfenced: 'lock.mjs',
  election: 'election.mjs',
  cron: 'cron.mjs',
};

/** The hold a worker reported last and has not given up: token, key, and writes made under it. */
export interface CurrentHold {
  token: string;
  key?: string;
  leaseId?: string;
  line: HistoryLine;
  writesDone: number;
}

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

const now = () => performance.timeOrigin + performance.now();

export class WorkerProc {
  hold: CurrentHold | undefined;
  /** Operations invoked and not yet completed, by id. */
  readonly pending = new Map<string, HistoryLine>();
  readonly exited: Promise<WorkerExit>;
  stderr = '';
  /** Stalls of the event loop the worker reported finished. */
  stallsEnded = 0;
  /** Set by the runner when the nemesis killed this process on purpose. */
  killedAt: number | undefined;

  private constructor(
    readonly name: string,
    readonly workload: Workload,
    readonly child: ChildProcess,
    readonly proxies: TcpFaultProxy[],
    onLine: (worker: WorkerProc, line: HistoryLine) => void,
  ) {
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal, at: now() })),
    );
    child.stderr!.on('data', (chunk: Buffer) => {
      // Keep the tail only: enough to say why a worker died.
      this.stderr = (this.stderr + chunk.toString()).slice(-20_000);
    });
    createInterface({ input: child.stdout! }).on('line', (text) => {
      let line: HistoryLine;
      try {
        line = JSON.parse(text) as HistoryLine;
      } catch {
        this.stderr += `[stdout] ${text}\n`;
        return;
      }
      this.follow(line);
      onLine(this, line);
    });
  }

  static async start(
    name: string,
    workload: Workload,
    endpoints: string[],
    config: Record<string, unknown>,
    onLine: (worker: WorkerProc, line: HistoryLine) => void,
  ): Promise<WorkerProc> {
    const proxies = await Promise.all(endpoints.map((target) => TcpFaultProxy.start({ target })));
    const script = fileURLToPath(new URL(`./workers/${SCRIPTS[workload]}`, import.meta.url));
    const full = { ...config, process: name, workload, endpoints: proxies.map((p) => p.url) };
    const child = spawn(process.execPath, [script], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, FAULTS_CONFIG: JSON.stringify(full) },
    });
    child.stdin.on('error', () => {});
    return new WorkerProc(name, workload, child, proxies, onLine);
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Holding, between two rounds of writes (after the first): the spot for a pause. */
  idleHolding(): boolean {
    return (
      this.hold !== undefined &&
      this.hold.writesDone > 0 &&
      ![...this.pending.values()].some((l) => l.op === 'write')
    );
  }

  /** How much longer the current hold is planned to last (0 without a hold or a plan). */
  holdLeftMs(): number {
    const line = this.hold?.line;
    if (line?.holdMs === undefined) return 0;
    return line.at + line.holdMs - now();
  }

  /** Waiting for the lock or for a term. */
  get waiting(): HistoryLine | undefined {
    return [...this.pending.values()].find((l) => l.op === 'acquire' || l.op === 'campaign');
  }

  get releasing(): boolean {
    return [...this.pending.values()].some((l) => l.op === 'release' || l.op === 'resign');
  }

  /** Sets the fault mode of this worker's link to every member, or to member `index` only. */
  setNetwork(mode: FaultMode, delayMs?: number, index?: number): void {
    for (const [i, proxy] of this.proxies.entries()) {
      if (index !== undefined && i !== index) continue;
      proxy.setMode(mode, delayMs === undefined ? {} : { delayMs });
    }
  }

  signal(signal: NodeJS.Signals): void {
    if (this.alive) this.child.kill(signal);
  }

  command(message: Record<string, unknown>): void {
    if (this.alive) this.child.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  /** Asks the workload to stop (it releases and closes its client); SIGKILL after `graceMs`. */
  async stop(graceMs: number): Promise<WorkerExit> {
    this.child.kill('SIGCONT');
    this.command({ cmd: 'stop' });
    this.child.stdin!.end();
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  async closeProxies(): Promise<void> {
    await Promise.all(this.proxies.map((p) => p.close()));
  }

  private follow(line: HistoryLine): void {
    const id = line.id === undefined ? undefined : String(line.id);
    if (line.type === 'invoke' && id !== undefined) {
      this.pending.set(id, line);
      if (line.op === 'release' || line.op === 'resign') this.hold = undefined;
      return;
    }
    if (line.op === 'lost' && this.hold?.token === line.token) {
      this.hold = undefined;
      return;
    }
    if ((line.op as string) === 'stall' && (line as { phase?: string }).phase === 'end') {
      this.stallsEnded++;
    }
    if (id === undefined || line.op === 'deadline') return;
    this.pending.delete(id);
    if (
      line.type === 'ok' &&
      (line.op === 'acquire' || line.op === 'campaign' || line.op === 'cron-run')
    ) {
      const extra = line as HistoryLine & { key?: string; leaseId?: string };
      this.hold = {
        token: line.token!,
        key: extra.key,
        leaseId: extra.leaseId,
        line,
        writesDone: 0,
      };
    } else if (line.op === 'write' && this.hold && this.hold.token === line.token) {
      this.hold.writesDone++;
    }
  }
}
