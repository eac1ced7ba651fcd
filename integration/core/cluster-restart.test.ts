/**
 * A full-cluster restart of a 3-member cluster (every member killed, or stopped, then all started
 * again) while a client holds a lock and another waits for it. etcd keeps leases across a restart
 * and gives each a fresh TTL on the server, so a session whose local deadline outlasts the outage
 * goes on: same lease, lock still held with the same token, the waiter still queued. Measures the
 * time from "every member healthy again" to the first successful acquire of a fresh lock and the
 * first fenced write, both by a client connected before the restart.
 */
import { connect, type Lock } from '@leasehold/core';
import { startEtcd, type EtcdCluster } from '@leasehold/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadlineIn, etcdClient, onCleanup, uniquePrefix, waitFor } from '../setup/etcd.js';
import { firstSuccess } from '../setup/members.js';

/** Outlasts the outage (a graceful stop of a leader alone can take ~7 s) plus a restart. */
const TTL_SECONDS = 60;

describe('full-cluster restart of a 3-member cluster', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3, provider: 'local' });
  });
  afterAll(() => cluster?.close());

  it.each(['kill', 'stop'] as const)(
    '%s every member, start them all: the client reconnects by itself, the holder keeps its lock and token, the waiter gets it next',
    async (how) => {
      const lockPrefix = uniquePrefix(`restart-${how}`);
      // A plain client for the server's view; replaced after the restart (its reconnect backoff is
      // grpc's default, up to 2 minutes).
      let admin = etcdClient(cluster.endpoints);
      const options = { endpoints: cluster.endpoints, lockPrefix };
      await using a = await connect(options);
      await using b = await connect(options);
      onCleanup(a, () => {});
      onCleanup(b, () => {});
      try {
        const holderSession = await a.session({ ttlSeconds: TTL_SECONDS });
        const waiterSession = await b.session({ ttlSeconds: TTL_SECONDS });
        const lock = await a.acquire('job', { session: holderSession });
        const waiting = b.acquire('job', { session: waiterSession, timeoutMs: 120_000 });
        void waiting.catch(() => {}); // awaited below; a failure must not be unhandled meanwhile
        const queued = await waitFor(
          async () => {
            const kvs = (await admin.getAll().prefix(`${lockPrefix}job/`).exec()).kvs;
            return kvs.length === 2 ? kvs : undefined;
          },
          { what: "the waiter's key queued behind the holder's" },
        );
        const waiterToken = BigInt(
          queued.find((kv) => BigInt(kv.create_revision) !== lock.token)!.create_revision,
        );

        const t0 = performance.now();
        await Promise.all(cluster.members.map((m) => (how === 'kill' ? m.kill() : m.stop())));
        const downMs = performance.now() - t0;
        const starting = performance.now();
        await Promise.all(cluster.members.map((m) => m.start()));
        const up = performance.now();
        admin.close();
        admin = etcdClient(cluster.endpoints);

        const errors: string[] = [];
        let n = 0;
        const [acquireMs, writeMs] = await Promise.all([
          firstSuccess(
            up,
            async () => {
              const fresh = await a.acquire(`fresh-${n++}`, {
                session: holderSession,
                timeoutMs: 5_000,
              });
              await fresh.release();
            },
            errors,
          ),
          firstSuccess(up, () => lock.put(`${lockPrefix}data`, 'after'), errors),
        ]);
        console.log(
          `[restart] ${how}: members down in ${downMs.toFixed(0)} ms, all healthy ${(up - starting).toFixed(0)} ms after start; ` +
            `then first fresh acquire after ${acquireMs.toFixed(0)} ms, first fenced write after ${writeMs.toFixed(0)} ms` +
            (errors.length ? `; failures before: ${errors.join(' | ')}` : ''),
        );
        for (const [name, s] of [
          ['holder', holderSession],
          ['waiter', waiterSession],
        ] as const) {
          expect(s.isLost, `${name}: ${(s.signal.reason as Error | undefined)?.message}`).toBe(
            false,
          );
        }
        expect(lock.isHeld).toBe(true);
        // The same lease, and the same key with the same create revision (token) on the server.
        const [key] = await waitFor(
          async () => (await admin.getAll().prefix(lock.key).options(deadlineIn(2_000)).exec()).kvs,
          { what: "the holder's key read after the restart" },
        );
        expect(BigInt(key!.create_revision)).toBe(lock.token);
        expect(BigInt(key!.lease)).toBe(holderSession.leaseId);
        const ttl = await admin.leaseClient.leaseTimeToLive(
          { ID: holderSession.leaseId.toString() },
          { deadline: Date.now() + 2_000 },
        );
        expect(Number(ttl.TTL)).toBeGreaterThan(0);

        // The waiter queued before the restart is next.
        const released = performance.now();
        await lock.release();
        const handedOver: Lock = await waitFor(() => waiting, {
          timeoutMs: 10_000,
          what: 'the waiter holds',
        });
        console.log(
          `[restart] ${how}: waiter held ${(performance.now() - released).toFixed(0)} ms after the release`,
        );
        expect(handedOver.token).toBe(waiterToken);
        expect(handedOver.token > lock.token).toBe(true);
        await handedOver.release();
      } finally {
        admin.close();
      }
    },
    180_000,
  );
});
