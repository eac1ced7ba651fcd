// A service whose leader-only work runs under client.lead(), in its own process. SIGTERM shuts
// it down: lead() aborts the work's signal, the work finishes the unit it is in and returns,
// lead() resigns, the client closes and the process exits by itself (nothing may keep it alive).
// It reports what happens as JSON lines on stdout; times are wall-clock ms
// (performance.timeOrigin + performance.now()), comparable across processes on one machine.
//
//   node leader-service-worker.mjs <endpoints> <electionPrefix> <election> <name> <ttlSeconds>
//
// Each unit of work is two fenced writes to PostgreSQL through @leasehold/fence's withFence
// ('unit N begin', then UNIT_MS later 'unit N end'), one row each in $FENCE_LOG_TABLE, fenced per
// election in $FENCE_TABLE, at $FENCE_PG_URL. A drained term ends with a 'drained' row.
import { connect } from '@leasehold/core';
import { isStaleTokenError } from '@leasehold/fence';
import { withFence } from '@leasehold/fence/postgres';
import pg from 'pg';

const [endpoints, electionPrefix, election, name, ttl] = process.argv.slice(2);
const { FENCE_PG_URL, FENCE_TABLE, FENCE_LOG_TABLE } = process.env;
const unitMs = Number(process.env.UNIT_MS ?? 100);
if (!endpoints || !electionPrefix || !election || !name || !ttl || !FENCE_PG_URL) {
  console.error(
    'usage: FENCE_PG_URL=... FENCE_TABLE=... FENCE_LOG_TABLE=... [UNIT_MS=100] leader-service-worker.mjs <endpoints> <electionPrefix> <election> <name> <ttlSeconds>',
  );
  process.exit(2);
}

const now = () => performance.timeOrigin + performance.now();
const send = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);
const describe = (err) => ({ error: err?.name, reason: err?.reason, message: err?.message });

const client = await connect({
  endpoints: endpoints.split(','),
  electionPrefix,
  session: { ttlSeconds: Number(ttl) },
});
client.onCleanupError((err) => send({ event: 'cleanup-error', ...describe(err) }));
const pool = new pg.Pool({ connectionString: FENCE_PG_URL, max: 2 });

async function fencedWrite(token, note) {
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

const shutdown = new AbortController();
process.once('SIGTERM', () => {
  send({ event: 'sigterm', at: now() });
  shutdown.abort(new Error('SIGTERM'));
});

async function work({ token, signal, leadership }) {
  const t = token.toString();
  send({
    event: 'elected',
    at: now(),
    token: t,
    key: leadership.key,
    leaseId: leadership.session.leaseId.toString(),
  });
  const ended = () => send({ event: 'term-end', at: now(), token: t, ...describe(signal.reason) });
  // Elected as a shutdown began: the signal is already aborted and no event will come.
  if (signal.aborted) ended();
  else signal.addEventListener('abort', ended, { once: true });
  let unit = 0;
  // The check before each unit reads the signal, which checks the session's deadline first.
  while (!signal.aborted) {
    unit++;
    send({
      event: 'write',
      token: t,
      note: `unit ${unit} begin`,
      ...(await fencedWrite(token, `unit ${unit} begin`)),
    });
    await new Promise((resolve) => setTimeout(resolve, unitMs)); // the unit's own work
    send({
      event: 'write',
      token: t,
      note: `unit ${unit} end`,
      ...(await fencedWrite(token, `unit ${unit} end`)),
    });
  }
  const { at: writeAt, ...drained } = await fencedWrite(token, 'drained');
  send({ event: 'drained', at: now(), writeAt, token: t, units: unit, ...drained });
}

send({ ready: true, pid: process.pid });
await client.lead(election, name, work, {
  signal: shutdown.signal,
  onLost: (err) => send({ event: 'lead-lost', at: now(), ...describe(err) }),
});
send({ event: 'lead-returned', at: now() });
await client.close();
await pool.end();
send({ event: 'closed', at: now() });
