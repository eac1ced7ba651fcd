// A candidate in its own process, for tests that kill, pause and restart candidates. Driven by
// JSON lines on stdin ({ seq, cmd, ...args }); each answer is a line with the same seq. Events
// the candidate sees by itself ({ event, ... }) are lines of their own. Times are wall-clock ms
// (performance.timeOrigin + performance.now()), comparable across processes on one machine.
//
//   node candidate-worker.mjs <endpoints> <electionPrefix> <name>
//
// Fenced writes go to PostgreSQL through @leasehold/fence's withFence: one row per write in
// $FENCE_LOG_TABLE, fenced per election in $FENCE_TABLE, at $FENCE_PG_URL.
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';
import { isStaleTokenError } from '@leasehold/fence';
import { withFence } from '@leasehold/fence/postgres';
import pg from 'pg';

const [endpoints, electionPrefix, name] = process.argv.slice(2);
const { FENCE_PG_URL, FENCE_TABLE, FENCE_LOG_TABLE } = process.env;
if (!endpoints || !electionPrefix || !name || !FENCE_PG_URL || !FENCE_TABLE || !FENCE_LOG_TABLE) {
  console.error(
    'usage: FENCE_PG_URL=... FENCE_TABLE=... FENCE_LOG_TABLE=... candidate-worker.mjs <endpoints> <electionPrefix> <name>',
  );
  process.exit(2);
}

const now = () => performance.timeOrigin + performance.now();
const send = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);
const describe = (err) => ({ error: err?.name, reason: err?.reason, message: err?.message });

const client = await connect({ endpoints: endpoints.split(','), electionPrefix });
client.onCleanupError((err) => send({ event: 'cleanup-error', ...describe(err) }));
const pool = new pg.Pool({ connectionString: FENCE_PG_URL, max: 2 });
let session;
let leadership;

async function fencedWrite(election, token, note) {
  const at = now();
  try {
    await withFence(pool, { resource: election, token, table: FENCE_TABLE }, (tx) =>
      tx.query(
        `INSERT INTO "${FENCE_LOG_TABLE}" (election, worker, token, note, at_ms) VALUES ($1, $2, $3::int8, $4, $5)`,
        [election, name, token.toString(), note, Math.round(at)],
      ),
    );
    return { ok: true, at };
  } catch (err) {
    if (isStaleTokenError(err)) {
      return { ok: false, at, stale: true, highest: String(err.highestToken) };
    }
    return { ok: false, at, ...describe(err) };
  }
}

// Leader-only work: before each write, check the signal (which checks the session's deadline
// first, so the first check after a pause already sees the loss). With `writeAnyway`, the first
// check that finds the term over is followed by one write with the old token regardless, as a
// paused process that never looked would do.
function loop(held, intervalMs, writeAnyway) {
  let n = 0;
  const tick = async () => {
    const at = now(); // read before the check: a tick stamped after a resume checked after it
    const aborted = held.signal.aborted;
    const token = held.token.toString();
    if (!aborted) {
      const { at: _writeAt, ...outcome } = await fencedWrite(
        held.election,
        held.token,
        `tick ${++n}`,
      );
      send({ event: 'tick', at, aborted, token, ...outcome });
      setTimeout(tick, intervalMs);
      return;
    }
    send({ event: 'tick', at, aborted, token, ...describe(held.signal.reason) });
    if (writeAnyway) {
      const result = await fencedWrite(held.election, held.token, 'late write');
      send({ event: 'late-write', token, ...result });
    }
  };
  setTimeout(tick, 0);
}

const handlers = {
  async session({ ttlSeconds, leaseId }) {
    session = await client.session(
      leaseId === undefined ? { ttlSeconds } : { leaseId: BigInt(leaseId) },
    );
    return { leaseId: session.leaseId.toString() };
  },
  async campaign({ election, value }) {
    const held = await client.campaign(election, value, session ? { session } : {});
    const at = now();
    leadership = held;
    held.signal.addEventListener(
      'abort',
      () =>
        send({
          event: 'lost',
          at: now(),
          token: held.token.toString(),
          ...describe(held.signal.reason),
        }),
      { once: true },
    );
    return {
      at,
      token: held.token.toString(),
      key: held.key,
      leaseId: held.session.leaseId.toString(),
      value: held.value,
    };
  },
  async write({ note }) {
    const abortedBefore = leadership.signal.aborted;
    return {
      abortedBefore,
      ...(await fencedWrite(leadership.election, leadership.token, note ?? 'write')),
    };
  },
  async loop({ intervalMs, writeAnyway }) {
    loop(leadership, intervalMs ?? 100, writeAnyway === true);
    return {};
  },
  async resign() {
    await leadership.resign();
    return { at: now() };
  },
};

send({ ready: true, pid: process.pid });
// Commands run concurrently: a campaign waits while the test goes on talking to the process.
for await (const line of createInterface({ input: process.stdin })) {
  const msg = JSON.parse(line);
  handlers[msg.cmd](msg).then(
    (reply) => send({ seq: msg.seq, ...reply }),
    (err) => send({ seq: msg.seq, failed: true, ...describe(err) }),
  );
}
await client.close();
await pool.end();
