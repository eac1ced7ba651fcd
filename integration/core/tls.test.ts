import {
  connect,
  isConnectError,
  isTlsError,
  type ConnectOptions,
  type TlsError,
} from '@leasehold/core';
import { startEtcd, type EtcdCluster } from '@leasehold/testing';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTestCerts, type TestCerts } from '../setup/certs.js';
import { uniquePrefix, waitFor } from '../setup/etcd.js';

/** Short, so that a failing connect is seen quickly; every failure must come within it. */
const DIAL_TIMEOUT_MS = 1_500;
/** What a failing connect may take beyond dialTimeoutMs: the plaintext-vs-TLS check (1 s). */
const DIAL_SLACK_MS = 1_500;

let certs: TestCerts;
/** TLS, any client may connect. */
let tls: EtcdCluster;
/** Mutual TLS: clients need a certificate signed by `certs.ca`. */
let mtls: EtcdCluster;
/** TLS with a certificate that names etcd.invalid only. */
let wrongName: EtcdCluster;
/** No TLS at all. */
let plain: EtcdCluster;

beforeAll(async () => {
  certs = await makeTestCerts();
  const server = { certFile: certs.server.certFile, keyFile: certs.server.keyFile };
  [tls, mtls, wrongName, plain] = await Promise.all([
    startEtcd({ provider: 'binary', tls: server }),
    startEtcd({ provider: 'binary', tls: { ...server, clientCaFile: certs.ca.certFile } }),
    startEtcd({
      provider: 'binary',
      tls: { certFile: certs.wrongName.certFile, keyFile: certs.wrongName.keyFile },
    }),
    startEtcd({ provider: 'binary' }),
  ]);
});

afterAll(async () => {
  await Promise.all([tls, mtls, wrongName, plain].map((c) => c?.close()));
  await certs?.[Symbol.asyncDispose]();
});

/** Connects, expecting a TlsError within the dial timeout; returns it. */
async function failsWithTls(options: ConnectOptions): Promise<TlsError> {
  const started = performance.now();
  const error = await connect({ dialTimeoutMs: DIAL_TIMEOUT_MS, ...options }).then(
    async (client) => {
      await client.close();
      return undefined;
    },
    (err: unknown) => err,
  );
  const elapsed = performance.now() - started;
  expect(isTlsError(error), String(error)).toBe(true);
  expect(isConnectError(error)).toBe(true);
  // A deadline, not a speed claim: the failure is reported, never retried without end.
  expect(elapsed).toBeLessThan(DIAL_TIMEOUT_MS + DIAL_SLACK_MS);
  const tlsError = error as TlsError;
  for (const endpoint of tlsError.endpoints) expect(tlsError.message).toContain(endpoint);
  return tlsError;
}

describe('TLS to a real etcd', () => {
  it('serves locks, fenced writes and a session kept alive over https with a CA', async () => {
    const prefix = uniquePrefix('tls');
    await using client = await connect({
      endpoints: tls.endpoints,
      tls: { caCert: certs.ca.cert },
      lockPrefix: `${prefix}lock/`,
    });
    expect(tls.endpoints[0]).toMatch(/^https:/);
    await using session = await client.session({ ttlSeconds: 2 });
    const lock = await client.acquire('job', { session });
    const revision = await lock.put(`${prefix}data`, 'v1');
    expect(revision).toBeGreaterThan(lock.token);

    const admin = new Etcd3({
      hosts: tls.endpoints,
      credentials: { rootCertificate: certs.ca.cert },
    });
    try {
      expect(await admin.get(`${prefix}data`).string()).toBe('v1');
      // The keepalive stream runs over TLS too: the 2 s lease outlives three TTLs.
      const until = performance.now() + 6_000;
      while (performance.now() < until) {
        const res = await admin.leaseClient.leaseTimeToLive({ ID: session.leaseId.toString() });
        expect(Number(res.TTL)).toBeGreaterThan(0);
        expect(session.isLost).toBe(false);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    } finally {
      admin.close();
    }
    await lock.release();
    await expect(lock.put(`${prefix}data`, 'late')).rejects.toMatchObject({
      code: 'LOCK_RELEASED',
    });
  }, 30_000);

  it('serves locks and elections over mutual TLS with a client certificate', async () => {
    const prefix = uniquePrefix('mtls');
    await using client = await connect({
      endpoints: mtls.endpoints,
      tls: { caCert: certs.ca.cert, clientCert: certs.client.cert, clientKey: certs.client.key },
      lockPrefix: `${prefix}lock/`,
      electionPrefix: `${prefix}election/`,
    });
    const lock = await client.acquire('job');
    expect(await lock.put(`${prefix}data`, 'v')).toBeGreaterThan(lock.token);
    await lock.release();
    const leadership = await client.campaign('svc', 'me');
    expect((await client.leader('svc'))?.value).toBe('me');
    await leadership.resign();
    await waitFor(async () => (await client.leader('svc')) === undefined, {
      what: 'no leader after resign',
    });
  });

  it('reports a server certificate from another CA as untrusted-server', async () => {
    const err = await failsWithTls({
      endpoints: tls.endpoints,
      tls: { caCert: certs.otherCa.cert },
    });
    expect(err.failure).toBe('untrusted-server');
    expect(err.message).toMatch(/tls\.caCert/);
  });

  it('reports a certificate for another name as name-mismatch', async () => {
    const err = await failsWithTls({
      endpoints: wrongName.endpoints,
      tls: { caCert: certs.ca.cert },
    });
    expect(err.failure).toBe('name-mismatch');
    expect(err.message).toMatch(/subject alternative names/);
  });

  it('reports a missing or foreign client certificate as client-cert-rejected', async () => {
    const missing = await failsWithTls({
      endpoints: mtls.endpoints,
      tls: { caCert: certs.ca.cert },
    });
    expect(missing.failure).toBe('client-cert-rejected');
    expect(missing.message).toMatch(/tls\.clientCert and tls\.clientKey/);
    const foreign = await failsWithTls({
      endpoints: mtls.endpoints,
      tls: {
        caCert: certs.ca.cert,
        clientCert: certs.foreignClient.cert,
        clientKey: certs.foreignClient.key,
      },
    });
    expect(foreign.failure).toBe('client-cert-rejected');
  });

  it('reports http:// to a TLS server as server-requires-tls', async () => {
    const err = await failsWithTls({
      endpoints: tls.endpoints.map((e) => e.replace(/^https:/, 'http:')),
    });
    expect(err.failure).toBe('server-requires-tls');
    expect(err.message).toMatch(/use https:\/\/ endpoints and set tls\.caCert/);
  });

  it('reports https:// to a plaintext server as server-not-tls', async () => {
    const err = await failsWithTls({
      endpoints: plain.endpoints.map((e) => e.replace(/^http:/, 'https:')),
      tls: { caCert: certs.ca.cert },
    });
    expect(err.failure).toBe('server-not-tls');
  });

  it('still reports an unreachable endpoint as a plain ConnectError', async () => {
    const started = performance.now();
    const dead = plain.endpoints[0]!.replace(/:\d+$/, ':1');
    const error = await connect({ endpoints: [dead], dialTimeoutMs: DIAL_TIMEOUT_MS }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isConnectError(error), String(error)).toBe(true);
    expect(isTlsError(error)).toBe(false);
    expect(performance.now() - started).toBeLessThan(DIAL_TIMEOUT_MS + DIAL_SLACK_MS);
  });
});
