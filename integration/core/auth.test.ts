import {
  connect,
  isAuthError,
  isConnectError,
  isPermissionDeniedError,
  type ConnectOptions,
  type Lock,
  type PermissionDeniedError,
} from '@leasehold/core';
import { startEtcd, TcpFaultProxy, type EtcdCluster } from '@leasehold/testing';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

/** etcd's simple tokens expire after this long unused: far below every hold in these tests. */
const TOKEN_TTL_SECONDS = 2;
/**
 * How long a token must sit unused to be surely expired: its TTL plus two ticks of etcd's
 * simple-token keeper, which checks expiry once a second.
 */
const TOKEN_EXPIRED_AFTER_MS = TOKEN_TTL_SECONDS * 1000 + 2 * 1000;
const ROOT_PASSWORD = 'root-secret';
const DIAL_TIMEOUT_MS = 3_000;

let etcd: EtcdCluster;
let root: Etcd3;
/** Where these tests' keys live; the roles below grant parts of it. */
const base = uniquePrefix('auth');
const prefixes = {
  lockPrefix: `${base}lock/`,
  electionPrefix: `${base}election/`,
};
const data = `${base}data/`;

/** Creates `user` with a role granting readwrite on exactly `ranges` (prefixes). */
async function userWith(user: string, ranges: string[]): Promise<void> {
  await root.user(user).create(`${user}-secret`);
  await root.role(user).create();
  for (const prefix of ranges) {
    await root.role(user).grant({ permission: 'Readwrite', range: root.range({ prefix }) });
  }
  await root.user(user).addRole(user);
}

function as(user: string, options: Partial<ConnectOptions> = {}): Promise<unknown> {
  return connect({
    endpoints: etcd.endpoints,
    auth: { username: user, password: `${user}-secret` },
    dialTimeoutMs: DIAL_TIMEOUT_MS,
    ...prefixes,
    ...options,
  });
}

/** Runs `fn`, expecting it to reject; returns the error and how long it took. */
async function failure(fn: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  const error = await fn().then(
    async (value) => {
      await (value as { close?: () => Promise<void> })?.close?.();
      return undefined;
    },
    (err: unknown) => err,
  );
  return { error, ms: performance.now() - started };
}

beforeAll(async () => {
  etcd = await startEtcd({
    provider: 'binary',
    auth: { rootPassword: ROOT_PASSWORD, tokenTtlSeconds: TOKEN_TTL_SECONDS },
  });
  root = new Etcd3({ hosts: etcd.endpoints, auth: { username: 'root', password: ROOT_PASSWORD } });
  // Exactly leasehold's two prefixes, plus the data its fenced writes touch: nothing else.
  await userWith('svc', [prefixes.lockPrefix, prefixes.electionPrefix, data]);
  await userWith('locks-only', [prefixes.lockPrefix]);
  await userWith('elsewhere', [`${base}elsewhere/`]);
});

afterAll(async () => {
  root?.close();
  await etcd?.close();
});

describe('etcd authentication and RBAC', () => {
  it('rejects a wrong password with AuthError at once, not a ConnectError after retries', async () => {
    const { error, ms } = await failure(() =>
      connect({
        endpoints: etcd.endpoints,
        auth: { username: 'svc', password: 'wrong' },
        dialTimeoutMs: DIAL_TIMEOUT_MS,
        ...prefixes,
      }),
    );
    expect(isAuthError(error), String(error)).toBe(true);
    expect(isConnectError(error)).toBe(false);
    expect((error as Error).message).toMatch(/check auth\.username and auth\.password/);
    expect((error as Error).message).toContain(etcd.endpoints[0]);
    // Refused credentials are final: no retrying until the dial timeout.
    expect(ms).toBeLessThan(DIAL_TIMEOUT_MS);
  });

  it('rejects an unknown user and missing credentials with AuthError', async () => {
    for (const auth of [{ username: 'nobody', password: 'x' }, undefined]) {
      const { error, ms } = await failure(() =>
        connect({ endpoints: etcd.endpoints, dialTimeoutMs: DIAL_TIMEOUT_MS, ...prefixes, auth }),
      );
      expect(isAuthError(error), String(error)).toBe(true);
      expect(ms).toBeLessThan(DIAL_TIMEOUT_MS);
    }
  });

  it('rejects credentials sent to an etcd without authentication with AuthError', async () => {
    const { error, ms } = await failure(() =>
      connect({
        endpoints: sharedEndpoints(),
        auth: { username: 'svc', password: 'x' },
        dialTimeoutMs: DIAL_TIMEOUT_MS,
      }),
    );
    expect(isAuthError(error), String(error)).toBe(true);
    expect((error as Error).message).toMatch(/authentication disabled: leave out the auth option/);
    expect(ms).toBeLessThan(DIAL_TIMEOUT_MS);
  });

  it("works with a role limited to leasehold's prefixes: locks, fenced writes, elections, observe", async () => {
    await using client = (await as('svc')) as Awaited<ReturnType<typeof connect>>;
    const lock = await client.acquire('job');
    expect(await lock.put(`${data}job`, 'v')).toBeGreaterThan(lock.token);
    expect((await client.holder('job'))?.token).toBe(lock.token);
    await lock.release();

    const seen: Array<string | undefined> = [];
    const stop = new AbortController();
    const observing = (async () => {
      for await (const state of client.observe('svc', { signal: stop.signal })) {
        seen.push(state.leader?.value);
      }
    })();
    const leadership = await client.campaign('svc', 'leader-1');
    await leadership.proclaim('leader-2');
    await waitFor(() => seen.includes('leader-2'), { what: 'observe sees the proclaimed value' });
    await leadership.resign();
    await waitFor(() => seen.at(-1) === undefined, { what: 'observe sees no leader' });
    stop.abort();
    await observing;
  });

  it('names the key range when a role does not cover the lock prefix', async () => {
    const { error, ms } = await failure(() => as('elsewhere'));
    expect(isPermissionDeniedError(error), String(error)).toBe(true);
    const denied = error as PermissionDeniedError;
    expect(denied.keys).toBe(`prefix ${JSON.stringify(prefixes.lockPrefix)}`);
    expect(denied.message).toContain(prefixes.lockPrefix);
    expect(ms).toBeLessThan(DIAL_TIMEOUT_MS);
  });

  it('names the key range when a role does not cover the election prefix', async () => {
    await using client = (await as('locks-only')) as Awaited<ReturnType<typeof connect>>;
    await (await client.acquire('job')).release(); // the lock prefix is granted
    const { error } = await failure(() => client.campaign('svc', 'x', { timeoutMs: 5_000 }));
    expect(isPermissionDeniedError(error), String(error)).toBe(true);
    expect((error as PermissionDeniedError).keys).toContain(prefixes.electionPrefix);
  });

  it('keeps a hold alive and writing across many token lifetimes, and after a reconnect', async () => {
    // Through a proxy, so that every stream can be cut while the cached token is stale. The
    // recheck is slowed so that nothing else refreshes the token meanwhile.
    await using proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
    const options = { endpoints: [proxy.url], recheckIntervalMs: 60_000 };
    await using holder = (await as('svc', options)) as Awaited<ReturnType<typeof connect>>;
    await using waiter = (await as('svc', options)) as Awaited<ReturnType<typeof connect>>;
    // A TTL that rides out the reconnect below even on a loaded machine: the point here is
    // the token, which expires long before the hold ends.
    await using session = await holder.session({ ttlSeconds: 5 });
    const lock = await holder.acquire('long', { session });
    let next: Lock | undefined;
    const waiting = waiter.acquire('long', { timeoutMs: 60_000 }).then((l) => (next = l));
    waiting.catch(() => {}); // awaited below; a failure before then must not go unhandled

    // Idle, and then a write, each time long enough for the cached token to have expired.
    for (let round = 0; round < 2; round++) {
      const idleUntil = performance.now() + TOKEN_EXPIRED_AFTER_MS;
      await waitFor(() => performance.now() >= idleUntil || session.isLost, {
        what: 'a token lifetime and then some',
        timeoutMs: 10_000,
      });
      expect(session.isLost).toBe(false);
      expect(await lock.put(`${data}long`, String(round))).toBeGreaterThan(lock.token);
    }

    // Every connection is cut; the streams reopen with whatever token etcd3 has cached.
    const idleUntil = performance.now() + TOKEN_EXPIRED_AFTER_MS;
    await waitFor(() => performance.now() >= idleUntil, {
      what: 'token expiry',
      timeoutMs: 10_000,
    });
    proxy.setMode('reset');
    proxy.setMode('pass');
    // A read is retried; a fenced write that met the reset is not (it may have landed).
    expect((await holder.holder('long'))?.token).toBe(lock.token);
    expect(await lock.put(`${data}long`, 'after reset')).toBeGreaterThan(lock.token);
    await lock.release();
    // The waiter's watch was re-created after the reset, when its cached token had expired:
    // it must see the release from its watch (the recheck is a minute away).
    await waitFor(() => next, { what: 'the waiter takes the released lock', timeoutMs: 10_000 });
    await waiting;
    expect(next!.token).toBeGreaterThan(lock.token);
    expect(session.isLost).toBe(false);
    await next!.release();
  }, 90_000);

  it('keeps working after an administrator changes users or roles', async () => {
    // etcd stamps each token with the auth store's revision and refuses older stamps.
    await using client = (await as('svc')) as Awaited<ReturnType<typeof connect>>;
    const lock = await client.acquire('rbac-change');
    await root.user(`someone-${Date.now()}`).create('x');
    await root
      .role('svc')
      .grant({ permission: 'Read', range: root.range({ prefix: `${base}x/` }) });
    expect(await lock.put(`${data}rbac`, 'v')).toBeGreaterThan(lock.token);
    await lock.release();
    const again = await client.acquire('rbac-change');
    await again.release();
  });
});
