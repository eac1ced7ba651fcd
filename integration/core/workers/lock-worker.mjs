// A lock holder in its own process, driven by JSON lines on stdin; answers on stdout.
// Used by tests that need real processes: SIGSTOP/SIGCONT pauses, cross-process exclusion.
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';
import { Etcd3 } from 'etcd3';

const [endpoints, ttlSeconds] = [process.argv[2], Number(process.argv[3] ?? 2)];
const client = await connect({ endpoints: endpoints.split(','), session: { ttlSeconds } });
const etcd = new Etcd3({ hosts: endpoints.split(',') });
const locks = new Map();
const send = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

const handlers = {
  async acquire({ id, name }) {
    const lock = await client.acquire(name);
    locks.set(id, lock);
    return { token: lock.token.toString(), key: lock.key };
  },
  async write({ id, key, value }) {
    const lock = locks.get(id);
    const abortedBefore = lock.signal.aborted;
    try {
      const revision = await lock.put(key, value);
      return { ok: true, abortedBefore, revision: revision.toString() };
    } catch (err) {
      return { ok: false, abortedBefore, error: err.name, reason: err.reason };
    }
  },
  async release({ id }) {
    await locks.get(id).release();
    return {};
  },
  // Mutual exclusion probe: n times acquire, check the owner key is empty, claim it,
  // yield, check it is still ours, clear it, release.
  async contend({ name, rounds, concurrency, ownerKey, tag }) {
    const records = [];
    const one = async (worker) => {
      for (let i = 0; i < rounds; i++) {
        const session = await client.session({ ttlSeconds });
        const lock = await client.acquire(name, { session });
        const me = `${tag}-${worker}-${i}`;
        const before = await etcd.get(ownerKey).string();
        await etcd.put(ownerKey).value(me);
        await new Promise((r) => setImmediate(r));
        const after = await etcd.get(ownerKey).string();
        await etcd.delete().key(ownerKey);
        records.push({ me, token: lock.token.toString(), before, after });
        await lock.release();
        await session.close();
      }
    };
    await Promise.all(Array.from({ length: concurrency }, (_, w) => one(w)));
    return { records };
  },
};

send({ ready: true, pid: process.pid });
for await (const line of createInterface({ input: process.stdin })) {
  const msg = JSON.parse(line);
  try {
    send({ seq: msg.seq, ...(await handlers[msg.cmd](msg)) });
  } catch (err) {
    send({ seq: msg.seq, error: err.name, message: err.message });
  }
}
await client.close();
etcd.close();
