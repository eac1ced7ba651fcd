import { EtcdHarnessError } from './errors.js';
import { delay } from './wait.js';

const POLL_INTERVAL_MS = 50;
const REQUEST_TIMEOUT_MS = 1000;

/**
 * True when `GET <clientUrl>/health` says `{"health":"true"}`. etcd answers that only once the
 * member sees a leader, so it means "this member can serve requests", not merely "it listens".
 */
export async function isHealthy(clientUrl: string): Promise<boolean> {
  try {
    const response = await fetch(`${clientUrl}/health`, {
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (!response.ok) return false;
    const body = (await response.json()) as { health?: unknown };
    return body.health === 'true' || body.health === true;
  } catch {
    return false;
  }
}

export interface WaitHealthyOptions {
  deadlineMs: number;
  signal?: AbortSignal | undefined;
  /** Checked every poll; return an Error to stop waiting (e.g. the process exited). */
  failure?: () => Error | undefined;
  /** Appended to the timeout message, e.g. the last log lines. */
  describe?: () => string;
}

/** Polls `/health` until healthy, a failure is reported, the signal aborts, or the deadline. */
export async function waitHealthy(clientUrl: string, options: WaitHealthyOptions): Promise<void> {
  const deadline = performance.now() + options.deadlineMs;
  for (;;) {
    options.signal?.throwIfAborted();
    const failure = options.failure?.();
    if (failure) throw failure;
    if (await isHealthy(clientUrl)) return;
    if (performance.now() >= deadline) {
      const extra = options.describe?.() ?? '';
      throw new EtcdHarnessError(
        'ETCD_TIMEOUT',
        `etcd at ${clientUrl} was not healthy within ${options.deadlineMs} ms` +
          (extra ? `\n${extra}` : ''),
      );
    }
    await delay(POLL_INTERVAL_MS, options.signal);
  }
}
