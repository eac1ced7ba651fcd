// Permits and read/write holds in their own process, for tests that pause, kill and race holders
// across processes. Driven by JSON lines on stdin ({ seq, cmd, ...args }); each answer is a line
// with the same seq, events ({ event, ... }) are lines of their own. Commands run concurrently.
// Times are wall-clock ms (performance.timeOrigin + performance.now()), comparable across
// processes on one machine.
//
//   node permit-worker.mjs <endpoints> <lockPrefix> <ttlSeconds>
//
// Fenced writes go to PostgreSQL through @leasehold/fence's withFence: one row per write in
// $FENCE_LOG_TABLE, fenced per resource in $FENCE_TABLE, at $FENCE_PG_URL. A permit writes to
// the resource `${name}#${slot}`, a read/write hold to `name`. Contenders also count themselves
// in and out of $OCCUPANCY_TABLE (readers / writers per name; a permit counts as a writer of its
// name), the exclusion evidence that needs no clock.
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';
import { isStaleTokenError } from '@leasehold/fence';
import { withFence } from '@leasehold/fence/postgres';
import pg from 'pg';

const [endpoints, lockPrefix, ttl] = process.argv.slice(2);
const {
  NAME = 'worker',
  FENCE_PG_URL,
  FENCE_TABLE,
  FENCE_LOG_TABLE,
  OCCUPANCY_TABLE,
} = process.env;
if (!endpoints || !lockPrefix || !ttl) {
  console.error('usage: permit-worker.mjs <endpoints> <lockPrefix> <ttlSeconds>');
  process.exit(2);
}

const now = () => performance.timeOrigin + performance.now();
const send = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);
const describe = (err) => ({ error: err?.name, reason: err?.reason, message: err?.message });

const client = await connect({
  endpoints: endpoints.split(','),
  lockPrefix,
  session: { ttlSeconds: Number(ttl) },
});
client.onCleanupError((err) => send({ event: 'cleanup-error', ...describe(err) }));
const pool = FENCE_PG_URL ? new pg.Pool({ connectionString: FENCE_PG_URL, max: 4 }) : undefined;
/** Holds by the test's id. */
const holds = new Map();
/** Acquisitions in flight by id, to abort. */
const pending = new Map();

const resourceOf = (hold) => ('slot' in hold ? `${hold.name}#${hold.slot}` : hold.name);

/** Counts this hold in (+1) or out (-1) of its name's occupancy; the counts after the update. */
async function occupy(name, mode, by) {
  if (!pool || !OCCUPANCY_TABLE) return undefined;
  const column = mode === 'read' ? 'readers' : 'writers';
  const { rows } = await pool.query(
    `INSERT INTO "${OCCUPANCY_TABLE}" (resource, ${column}) VALUES ($1, $2)
     ON CONFLICT (resource) DO UPDATE SET ${column} = "${OCCUPANCY_TABLE}".${column} + $2
     RETURNING readers, writers`,
    [name, by],
  );
  return rows[0];
}

async function fencedWrite(hold, note) {
  const at = now();
  const resource = resourceOf(hold);
  try {
    await withFence(pool, { resource, token: hold.token, table: FENCE_TABLE }, (tx) =>
      tx.query(
        `INSERT INTO "${FENCE_LOG_TABLE}" (resource, worker, token, note, at_ms) VALUES ($1, $2, $3::int8, $4, $5)`,
        [resource, NAME, hold.token.toString(), note, Math.round(at)],
      ),
    );
    return { ok: true, at, resource };
  } catch (err) {
    if (isStaleTokenError(err)) {
      return { ok: false, at, resource, stale: true, highest: String(err.highestToken) };
    }
    return { ok: false, at, resource, ...describe(err) };
  }
}

function take(mode, name, options) {
  if (mode === 'permit') return client.acquirePermit(name, options);
  return mode === 'read' ? client.acquireRead(name, options) : client.acquireWrite(name, options);
}

const shape = (hold) => ({
  token: hold.token.toString(),
  key: hold.key,
  ...('slot' in hold ? { slot: hold.slot } : {}),
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const handlers = {
  /** Waits for a hold; `id` names it for later commands. */
  async acquire({ id, mode, name, permits, timeoutMs }) {
    const controller = new AbortController();
    pending.set(id, controller);
    try {
      const hold = await take(mode, name, {
        ...(mode === 'permit' ? { permits } : {}),
        ...(timeoutMs ? { timeoutMs } : {}),
        signal: controller.signal,
        value: `${NAME}:${id}`,
      });
      holds.set(id, hold);
      hold.signal.addEventListener(
        'abort',
        () => send({ event: 'lost', id, at: now(), ...describe(hold.signal.reason) }),
        { once: true },
      );
      return { at: now(), ...shape(hold) };
    } finally {
      pending.delete(id);
    }
  },
  async abort({ id }) {
    pending.get(id)?.abort(new Error('aborted by the test'));
    return {};
  },
  async write({ id, note }) {
    const hold = holds.get(id);
    const abortedBefore = hold.signal.aborted;
    return { abortedBefore, ...(await fencedWrite(hold, note ?? 'write')) };
  },
  // Work under the hold: before each write, check the signal (which checks the session's
  // deadline first). With `writeAnyway`, the first check that finds the hold gone is followed by
  // one write with the old token regardless, as a paused process that never looked would do.
  async loop({ id, intervalMs, writeAnyway }) {
    const hold = holds.get(id);
    let n = 0;
    const tick = async () => {
      const at = now();
      const aborted = hold.signal.aborted;
      if (!aborted) {
        const outcome = await fencedWrite(hold, `tick ${++n}`);
        send({ event: 'tick', id, at, aborted, ...outcome });
        setTimeout(tick, intervalMs);
        return;
      }
      send({ event: 'tick', id, at, aborted, ...describe(hold.signal.reason) });
      if (writeAnyway) send({ event: 'late-write', id, ...(await fencedWrite(hold, 'late')) });
    };
    setTimeout(tick, 0);
    return {};
  },
  async release({ id }) {
    const calledAt = now();
    await holds.get(id).release();
    holds.delete(id);
    return { calledAt, at: now() };
  },
  // Contention: `contenders` loops, each `rounds` times: acquire, count in, write through the
  // fence, hold `holdMs`, count out, release. Each hold is reported as it ends.
  async contend({ mode, modes, name, permits, contenders, rounds, holdMs }) {
    const one = async (c) => {
      for (let i = 0; i < rounds; i++) {
        const m = modes ? modes[(c + i) % modes.length] : mode;
        const hold = await take(m, name, {
          ...(m === 'permit' ? { permits } : {}),
          value: `${NAME}:${c}:${i}`,
        });
        // A failed count or write must not keep the hold (and every other contender) waiting:
        // the hold is released whatever happens, and the error ends the command.
        let occupancy, written, heldThroughout;
        try {
          occupancy = await occupy(name, m, 1);
          // Readers share the resource: only permits (per slot) and writers fence it.
          const writes = pool && m !== 'read';
          written = writes ? await fencedWrite(hold, `${c}:${i}`) : { ok: true };
          await sleep(holdMs);
          heldThroughout = hold.isHeld;
          await occupy(name, m, -1);
        } finally {
          await hold.release();
        }
        send({
          event: 'held',
          mode: m,
          contender: `${NAME}:${c}`,
          occupancy,
          heldThroughout,
          written: written.ok,
          ...shape(hold),
        });
      }
    };
    await Promise.all(Array.from({ length: contenders }, (_, c) => one(c)));
    return {};
  },
};

send({ ready: true, pid: process.pid });
for await (const line of createInterface({ input: process.stdin })) {
  const msg = JSON.parse(line);
  handlers[msg.cmd](msg).then(
    (reply) => send({ seq: msg.seq, ...reply }),
    (err) => send({ seq: msg.seq, failed: true, ...describe(err) }),
  );
}
await client.close();
await pool?.end();
