// One replica of a service that runs several copies but must do some work on exactly one of them
// at a time. Every replica answers GET /leader; the leader also publishes a heartbeat, fenced by
// its term's token, so a replica that lost the election without knowing it (paused, cut off)
// cannot overwrite what a newer leader wrote. run.mjs starts three of these.
//
//   node replica.mjs <name> <port>
import { once } from 'node:events';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from '@leasehold/core';
import { isStaleTokenError } from '@leasehold/fence';
import { etcdStore } from '@leasehold/fence/etcd';

const [name = 'a', port = '8081'] = process.argv.slice(2);
const election = 'leader-service';
const log = (line) => console.log(`[${name}] ${line}`);

// Installed before anything else, so a SIGTERM at any point steps down rather than killing.
const shutdown = new AbortController();
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => shutdown.abort(new Error(`${signal} received`)));
}

const client = await connect({
  endpoints: process.env.ETCD_ENDPOINTS ?? 'http://127.0.0.1:2379',
  electionPrefix: process.env.ELECTION_PREFIX ?? '/leasehold/election/',
});
const store = etcdStore(client, { prefix: process.env.FENCE_PREFIX ?? '/leader-service/' });

// Any replica can say who leads, e.g. to forward requests that only the leader may serve.
// Tokens as decimal strings; the lease id in hex, as in the key, leasehold's logs and etcdctl.
const json = (value) =>
  JSON.stringify(value, (k, v) =>
    typeof v !== 'bigint' ? v : k === 'leaseId' ? v.toString(16) : `${v}`,
  );
const server = createServer((req, res) => {
  if (req.method !== 'GET' || req.url !== '/leader') return void res.writeHead(404).end();
  client.leader(election).then(
    (leader) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(json(leader ?? null)),
    (err) => res.writeHead(503).end(err.message),
  );
});
server.listen(Number(port), '127.0.0.1');
await once(server, 'listening');
const url = `http://127.0.0.1:${port}`;
log(`serving ${url}/leader (pid ${process.pid})`);

// Every change of leader, in order, including "no leader". Ends when the client closes.
const watching = (async () => {
  for await (const { leader, revision } of client.observe(election)) {
    const who = leader ? `${leader.value} (token ${leader.token})` : 'nobody';
    log(`observed: ${who} leads at revision ${revision}`);
  }
})();

/**
 * Leader-only work. Its signal aborts when the term is lost or on shutdown; returning then lets
 * lead() campaign again, or resign.
 * @param {import('@leasehold/core').LeaderContext} term
 */
async function work({ token, signal }) {
  log(`elected: leading with token ${token}`);
  for (let beat = 1; !signal.aborted; beat++) {
    try {
      await store.write({ resource: 'heartbeat', token, value: `${name} beat ${beat}` });
    } catch (err) {
      // StaleTokenError: a newer leader has written, so this term is over and the signal will
      // say so shortly. Anything else (etcd unreachable): try again at the next beat.
      log(`${isStaleTokenError(err) ? 'fenced off' : 'heartbeat failed'}: ${err.message}`);
    }
    await sleep(1000, undefined, { signal }).catch(() => {});
  }
  log(`stepping down: ${signal.reason.message}`);
}

try {
  // The value is what `client.leader()`, observers and `etcdctl elect -l` show for this replica.
  await client.lead(election, `${name} ${url}`, work, {
    signal: shutdown.signal,
    onLost: (err) => log(`not leading: ${err.message}`),
  });
  log('left the election');
} finally {
  server.close();
  server.closeAllConnections();
  await client.close(); // revokes the lease: nothing of this replica is left in etcd
  await watching;
}
