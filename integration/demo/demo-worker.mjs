// One worker of the demo: holds a leasehold lock and writes a record to the store.
// Driven by JSON lines on stdin so the demo can pause it (SIGSTOP) between steps.
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';
import { openStore } from './store.mjs';

const [endpoints, storeUrl] = process.argv.slice(2);
const client = await connect({ endpoints, session: { ttlSeconds: 2 } });
const store = await openStore(storeUrl);
let lock;
const reply = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

const commands = {
  async acquire({ name }) {
    lock = await client.acquire(name, { timeoutMs: 30_000 });
    return { token: lock.token.toString() };
  },
  async write({ value, fenced }) {
    const lostBefore = lock.signal.aborted;
    try {
      await store.write('invoice-42', value, lock.token, fenced);
      return { ok: true, lostBefore };
    } catch (err) {
      return { ok: false, lostBefore, error: err.name, message: err.message };
    }
  },
};

reply({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  const msg = JSON.parse(line);
  try {
    reply({ seq: msg.seq, ...(await commands[msg.cmd](msg)) });
  } catch (err) {
    reply({ seq: msg.seq, ok: false, error: err.name, message: err.message });
  }
}
await store.close();
await client.close();
