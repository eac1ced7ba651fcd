import { sleep, type Clock } from '../clock.js';
import { EtcdUnavailableError, isLeaseholdError, type LeaseholdError } from '../errors.js';
import { tunables } from '../options.js';

/** Where background clean-up reports what failed. */
export type Report = (error: LeaseholdError) => void;

/** etcd did not answer: worth trying again later. */
const isTransient = (err: unknown): boolean =>
  isLeaseholdError(err) && err.code === 'ETCD_UNAVAILABLE';

/** The client is closed or met another cluster: nothing more can be done through it. */
export const isEnded = (err: unknown): boolean =>
  isLeaseholdError(err) && (err.code === 'CLIENT_CLOSED' || err.code === 'CLUSTER_CHANGED');

/**
 * Clean-up that must happen even while etcd is away (a revoke, a key removal): runs `once` (a
 * single call, one deadline: whoever awaits this waits at most that long) and returns; if that
 * failed transiently, reports it once and keeps retrying in the background (backoff up to
 * `retryMaxMs`) until it succeeds, `moot(err)` says it no longer matters, the client ends,
 * `giveUp()` says stop, or etcd refuses outright (reported).
 */
export async function cleanUp(
  clock: Clock,
  report: Report,
  what: string,
  once: (attempt: number) => Promise<unknown>,
  moot: (err?: unknown) => boolean = () => false,
  giveUp: () => boolean = () => false,
): Promise<void> {
  const attempt = async (n: number): Promise<boolean> => {
    if (moot()) return true;
    try {
      await once(n);
      return true;
    } catch (err) {
      if (moot(err) || isEnded(err)) return true;
      if (isTransient(err) && !giveUp()) return false;
      report(err as LeaseholdError);
      return true;
    }
  };
  if (await attempt(0)) return;
  report(new EtcdUnavailableError(`etcd ${what} failed; retrying in the background`));
  void (async () => {
    for (let n = 1, delay = tunables.retryMinMs as number; ; n++) {
      await sleep(clock, delay);
      if (await attempt(n)) return;
      delay = Math.min(delay * 2, tunables.retryMaxMs);
    }
  })();
}
