/**
 * Real `leasehold` processes for the CLI tests: the built bin run with Node, and a probe server
 * that the commands they run (workers/child.mjs) report to. Times are wall-clock milliseconds
 * (performance.timeOrigin + performance.now()) in every process, so they compare.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { etcdClient, sharedEndpoints, waitFor } from '../setup/etcd.js';

export const bin = fileURLToPath(new URL('../../packages/cli/dist/bin.js', import.meta.url));
export const childScript = fileURLToPath(new URL('./workers/child.mjs', import.meta.url));
export const now = (): number => performance.timeOrigin + performance.now();

/** The command line of a child that reports to `probe`, as leasehold's command. */
export const child = (): string[] => [process.execPath, childScript];

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

const running = new Set<Cli>();

/** A running `leasehold` process. */
export class Cli {
  stdout = '';
  stderr = '';
  readonly exited: Promise<Exit>;
  readonly proc: ChildProcess;

  /**
   * `detached`: leasehold leads a process group of its own, as a shell job or a supervised
   * service does, so that the test can signal the whole group (`kill -STOP -PGID`).
   */
  /** `env` is added to the test's environment; a variable set to `undefined` is removed. */
  constructor(
    args: string[],
    env: Record<string, string | undefined> = {},
    readonly options: { detached?: boolean } = {},
  ) {
    this.proc = spawn(process.execPath, [bin, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
      detached: options.detached === true,
    });
    running.add(this);
    this.proc.stdout!.on('data', (d: Buffer) => (this.stdout += d.toString()));
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) =>
      this.proc.once('close', (code, signal) => {
        running.delete(this);
        resolve({ code, signal, at: now() });
      }),
    );
  }

  get pid(): number {
    return this.proc.pid!;
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  signal(signal: NodeJS.Signals): number {
    this.proc.kill(signal);
    return now();
  }

  /** Signals leasehold's whole process group (`kill -SIG -PGID`); needs `detached`. */
  signalGroup(signal: NodeJS.Signals): number {
    if (this.options.detached !== true) throw new Error('signalGroup needs { detached: true }');
    process.kill(-this.pid, signal);
    return now();
  }

  /** Its exit, or a failure naming what it printed if it has not exited within `ms`. */
  async exit(ms = 20_000): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`leasehold did not exit within ${ms} ms; stderr: ${this.stderr}`)),
        ms,
      );
    });
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Runs leasehold to completion. */
export async function runCli(
  args: string[],
  env: Record<string, string | undefined> = {},
  ms = 20_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const cli = new Cli(args, env);
  const { code } = await cli.exit(ms);
  return { code, stdout: cli.stdout, stderr: cli.stderr };
}

export interface ChildEvent {
  event: 'start' | 'signal' | 'end';
  name: string;
  pid: number;
  at: number;
  token?: string;
  key?: string;
  leaseId?: string;
  /** `LEASEHOLD_SLOT`, under `run --permits`. */
  slot?: string;
  signal?: string;
  code?: number;
}

/** One command run by leasehold, as the probe saw it. */
export class ChildRecord {
  readonly events: ChildEvent[] = [];
  /** When the probe saw its socket close: the process had ended (an upper bound). */
  closedAt: number | undefined;

  constructor(
    readonly name: string,
    readonly socket: Socket,
  ) {}

  get start(): ChildEvent {
    return this.events.find((e) => e.event === 'start')!;
  }

  get token(): bigint {
    return BigInt(this.start.token!);
  }

  /** Its own report of its end if it sent one, else when its socket closed. */
  get endAt(): number | undefined {
    return this.events.find((e) => e.event === 'end')?.at ?? this.closedAt;
  }

  signals(): string[] {
    return this.events.filter((e) => e.event === 'signal').map((e) => e.signal!);
  }

  exit(code = 0): void {
    this.socket.write(`${JSON.stringify({ cmd: 'exit', code })}\n`);
  }

  closed(timeoutMs = 20_000): Promise<number> {
    return waitFor(() => this.closedAt, { timeoutMs, what: `${this.name} ended` });
  }
}

/** Where the children report. */
export class Probe implements AsyncDisposable {
  readonly children: ChildRecord[] = [];

  private constructor(readonly server: Server) {}

  static async start(): Promise<Probe> {
    const server = createServer();
    const probe = new Probe(server);
    server.on('connection', (socket) => {
      socket.setNoDelay(true);
      let record: ChildRecord | undefined;
      createInterface({ input: socket }).on('line', (line) => {
        const event = JSON.parse(line) as ChildEvent;
        if (record === undefined) {
          record = new ChildRecord(event.name, socket);
          probe.children.push(record);
        }
        record.events.push(event);
      });
      socket.on('close', () => {
        if (record) record.closedAt = now();
      });
      socket.on('error', () => {});
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return probe;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  /** Environment for a child named `name` that reports here. */
  env(name: string, extra: Record<string, string> = {}): Record<string, string> {
    return { PROBE_PORT: String(this.port), CHILD_NAME: name, ...extra };
  }

  named(name: string): ChildRecord | undefined {
    return this.children.find((c) => c.name === name);
  }

  /** The child called `name` once it has started. */
  started(name: string, timeoutMs = 20_000): Promise<ChildRecord> {
    return waitFor(() => this.named(name), { timeoutMs, what: `${name} started` });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const c of this.children) c.socket.destroy();
    this.server.close();
  }
}

/** Intervals [start, end] of the children must not overlap, in start order. */
export function assertNoOverlap(children: readonly ChildRecord[]): ChildRecord[] {
  const sorted = [...children].sort((a, b) => a.start.at - b.start.at);
  for (let i = 1; i < sorted.length; i++) {
    const [prev, next] = [sorted[i - 1]!, sorted[i]!];
    if (prev.endAt === undefined || prev.endAt > next.start.at) {
      throw new Error(
        `${prev.name} [${prev.start.at}, ${prev.endAt}] overlaps ${next.name} starting at ${next.start.at}`,
      );
    }
  }
  return sorted;
}

/** Key prefixes to clean after each test: leases of killed processes would outlive it. */
const prefixes: string[] = [];
export function cleanUpAfter(prefix: string): string {
  prefixes.push(prefix);
  return prefix;
}

afterEach(async () => {
  const left = [...running];
  for (const cli of left) {
    for (const signal of ['SIGCONT', 'SIGKILL'] as const) {
      try {
        if (cli.options.detached === true) process.kill(-cli.pid, signal);
        else cli.proc.kill(signal);
      } catch {
        // Gone already.
      }
    }
  }
  await Promise.all(left.map((cli) => cli.exited));
  if (prefixes.length === 0) return;
  const admin = etcdClient(sharedEndpoints());
  try {
    for (const prefix of prefixes.splice(0)) {
      const kvs = await admin.getAll().prefix(prefix).exec();
      const leases = new Set(kvs.kvs.map((kv) => kv.lease).filter((lease) => lease !== '0'));
      for (const ID of leases) await admin.leaseClient.leaseRevoke({ ID }).catch(() => undefined);
      await admin.delete().prefix(prefix);
    }
  } finally {
    admin.close();
  }
});
