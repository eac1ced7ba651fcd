// Waits for a lock and prints {"acquiredAt": <wall-clock ms>, "token": "..."} once it holds it;
// releases and exits when stdin says 'release'.
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';

const [endpoints, lockPrefix, name] = process.argv.slice(2);
const client = await connect({ endpoints: endpoints.split(','), lockPrefix });
console.log(JSON.stringify({ ready: true }));
const lock = await client.acquire(name);
console.log(
  JSON.stringify({
    acquiredAt: performance.timeOrigin + performance.now(),
    token: lock.token.toString(),
  }),
);
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'release') break;
}
await lock.release();
await client.close();
