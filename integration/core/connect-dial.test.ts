/**
 * connect() keeps trying for the whole dial timeout: it gives up no earlier than `dialTimeoutMs`
 * and no later than one more attempt after it (whose deadline is at least 100 ms, the SDK's
 * shortest back-off), plus what this host's event loop cost meanwhile.
 */
import { connect, isLeaseholdError } from '@leasehold/core';
import { freePort, TcpFaultProxy } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { sharedEndpoints } from '../setup/etcd.js';
import { monitorLoopLag } from '../setup/lag.js';

const DIAL_TIMEOUT_MS = 700;
/** The deadline floor of the attempt made at the dial deadline (the SDK's shortest back-off). */
const LAST_ATTEMPT_FLOOR_MS = 100;

async function timedFailure(endpoint: string): Promise<{ elapsedMs: number; error: unknown }> {
  const started = performance.now();
  const error = await connect({ endpoints: endpoint, dialTimeoutMs: DIAL_TIMEOUT_MS }).then(
    async (client) => {
      await client.close();
      throw new Error('connect() succeeded against an endpoint that cannot answer');
    },
    (err: unknown) => err,
  );
  return { elapsedMs: performance.now() - started, error };
}

describe('connect() and dialTimeoutMs', () => {
  for (const trial of [1, 2, 3]) {
    it(`a refused port: rejects after the whole dial timeout, not before (trial ${trial})`, async () => {
      using lag = monitorLoopLag();
      const port = await freePort();
      const { elapsedMs, error } = await timedFailure(`http://127.0.0.1:${port}`);
      console.log(
        `[dial] refused port: rejected after ${elapsedMs.toFixed(0)} ms (dialTimeoutMs ${DIAL_TIMEOUT_MS}, max loop lag ${lag.maxLagMs.toFixed(0)} ms)`,
      );
      expect(isLeaseholdError(error) && error.code, String(error)).toBe('CONNECT_FAILED');
      expect((error as Error).message).toContain(`within ${DIAL_TIMEOUT_MS} ms`);
      expect(elapsedMs).toBeGreaterThanOrEqual(DIAL_TIMEOUT_MS);
      expect(elapsedMs).toBeLessThanOrEqual(
        DIAL_TIMEOUT_MS + LAST_ATTEMPT_FLOOR_MS + 2 * lag.maxLagMs,
      );
    });
  }

  it('a member that never answers: rejects after the dial timeout, not after a call deadline', async () => {
    using lag = monitorLoopLag();
    await using proxy = await TcpFaultProxy.start({ target: sharedEndpoints()[0]! });
    proxy.setMode('stall');
    const { elapsedMs, error } = await timedFailure(proxy.url);
    console.log(`[dial] stalled member: rejected after ${elapsedMs.toFixed(0)} ms`);
    expect(isLeaseholdError(error) && error.code, String(error)).toBe('CONNECT_FAILED');
    expect(elapsedMs).toBeGreaterThanOrEqual(DIAL_TIMEOUT_MS);
    expect(elapsedMs).toBeLessThanOrEqual(
      DIAL_TIMEOUT_MS + LAST_ATTEMPT_FLOOR_MS + 2 * lag.maxLagMs,
    );
  });
});
