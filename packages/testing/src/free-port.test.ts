import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from './free-port.js';

describe('freePort', () => {
  it('returns distinct ports that can be bound on 127.0.0.1', async () => {
    const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) {
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', resolve);
      });
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
