// Holds a lock with the given connect options, closes the client when told to on stdin, then
// must exit by itself. Prints 'held', then 'closed <ms>' (how long close() took).
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';

const [endpoints, optionsJson = '{}'] = process.argv.slice(2);
const client = await connect({ endpoints: endpoints.split(','), ...JSON.parse(optionsJson) });
client.onCleanupError(() => {}); // etcd is unreachable on purpose
await client.acquire('close-worker');
console.log('held');
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line !== 'close') continue;
  const started = performance.now();
  await client.close();
  console.log(`closed ${Math.round(performance.now() - started)}`);
  lines.close();
  process.stdin.destroy();
}
