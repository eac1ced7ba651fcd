/**
 * Worker processes driven over stdio: JSON lines in, JSON lines out. A line with `seq` answers a
 * request; any other line is an event, kept in order. Every worker still running when a test
 * ends is killed (SIGCONT, then SIGKILL) by the `afterEach` below, whatever the test's outcome.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach } from 'vitest';
import { withDeadline } from '../core/workers/worker.js';
import { waitFor } from './etcd.js';

export type Msg = Record<string, unknown>;
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const running = new Set<WorkerProcess>();

afterEach(async () => {
  const left = [...running];
  for (const proc of left) {
    proc.child.kill('SIGCONT');
    proc.child.kill('SIGKILL');
  }
  await Promise.all(left.map((proc) => proc.closed));
});

/** A worker process: requests and answers by seq, and the events it reported, in order. */
export class WorkerProcess {
  readonly events: Msg[] = [];
  readonly closed: Promise<Exit>;
  readonly #pending = new Map<number, (msg: Msg) => void>();
  #seq = 0;

  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    running.add(this);
    this.closed = new Promise((resolve) =>
      child.once('close', (code, signal) => {
        running.delete(this);
        resolve({ code, signal });
      }),
    );
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const msg = JSON.parse(line) as Msg;
      if (typeof msg.seq !== 'number') return void this.events.push(msg);
      this.#pending.get(msg.seq)?.(msg);
      this.#pending.delete(msg.seq);
    });
  }

  /** Starts `script` with `NAME=name` (and `env`, `args`) and waits for its `ready` event. */
  static async start(
    name: string,
    script: string,
    env: Record<string, string>,
    args: string[] = [],
  ): Promise<WorkerProcess> {
    const child = spawn(process.execPath, [script, ...args], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, NAME: name, ...env },
    });
    const proc = new WorkerProcess(name, child);
    await proc.event((m) => m.ready === true, `${name} ready`, 20_000);
    return proc;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  request(cmd: string, args: Msg = {}, ms = 30_000): Promise<Msg> {
    const seq = ++this.#seq;
    const answer = new Promise<Msg>((resolve, reject) => {
      this.#pending.set(seq, (msg) =>
        msg.failed
          ? reject(new Error(`${this.name} ${cmd}: ${JSON.stringify(msg)}`))
          : resolve(msg),
      );
      void this.closed.then((exit) =>
        reject(new Error(`${this.name} exited (${JSON.stringify(exit)}) before answering ${cmd}`)),
      );
    });
    this.child.stdin!.write(`${JSON.stringify({ seq, cmd, ...args })}\n`);
    return withDeadline(answer, ms, `${this.name} ${cmd}`);
  }

  /** The first event (already reported or still to come) that matches. */
  event(match: (msg: Msg) => boolean, what: string, timeoutMs = 15_000): Promise<Msg> {
    return waitFor(() => this.events.find(match), { timeoutMs, what });
  }

  /** Events of one kind. */
  all(event: string): Msg[] {
    return this.events.filter((m) => m.event === event);
  }

  /** Sends `signal`; returns when, as wall-clock ms comparable with the workers' times. */
  kill(signal: NodeJS.Signals): number {
    this.child.kill(signal);
    return performance.timeOrigin + performance.now();
  }

  /** SIGTERM (the replica stops its scheduler, draining runs) and waits for a clean exit. */
  async terminate(): Promise<Exit> {
    this.child.kill('SIGTERM');
    return withDeadline(this.closed, 30_000, `${this.name} exit after SIGTERM`);
  }

  /** Ends stdin (the worker then closes its client and exits) and waits for the exit. */
  async endInput(): Promise<Exit> {
    this.child.stdin!.end();
    return withDeadline(this.closed, 30_000, `${this.name} exit after stdin closed`);
  }
}
