// At most 3 workers call the payment API at once, however many processes run this. Each permit
// has a slot (0, 1 or 2): what a slot writes is fenced as the resource `payment-api#<slot>` with
// the permit's token, so a worker that lost its permit while paused cannot write after its
// slot's next holder.
import { connect } from '@leasehold/core';
import { fenceTableDDL, withFence } from '@leasehold/fence/postgres';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await pool.query(fenceTableDDL());
await pool.query(
  'CREATE TABLE IF NOT EXISTS payment_calls (worker int NOT NULL, slot int NOT NULL, token int8 NOT NULL)',
);

await using client = await connect({
  endpoints: process.env.ETCD_ENDPOINTS ?? 'http://127.0.0.1:2379',
  lockPrefix: process.env.LOCK_PREFIX ?? '/leasehold/lock/',
});

async function worker(id: number): Promise<void> {
  const options = { permits: 3, timeoutMs: 60_000 };
  await client.withPermit('payment-api', options, async ({ token, slot, signal, permit }) => {
    // The call the limit is for; recorded under the slot's fence in the same transaction.
    await withFence(pool, { resource: permit.slotResource, token }, (tx) =>
      tx.query('INSERT INTO payment_calls VALUES ($1, $2, $3)', [id, slot, token.toString()]),
    );
    await new Promise((resolve) => setTimeout(resolve, 50)); // the API takes a while
    signal.throwIfAborted(); // stop as soon as the permit can no longer be trusted
    console.log(`worker ${id} called the payment API in slot ${slot} under token ${token}`);
  });
}

// Eight workers in this process, three at a time.
await Promise.all(Array.from({ length: 8 }, (_, id) => worker(id)));
await pool.end();
