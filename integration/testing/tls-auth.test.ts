import { connect } from '@leasehold/core';
import { resolveEtcdProvider, startEtcd, type EtcdProviderName } from '@leasehold/testing';
import { Etcd3 } from 'etcd3';
import { stat } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTestCerts, type TestCerts } from '../setup/certs.js';
import { uniquePrefix } from '../setup/etcd.js';

async function unavailableReason(provider: EtcdProviderName): Promise<string | undefined> {
  try {
    await resolveEtcdProvider({ provider });
    return undefined;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    console.warn(`[leasehold] ${provider} provider TLS/auth tests skipped: ${reason}`);
    return reason;
  }
}

const providers = [
  { provider: 'binary' as const, skip: await unavailableReason('binary') },
  { provider: 'container' as const, skip: await unavailableReason('container') },
];

let certs: TestCerts;
beforeAll(async () => {
  certs = await makeTestCerts();
});
afterAll(async () => {
  await certs?.[Symbol.asyncDispose]();
});

describe.each(providers)('$provider provider with tls and auth', ({ provider, skip }) => {
  it.skipIf(skip !== undefined)(
    'serves mutual TLS with authentication, and restarts and snapshots like any cluster',
    async () => {
      await using cluster = await startEtcd({
        provider,
        tls: {
          certFile: certs.server.certFile,
          keyFile: certs.server.keyFile,
          clientCaFile: certs.ca.certFile,
        },
        auth: { rootPassword: 'root-secret' },
      });
      expect(cluster.endpoints[0]).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      expect(cluster.members[0]!.clientUrl).toBe(cluster.endpoints[0]);
      const tls = {
        caCert: certs.ca.cert,
        clientCert: certs.client.cert,
        clientKey: certs.client.key,
      };
      const auth = { username: 'root', password: 'root-secret' };

      // Authentication is on: without credentials etcd refuses.
      const anonymous = new Etcd3({
        hosts: cluster.endpoints,
        credentials: {
          rootCertificate: tls.caCert,
          certChain: tls.clientCert,
          privateKey: tls.clientKey,
        },
      });
      await expect(anonymous.get('k').string()).rejects.toThrow(
        /user name is empty|permission denied/,
      );
      anonymous.close();

      const prefix = uniquePrefix(`${provider}-tls-auth`);
      const options = { endpoints: cluster.endpoints, tls, auth, lockPrefix: `${prefix}lock/` };
      {
        await using client = await connect(options);
        const lock = await client.acquire('job');
        await lock.put(`${prefix}data`, 'before');
        await lock.release();
      }

      // The harness's own calls (health, snapshot) work with TLS and auth on.
      const snapshot = await cluster.members[0]!.snapshot();
      expect((await stat(snapshot)).size).toBeGreaterThan(0);
      await cluster.members[0]!.restart();

      await using client = await connect(options);
      const lock = await client.acquire('job');
      await lock.put(`${prefix}data`, 'after restart');
      await lock.release();
    },
    120_000,
  );
});
