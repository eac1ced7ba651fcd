import type { ContainerRuntimeClient } from 'testcontainers';
import { EtcdHarnessError } from './errors.js';
import { waitHealthy } from './health.js';
import { saveSnapshot, type SnapshotFiles } from './snapshot.js';
import type { EtcdMember } from './types.js';
import { delay, withDeadline } from './wait.js';

export type DockerContainer = ReturnType<ContainerRuntimeClient['container']['getById']>;

const STOP_GRACE_SECONDS = 10;
export const ENGINE_CALL_TIMEOUT_MS = 30_000;

/**
 * Runs an engine call with a deadline; HTTP statuses in `ok` count as success (undefined).
 * Other failures become ETCD_ENGINE_ERROR naming `what`.
 */
export async function engineCall<T>(
  what: string,
  call: () => Promise<T>,
  ok: number[] = [],
): Promise<T | undefined> {
  try {
    return await withDeadline(call(), ENGINE_CALL_TIMEOUT_MS, what);
  } catch (error) {
    const status = (error as { statusCode?: unknown }).statusCode;
    if (typeof status === 'number' && ok.includes(status)) return undefined;
    if (error instanceof EtcdHarnessError) throw error;
    throw new EtcdHarnessError(
      'ETCD_ENGINE_ERROR',
      `container engine refused to ${what}: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}

/**
 * One etcd container on the host network. Lifecycle calls go straight to the engine's
 * Docker-compatible API (testcontainers has no pause, and its stop() removes the container):
 * the container and its data survive stop/kill, and with host networking the ports do too.
 */
export class ContainerMember implements EtcdMember {
  private paused = false;

  constructor(
    readonly name: string,
    readonly clientUrl: string,
    private container: DockerContainer,
    private readonly startupTimeoutMs: number,
    private readonly snapshots: SnapshotFiles,
    /** Plaintext URL and headers for the harness's own calls (see `controlUrlOf`). */
    private readonly control: {
      url: string;
      headers: () => Promise<Record<string, string>>;
    } = { url: clientUrl, headers: async () => ({}) },
  ) {}

  get id(): string {
    return this.container.id;
  }

  /** After a restore, the member lives on in a new container (same name, ports and URL). */
  replaceContainer(container: DockerContainer): void {
    this.container = container;
    this.paused = false;
  }

  async snapshot(): Promise<string> {
    if (this.paused) {
      throw new EtcdHarnessError(
        'ETCD_INVALID_OPTION',
        `cannot snapshot etcd member ${this.name}: it is paused (resume it first)`,
      );
    }
    const file = await this.snapshots.next(this.name);
    const headers = await this.control.headers();
    await saveSnapshot(this.control.url, file, `etcd member ${this.name}`, undefined, headers);
    return file;
  }

  async stop(): Promise<void> {
    await this.unpauseIfPaused();
    await this.engine('stop', () => this.container.stop({ t: STOP_GRACE_SECONDS }), [304]);
    await this.waitNotRunning();
  }

  async start(): Promise<void> {
    await this.engine('start', () => this.container.start(), [304]);
    await waitHealthy(this.control.url, { deadlineMs: this.startupTimeoutMs });
  }

  async pause(): Promise<void> {
    await this.engine('pause', () => this.container.pause());
    this.paused = true;
  }

  async resume(): Promise<void> {
    await this.engine('unpause', () => this.container.unpause());
    this.paused = false;
  }

  async kill(): Promise<void> {
    await this.unpauseIfPaused();
    // 409: not running (already stopped or killed); the goal is reached either way.
    await this.engine('kill', () => this.container.kill({ signal: 'SIGKILL' }), [304, 409]);
    await this.waitNotRunning();
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Force-removes the container and its anonymous volumes; a missing container is fine. */
  async remove(): Promise<void> {
    await this.unpauseIfPaused().catch(() => {});
    await this.engine('remove', () => this.container.remove({ force: true, v: true }), [404, 409]);
  }

  private async unpauseIfPaused(): Promise<void> {
    if (this.paused) await this.resume();
  }

  /** `kill`/`stop` return once signalled; `start` needs the container really stopped. */
  private async waitNotRunning(): Promise<void> {
    const deadline = performance.now() + ENGINE_CALL_TIMEOUT_MS;
    for (;;) {
      const info = await this.engine('inspect', () => this.container.inspect());
      if (!info || !info.State.Running) return;
      if (performance.now() > deadline) {
        throw new EtcdHarnessError(
          'ETCD_TIMEOUT',
          `container of etcd member ${this.name} (${this.id.slice(0, 12)}) still running ${ENGINE_CALL_TIMEOUT_MS} ms after stop/kill`,
        );
      }
      await delay(50);
    }
  }

  private engine<T>(action: string, call: () => Promise<T>, ok: number[] = []) {
    return engineCall(`${action} etcd member ${this.name} (${this.id.slice(0, 12)})`, call, ok);
  }
}
