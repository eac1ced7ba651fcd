/**
 * One etcd member of a fault run's own cluster: a child process of /usr/bin/etcd (or `ETCD_BIN`)
 * with its client port, its real peer port and the peer port it advertises (the peer network's
 * proxy in front of it, see peers.ts), and a data directory that outlives the process, so a
 * member can be paused, killed, restarted, wiped or replaced by a new member on the same ports.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/** etcd's timing for the run; the checker's bounds come from it. */
export const HEARTBEAT_MS = 100;
export const ELECTION_TIMEOUT_MS = 1000;

const STARTUP_MS = 30_000;
const STOP_GRACE_MS = 8_000;

export interface MemberPorts {
  client: number;
  /** Where etcd listens for its peers. */
  peer: number;
  /** What it advertises to its peers: the proxy in front of `peer`. */
  advertised: number;
}

export class FaultMember {
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #tail: string[] = [];
  #paused = false;

  constructor(
    /** Its place in the cluster (`m1`…), kept when the member is replaced. */
    readonly slot: string,
    /** etcd's `--name` (a replacement member gets a new one). */
    public name: string,
    readonly ports: MemberPorts,
    public dataDir: string,
  ) {}

  get clientUrl(): string {
    return `http://127.0.0.1:${this.ports.client}`;
  }

  get peerUrl(): string {
    return `http://127.0.0.1:${this.ports.advertised}`;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  /** Starts etcd with these `--initial-*` settings (ignored once the data dir has a WAL). */
  async start(initial: {
    cluster: string;
    state: 'new' | 'existing';
    token: string;
  }): Promise<void> {
    if (!this.#child) this.#spawn(initial);
    const deadline = performance.now() + STARTUP_MS;
    while (!(await this.healthy())) {
      if (!this.#child) throw new Error(`etcd ${this.name} exited on start:\n${this.log()}`);
      if (performance.now() > deadline) {
        throw new Error(`etcd ${this.name} not healthy within ${STARTUP_MS} ms:\n${this.log()}`);
      }
      await sleep(50);
    }
  }

  /** `/health` is true only while the member sees a leader. */
  async healthy(): Promise<boolean> {
    try {
      const res = await fetch(`${this.clientUrl}/health`, { signal: AbortSignal.timeout(1_000) });
      return ((await res.json()) as { health?: unknown }).health === 'true';
    } catch {
      return false;
    }
  }

  pause(): void {
    this.#child?.kill('SIGSTOP');
    this.#paused = true;
  }

  resume(): void {
    this.#child?.kill('SIGCONT');
    this.#paused = false;
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    if (this.#paused) this.resume();
    child.kill('SIGTERM');
    const stopped = await Promise.race([this.#exited.then(() => true), sleep(STOP_GRACE_MS)]);
    if (!stopped) await this.kill();
  }

  async kill(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    child.kill('SIGKILL');
    await this.#exited;
  }

  /** Removes the data directory (the member must be stopped). */
  async wipe(): Promise<void> {
    await rm(this.dataDir, { recursive: true, force: true });
  }

  log(): string {
    return this.#tail.slice(-20).join('');
  }

  #spawn(initial: { cluster: string; state: 'new' | 'existing'; token: string }): void {
    const args = [
      ['--name', this.name],
      ['--data-dir', this.dataDir],
      ['--listen-client-urls', this.clientUrl],
      ['--advertise-client-urls', this.clientUrl],
      ['--listen-peer-urls', `http://127.0.0.1:${this.ports.peer}`],
      ['--initial-advertise-peer-urls', this.peerUrl],
      ['--initial-cluster', initial.cluster],
      ['--initial-cluster-state', initial.state],
      ['--initial-cluster-token', initial.token],
      ['--heartbeat-interval', String(HEARTBEAT_MS)],
      ['--election-timeout', String(ELECTION_TIMEOUT_MS)],
      ['--logger', 'zap'],
      ['--log-level', 'warn'],
    ].flat();
    const child = spawn(process.env.ETCD_BIN ?? 'etcd', args, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: etcdFreeEnv(),
    });
    this.#child = child;
    this.#paused = false;
    child.stderr.on('data', (chunk: Buffer) => {
      this.#tail.push(chunk.toString());
      if (this.#tail.length > 200) this.#tail.splice(0, 100);
    });
    this.#exited = new Promise((resolve) => {
      const gone = () => {
        if (this.#child === child) this.#child = undefined;
        resolve();
      };
      child.once('exit', gone);
      child.once('error', gone);
    });
  }
}

/** The environment without ETCD_* / ETCDCTL_* variables, which etcd and etcdctl read as flags. */
export function etcdFreeEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('ETCD_') && !k.startsWith('ETCDCTL_'),
    ),
  );
}
