// Holds a lock, then closes its client when told to on stdin, and must then exit by itself:
// nothing of the client may keep the event loop alive, whatever state etcd is in.
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';

const [endpoints] = process.argv.slice(2);
const client = await connect({ endpoints: endpoints.split(','), callTimeoutMs: 1_000 });
client.onCleanupError(() => {}); // etcd is down on purpose
await client.acquire('close-worker');
console.log('held');
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line !== 'close') continue;
  await client.close();
  console.log('closed');
  lines.close();
  process.stdin.destroy();
}
