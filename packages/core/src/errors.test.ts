import { describe, expect, it } from 'vitest';
import {
  AuthError,
  ClientClosedError,
  ClusterChangedError,
  ConnectError,
  EtcdRequestError,
  EtcdUnavailableError,
  InvalidArgumentError,
  isAuthError,
  isClientClosedError,
  isClusterChangedError,
  isConnectError,
  isEtcdRequestError,
  isEtcdUnavailableError,
  isInvalidArgumentError,
  isLeaseholdError,
  isLeaseLostError,
  isPermissionDeniedError,
  isSessionClosedError,
  isTlsError,
  PermissionDeniedError,
  SessionClosedError,
  TlsError,
} from './errors.js';

describe('errors', () => {
  it('carry name, code and cause', () => {
    const cause = new Error('grpc said no');
    const err = new EtcdUnavailableError('etcd lock release failed: ...', { cause });
    expect(err.name).toBe('EtcdUnavailableError');
    expect(err.code).toBe('ETCD_UNAVAILABLE');
    expect(err.cause).toBe(cause);
    expect(new ConnectError('x', ['http://a:1']).endpoints).toEqual(['http://a:1']);
  });

  it('each guard answers for its own class only', () => {
    const all = [
      [new InvalidArgumentError('x'), isInvalidArgumentError],
      [new ConnectError('x', []), isConnectError],
      [new AuthError('x'), isAuthError],
      [new EtcdUnavailableError('x'), isEtcdUnavailableError],
      [new EtcdRequestError('x'), isEtcdRequestError],
      [new ClientClosedError(), isClientClosedError],
      [new SessionClosedError(1n), isSessionClosedError],
      [new ClusterChangedError(1n, 'x'), isClusterChangedError],
    ] as const;
    for (const [err, guard] of all) {
      for (const [other] of all) expect(guard(other)).toBe(other === err);
      expect(isLeaseholdError(err)).toBe(true);
    }
    expect(isLeaseLostError(new SessionClosedError(1n))).toBe(true);
    expect(isLeaseLostError(new ClusterChangedError(1n, 'x'))).toBe(true);
  });

  it('TlsError is a ConnectError, PermissionDeniedError an EtcdRequestError', () => {
    const tls = new TlsError('name-mismatch', 'x', ['https://a:1']);
    expect(tls).toBeInstanceOf(ConnectError);
    expect(tls).toMatchObject({ name: 'TlsError', code: 'TLS_FAILED', failure: 'name-mismatch' });
    expect(tls.endpoints).toEqual(['https://a:1']);
    expect([isTlsError(tls), isConnectError(tls)]).toEqual([true, true]);
    expect(isTlsError(new ConnectError('x', []))).toBe(false);

    const denied = new PermissionDeniedError('prefix "/p/"', 'x');
    expect(denied).toBeInstanceOf(EtcdRequestError);
    expect(denied).toMatchObject({ name: 'PermissionDeniedError', code: 'PERMISSION_DENIED' });
    expect([isPermissionDeniedError(denied), isEtcdRequestError(denied)]).toEqual([true, true]);
    expect(isPermissionDeniedError(new EtcdRequestError('x'))).toBe(false);
    expect(isAuthError(denied) || isAuthError(tls)).toBe(false);
  });

  it("never answer for @leasehold/fence's errors, which carry their own brand", () => {
    const fenceError = Object.assign(new Error('stale'), { code: 'INVALID_ARGUMENT' });
    Object.defineProperty(fenceError, Symbol.for('leasehold.fence.error'), {
      value: 'INVALID_ARGUMENT',
    });
    expect(isLeaseholdError(fenceError)).toBe(false);
    expect(isInvalidArgumentError(fenceError)).toBe(false);
    expect(isLeaseholdError({ code: 'LOCK_LOST' })).toBe(false);
    expect(isLeaseholdError(null)).toBe(false);
  });
});

describe('lost holds', () => {
  it('a lost lock and a lost leadership share one shape and one guard, and keep their own', async () => {
    const {
      LockLostError,
      LeadershipLostError,
      HoldLostError,
      isHoldLostError,
      isLockLostError,
      isLeadershipLostError,
    } = await import('./errors.js');
    const lock = new LockLostError('deleted', '/l/k/1', 5n, 'lock lost');
    const term = new LeadershipLostError('session', 'e', '/e/e/1', 6n, 'term lost');
    for (const err of [lock, term]) {
      expect(err).toBeInstanceOf(HoldLostError);
      expect(isHoldLostError(err)).toBe(true);
    }
    expect([lock.reason, lock.key, lock.token]).toEqual(['deleted', '/l/k/1', 5n]);
    expect([term.reason, term.election, term.key, term.token]).toEqual([
      'session',
      'e',
      '/e/e/1',
      6n,
    ]);
    expect([isLockLostError(lock), isLockLostError(term)]).toEqual([true, false]);
    expect([isLeadershipLostError(term), isLeadershipLostError(lock)]).toEqual([true, false]);
    expect(isHoldLostError(new Error('x'))).toBe(false);
  });
});
