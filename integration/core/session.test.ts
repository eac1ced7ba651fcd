import { connect, defaults, isLeaseLostError, type LeaseLostError } from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { Etcd3 } from 'etcd3';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, waitFor } from '../setup/etcd.js';
import { monitorLoopLag } from '../setup/lag.js';
import { tunables } from '../../packages/core/src/options.js';

const endpoints = sharedEndpoints();
const admin = new Etcd3({ hosts: endpoints });
afterAll(() => admin.close());

/** Server-side TTL of a lease: -1 once it no longer exists. */
async function serverTtl(leaseId: bigint): Promise<number> {
  const res = await admin.leaseClient.leaseTimeToLive({ ID: leaseId.toString() });
  return Number(res.TTL);
}

function lostReason(signal: AbortSignal): LeaseLostError {
  const reason: unknown = signal.reason;
  if (!isLeaseLostError(reason)) throw new Error(`expected LeaseLostError, got ${String(reason)}`);
  return reason;
}

describe('Session on a real etcd', () => {
  it('keeps a 2 s lease alive for 10 s', async () => {
    await using client = await connect({ endpoints });
    await using session = await client.session({ ttlSeconds: 2 });
    const started = performance.now();
    // Observe for 10 s; the lease must stay alive on the server the whole time.
    while (performance.now() - started < 10_000) {
      expect(session.isLost).toBe(false);
      expect(await serverTtl(session.leaseId)).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(session.timeLeftMs()).toBeGreaterThan(0);
  }, 20_000);

  it("is lost by etcd's word ('gone') at its next keepalive when another client revokes the lease, before its local deadline", async () => {
    await using client = await connect({ endpoints });
    // Long enough that the local deadline (last answered send + TTL - margin, at least 2/3 of
    // the TTL after the revoke) stays well behind the keepalive that hears of it.
    const ttlSeconds = 6;
    const session = await client.session({ ttlSeconds });
    const lost = new Promise<number>((resolve) => session.onLost(() => resolve(performance.now())));
    const revokedAt = performance.now();
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    // No answer extends it after the revoke: this is when a deaf session would end.
    const deadlineAtMs = session.deadlineAtMs;
    const lostAt = await waitFor(() => lost, {
      timeoutMs: ttlSeconds * 1000 + defaults.callTimeoutMs,
      what: 'session loss after revoke',
    });
    // Its schedule: the next keepalive at most TTL/3 away, then `goneConfirmations` answers on
    // fresh streams, reopen delays doubling from `retryMinMs` in between.
    const n = tunables.goneConfirmations;
    const scheduleMs = (ttlSeconds * 1000) / 3 + tunables.retryMinMs * (2 ** (n - 1) - 1);
    console.log(
      `[session revoke] lost ${(lostAt - revokedAt).toFixed(0)} ms after the revoke (its schedule: ${scheduleMs} ms + ${n} × 2 round trips; the local deadline ${(deadlineAtMs - revokedAt).toFixed(0)} ms after it)`,
    );
    expect(lostReason(session.signal).reason).toBe('gone');
    expect(lostAt).toBeLessThan(deadlineAtMs);
  });

  it('revokes the lease on close, once; close is not a loss, so onLost stays quiet', async () => {
    await using client = await connect({ endpoints });
    const session = await client.session({ ttlSeconds: 5 });
    let lost = 0;
    let aborted = 0;
    session.onLost(() => lost++);
    session.signal.addEventListener('abort', () => aborted++);
    await Promise.all([session.close(), session.close()]);
    await session.close();
    expect(await serverTtl(session.leaseId)).toBe(-1);
    expect(aborted).toBe(1);
    expect(lost).toBe(0);
    expect(lostReason(session.signal).reason).toBe('closed');
    expect((session.signal.reason as Error).name).toBe('SessionClosedError');
  });

  it('a throwing listener does not stop the others', async () => {
    await using client = await connect({ endpoints });
    const session = await client.session({ ttlSeconds: 3 });
    const seen: string[] = [];
    session.onLost(() => {
      throw new Error('listener bug');
    });
    session.onLost(() => seen.push('second'));
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    await waitFor(() => seen.length > 0, { timeoutMs: 5_000, what: 'second listener called' });
    expect(seen).toEqual(['second']);
  });

  it('closes when its signal aborts', async () => {
    await using client = await connect({ endpoints });
    const controller = new AbortController();
    const session = await client.session({ ttlSeconds: 3, signal: controller.signal });
    controller.abort();
    await waitFor(async () => (await serverTtl(session.leaseId)) === -1, {
      timeoutMs: 5_000,
      what: 'lease revoked after abort',
    });
    expect(lostReason(session.signal).reason).toBe('closed');
  });

  it('rejects an already-aborted signal before granting anything', async () => {
    await using client = await connect({ endpoints });
    const reason = new Error('caller gave up');
    await expect(client.session({ signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it('fails to connect within the dial timeout and names the endpoints', async () => {
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    proxy.setMode('stall');
    const started = performance.now();
    const err = await connect({ endpoints: [proxy.url], dialTimeoutMs: 700 }).catch(
      (e: unknown) => e,
    );
    expect((err as Error).name).toBe('ConnectError');
    expect((err as Error).message).toContain(proxy.url);
    expect(performance.now() - started).toBeLessThan(700 + 2_000);
  });

  it('under a partition, aborts its signal before the server expires the lease; a new session works within 1 s after healing', async () => {
    using lag = monitorLoopLag();
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using client = await connect({ endpoints: [proxy.url], callTimeoutMs: 1_000 });
    const session = await client.session({ ttlSeconds: 2 });
    const lost = new Promise<number>((resolve) => session.onLost(() => resolve(performance.now())));

    proxy.setMode('stall');
    const lostAt = await waitFor(() => lost, {
      timeoutMs: 5_000,
      what: 'session loss under partition',
    });
    expect(lostReason(session.signal).reason).toBe('deadline');
    // The server still holds the lease when the client gives up on it (TTL is in whole
    // seconds, so 0 means "under a second left"; -1 would mean gone).
    expect(await serverTtl(session.leaseId)).toBeGreaterThanOrEqual(0);
    const expiredAt = await waitFor(
      async () => ((await serverTtl(session.leaseId)) === -1 ? performance.now() : undefined),
      { timeoutMs: 5_000, intervalMs: 20, what: 'server-side lease expiry' },
    );
    const leadMs = expiredAt - lostAt;
    console.log(
      `[partition] signal aborted ${leadMs.toFixed(0)} ms before the server expired the lease`,
    );
    expect(leadMs).toBeGreaterThan(0);

    proxy.setMode('pass');
    const healedAt = performance.now();
    const fresh = await client.session({ ttlSeconds: 2 });
    const tookMs = performance.now() - healedAt;
    console.log(`[partition] new session after heal in ${tookMs.toFixed(0)} ms`);
    // grpc-js redials at most every second (the SDK's max reconnect back-off), jittered by up
    // to 20%; the loop's own lateness comes on top.
    expect(tookMs).toBeLessThan(1_000 * 1.2 + 2 * lag.maxLagMs);
    expect(await serverTtl(fresh.leaseId)).toBeGreaterThan(0);
    await fresh.close();
  });
});
