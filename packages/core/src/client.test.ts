import { afterEach, describe, expect, it, vi } from 'vitest';
import { Leasehold } from './client.js';
import { connect } from './connect.js';
import { deferred, fakeClock, flush, track } from './clock.fake.js';
import { fakeEtcd } from './etcd.fake.js';
import { Etcd } from './transport/etcd.js';
import {
  EtcdRequestError,
  EtcdUnavailableError,
  isClientClosedError,
  isEtcdRequestError,
  isEtcdUnavailableError,
  isInvalidArgumentError,
  type LeaseholdError,
} from './errors.js';
import type { SessionOptions } from './session.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('connect() option validation', () => {
  /** Nothing listens on port 1: a connect that got as far as the network would fail otherwise. */
  const base = { endpoints: '127.0.0.1:1' };

  /** Fails any test that reaches the network instead of rejecting the options first. */
  function noNetwork() {
    return vi.spyOn(Etcd, 'open').mockImplementation(async () => {
      throw new Error('connect() reached the network');
    });
  }

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['endpoints (missing)', { endpoints: undefined }, /^endpoints must be/],
    ['endpoints (empty)', { endpoints: [] }, /^endpoints must be/],
    ['endpoints (with a path)', { endpoints: 'http://127.0.0.1:1/v3' }, /^endpoint .*path/],
    ['dialTimeoutMs', { dialTimeoutMs: 0 }, /^dialTimeoutMs must be/],
    ['callTimeoutMs', { callTimeoutMs: -1 }, /^callTimeoutMs must be/],
    ['recheckIntervalMs', { recheckIntervalMs: Infinity }, /^recheckIntervalMs must be/],
    ['maxAttempts (0)', { maxAttempts: 0 }, /^maxAttempts must be/],
    ['maxAttempts (11)', { maxAttempts: 11 }, /^maxAttempts must be/],
    ['maxAttempts (2.5)', { maxAttempts: 2.5 }, /^maxAttempts must be/],
    ['tls (no caCert)', { endpoints: 'https://127.0.0.1:1', tls: {} }, /^tls must be/],
    [
      'tls (cert without key)',
      { endpoints: 'https://127.0.0.1:1', tls: { caCert: 'pem', clientCert: 'c' } },
      /^tls\.clientCert and tls\.clientKey/,
    ],
    ['tls (with http endpoints)', { tls: { caCert: 'pem' } }, /https:\/\/ URLs when tls is set/],
    [
      'tls (caCert not PEM)',
      { endpoints: 'https://127.0.0.1:1', tls: { caCert: 'pem' } },
      /^tls\.caCert must be PEM/,
    ],
    [
      'tls (client cert and key not PEM)',
      {
        endpoints: 'https://127.0.0.1:1',
        tls: { caCert: '-----BEGIN CERTIFICATE-----', clientCert: 'c', clientKey: 'k' },
      },
      /^tls\.clientCert and tls\.clientKey must be a PEM certificate/,
    ],
    ['auth (empty username)', { auth: { username: '', password: 'p' } }, /^auth must be/],
    ['auth (no password)', { auth: { username: 'u' } }, /^auth must be/],
    ['lockPrefix (NUL)', { lockPrefix: 'a\0b' }, /^lockPrefix must be/],
    // Empty: the client would watch and read the whole keyspace.
    ['lockPrefix (empty)', { lockPrefix: '' }, /^lockPrefix must be a non-empty string/],
    ['session (null)', { session: null }, /^session must be an object/],
    [
      'callTimeoutMs (beyond what gRPC can encode)',
      { callTimeoutMs: 4e14 },
      /^callTimeoutMs must be/,
    ],
    ['lockPrefix (not a string)', { lockPrefix: 7 }, /^lockPrefix must be/],
    ['session (not an object)', { session: 'x' }, /^session must be an object/],
    ['session.ttlSeconds', { session: { ttlSeconds: 1 } }, /^ttlSeconds must be/],
    ['session.leaseId', { session: { leaseId: 5n } }, /^session.leaseId must be left out/],
    [
      'session.safetyMarginMs',
      { session: { ttlSeconds: 2, safetyMarginMs: 2_000 } },
      /^safetyMarginMs must be/,
    ],
    ['signal', { signal: 'nope' }, /^signal must be an AbortSignal/],
  ])(
    'rejects a bad %s with InvalidArgumentError naming it, before any I/O',
    async (_name, bad, message) => {
      const open = noNetwork();
      const error = await connect({ ...base, ...bad }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(isInvalidArgumentError(error), String(error)).toBe(true);
      expect((error as Error).message).toMatch(message);
      expect(open).not.toHaveBeenCalled();
    },
  );

  it('rejects options that are not an object', async () => {
    const open = noNetwork();
    const error: unknown = await connect(null as never).catch((err: unknown) => err);
    expect(isInvalidArgumentError(error)).toBe(true);
    expect((error as Error).message).toMatch(/^options must be an object/);
    expect(open).not.toHaveBeenCalled();
  });

  it('rejects with the reason of an already aborted signal, before any I/O', async () => {
    const open = noNetwork();
    const reason = new Error('shutting down');
    await expect(connect({ ...base, signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(open).not.toHaveBeenCalled();
  });
});

function setup(sharedOptions: Omit<SessionOptions, 'signal'> = { ttlSeconds: 3_600 }) {
  const clock = fakeClock();
  const fake = fakeEtcd();
  const client = new Leasehold(
    fake.etcd,
    clock,
    { lockPrefix: 'L/', electionPrefix: 'E/' },
    5_000,
    sharedOptions,
  );
  return { clock, client, ...fake };
}

describe('sharedSession()', () => {
  it('grants exactly one lease for concurrent callers, and none while it lives', async () => {
    const { client, state } = setup();
    const sessions = await Promise.all(Array.from({ length: 5 }, () => client.sharedSession()));
    expect(new Set(sessions).size).toBe(1);
    expect(state.grants).toBe(1);
    expect(await client.sharedSession()).toBe(sessions[0]);
    expect(state.grants).toBe(1);
  });

  it('grants one new lease, for every concurrent caller, after the current one is lost', async () => {
    const { client, state, clock } = setup({ ttlSeconds: 2 });
    const lost = await client.sharedSession();
    clock.advance(2_000); // no keepalive answered: past the local deadline
    expect(lost.isLost).toBe(true);

    const sessions = await Promise.all(Array.from({ length: 4 }, () => client.sharedSession()));
    expect(new Set(sessions).size).toBe(1);
    expect(sessions[0]).not.toBe(lost);
    expect(sessions[0]!.isLost).toBe(false);
    expect(sessions[0]!.leaseId).not.toBe(lost.leaseId);
    expect(state.grants).toBe(2);
  });

  it('an aborted signal rejects only that caller; the grant goes on for the others', async () => {
    const { client, state, handlers } = setup();
    const answer = deferred();
    handlers.grant = async (apply) => {
      await answer.promise;
      return apply();
    };
    const controller = new AbortController();
    const mine = track(client.sharedSession(controller.signal));
    const other = track(client.sharedSession());
    const third = track(client.sharedSession(new AbortController().signal));
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await flush();
    expect(mine).toMatchObject({ settled: true, error: reason });
    expect(other.settled).toBe(false);

    answer.resolve();
    await flush();
    expect(other.value).toBeDefined();
    expect(third.value).toBe(other.value);
    expect(state.grants).toBe(1);
  });

  it('keeps the lease granted for a caller that gave up: the next caller gets it without another grant', async () => {
    const { client, state, handlers } = setup();
    const answer = deferred();
    handlers.grant = async (apply) => {
      await answer.promise;
      return apply();
    };
    const controller = new AbortController();
    const mine = client.sharedSession(controller.signal);
    controller.abort(new Error('gave up'));
    await expect(mine).rejects.toThrow('gave up');
    answer.resolve();
    await flush();
    const session = await client.sharedSession();
    expect(session.isLost).toBe(false);
    expect(state.grants).toBe(1);
  });

  it('after close(), rejects with ClientClosedError (a rejected promise, not a throw)', async () => {
    const { client } = setup();
    await client.close();
    let result: Promise<unknown> | undefined;
    expect(() => (result = client.sharedSession())).not.toThrow();
    const error: unknown = await result!.catch((err: unknown) => err);
    expect(isClientClosedError(error)).toBe(true);
  });
});

describe('withLock()', () => {
  const RELEASE = 'lock release';

  /** Makes etcd refuse (or fail) every release, and collects clean-up errors. */
  function failRelease(s: ReturnType<typeof setup>, error: Error) {
    s.handlers.txn = (what, _request, apply) => {
      if (what === RELEASE) throw error;
      return apply();
    };
    const errors: LeaseholdError[] = [];
    const listener = s.client.onCleanupError((e) => errors.push(e));
    return { errors, listener };
  }

  it('returns what fn returns, hands it the token and signal, and releases the lock', async () => {
    const s = setup();
    let seen: { token: bigint; signal: AbortSignal; key: string } | undefined;
    const result = await s.client.withLock('job', ({ token, signal, lock }) => {
      seen = { token, signal, key: lock.key };
      expect(signal.aborted).toBe(false);
      expect(BigInt(s.store.get(lock.key)!.create_revision)).toBe(token);
      return 42;
    });
    expect(result).toBe(42);
    expect(seen!.signal.aborted).toBe(true); // released
    expect(s.store.has(seen!.key)).toBe(false);
    expect(s.count(RELEASE)).toBe(1);
  });

  it('returns fn’s result when the release fails, reporting through onCleanupError while it retries', async () => {
    const s = setup();
    const { errors } = failRelease(s, new EtcdUnavailableError('etcd is down (fake)'));
    await expect(s.client.withLock('job', async () => 'done')).resolves.toBe('done');
    expect(errors).toHaveLength(1);
    expect(isEtcdUnavailableError(errors[0])).toBe(true);

    s.handlers.txn = (_what, _request, apply) => apply(); // etcd is back
    s.clock.advance(1_000);
    await flush();
    expect(s.count(RELEASE)).toBe(2);
    expect(s.store.has('L/job/ff')).toBe(false);
  });

  it.each<[string, (failure: Error) => () => Promise<never> | never]>([
    [
      'throws',
      (failure) => () => {
        throw failure;
      },
    ],
    ['rejects', (failure) => () => Promise.reject(failure)],
  ])(
    'when fn %s, rethrows its error even though the release is refused, reporting the refusal once',
    async (_how, makeFn) => {
      const s = setup();
      const refusal = new EtcdRequestError('permission denied (fake)');
      const { errors } = failRelease(s, refusal);
      const failure = new Error('job failed');
      await expect(s.client.withLock('job', makeFn(failure))).rejects.toBe(failure);
      expect(errors).toEqual([refusal]);
      expect(isEtcdRequestError(errors[0])).toBe(true);
      expect(s.count(RELEASE)).toBe(1);
    },
  );

  it('without listeners, a clean-up error becomes a process warning with code LEASEHOLD_CLEANUP', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const s = setup();
    const { errors, listener } = failRelease(s, new EtcdRequestError('permission denied (fake)'));
    await s.client.withLock('a', () => undefined);
    expect(errors).toHaveLength(1);
    expect(warn).not.toHaveBeenCalled();

    listener[Symbol.dispose]();
    await s.client.withLock('b', () => undefined);
    expect(errors).toHaveLength(1);
    expect(warn).toHaveBeenCalledOnce();
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/permission denied/), {
      code: 'LEASEHOLD_CLEANUP',
    });
  });

  it('rejects a fn that is not a function with InvalidArgumentError, before taking the lock', async () => {
    const { client, count } = setup();
    const error: unknown = await client.withLock('job', 'nope' as never).catch((e: unknown) => e);
    expect(isInvalidArgumentError(error)).toBe(true);
    expect(count('lock join')).toBe(0);
  });
});

describe('close()', () => {
  it('closes every session (revoking its lease), the watch and the connection', async () => {
    const { client, revokes, watches, state } = setup();
    const lock = await client.acquire('job');
    await flush();
    expect(watches).toHaveLength(1);
    await client.close();
    expect(lock.isHeld).toBe(false);
    expect(revokes).toEqual(['255']);
    expect(watches[0]!.ended).toBe(true);
    expect(state.closed).toBe(true);
    await expect(client.acquire('job')).rejects.toSatisfy(isClientClosedError);
  });
});
