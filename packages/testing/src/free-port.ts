import { createServer } from 'node:net';

// Ports handed out recently by this process. The OS may return a port again as soon as our probe
// socket closes, and a 3-member cluster asks for six ports before etcd binds any of them.
const recentlyIssued = new Set<number>();
const RECENT_LIMIT = 256;

/**
 * A free loopback TCP port (bind 127.0.0.1:0, read the port, release it).
 *
 * The last 256 ports this process handed out are not handed out again, so the calls that set up
 * one cluster get distinct ports. Throws if the OS keeps returning only those.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await probePort();
    if (recentlyIssued.has(port)) continue;
    recentlyIssued.add(port);
    if (recentlyIssued.size > RECENT_LIMIT) {
      const oldest = recentlyIssued.values().next().value;
      if (oldest !== undefined) recentlyIssued.delete(oldest);
    }
    return port;
  }
  throw new Error('freePort: the OS kept returning ports this process already handed out');
}

function probePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close((error) => (error ? reject(error) : resolve(port)));
    });
  });
}
