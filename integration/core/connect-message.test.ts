/**
 * What connect() says when it gives up: where, how long, and gRPC's last error once, without
 * gRPC's wrapping ("14 UNAVAILABLE: No connection established. Last error: … Resolution note: ").
 * A server that answers but is not etcd (here an HTTP/1.1 server, as a wrong port in a config
 * would hit) gets the question whether the port is an etcd client port.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, isConnectError } from '@leasehold/core';
import { freePort } from '@leasehold/testing';
import { expect, it } from 'vitest';

const DIAL_TIMEOUT_MS = 500;

async function failure(endpoint: string): Promise<Error> {
  const error = await connect({ endpoints: endpoint, dialTimeoutMs: DIAL_TIMEOUT_MS }).then(
    async (client) => {
      await client.close();
      throw new Error(`connect() succeeded against ${endpoint}, which is not etcd`);
    },
    (err: unknown) => err,
  );
  expect(isConnectError(error), String(error)).toBe(true);
  return error as Error;
}

it('a refused port: one sentence with the socket error, nothing repeated', async () => {
  const port = await freePort();
  const { message } = await failure(`http://127.0.0.1:${port}`);
  expect(message).toBe(
    `could not reach etcd at http://127.0.0.1:${port} within ${DIAL_TIMEOUT_MS} ms (dialTimeoutMs): connect ECONNREFUSED 127.0.0.1:${port}`,
  );
});

it('a server that is not etcd: asks whether this is an etcd client port', async () => {
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  try {
    const { message } = await failure(`http://127.0.0.1:${port}`);
    expect(message).toMatch(
      new RegExp(
        `^could not reach etcd at http://127\\.0\\.0\\.1:${port} within ${DIAL_TIMEOUT_MS} ms \\(dialTimeoutMs\\): .+; something answered but does not speak etcd's gRPC: is this an etcd client port`,
      ),
    );
    expect(message).not.toMatch(/Resolution note|UNAVAILABLE|etcd connect failed|\d{4}-\d\d-\d\dT/);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
