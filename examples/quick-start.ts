import { connect } from '@leasehold/core';
import { upsertFencedRow } from '@leasehold/fence/postgres';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await pool.query('CREATE TABLE IF NOT EXISTS invoice (id int PRIMARY KEY, total int, fence int8)');

// One client per process. `await using` closes it at the end of the scope, which revokes its
// lease; see "Plain JavaScript" below for the try/finally form.
await using client = await connect({
  endpoints: process.env.ETCD_ENDPOINTS ?? 'http://127.0.0.1:2379',
});

// A fair lock whose token goes with every write; the row keeps the highest token it accepted
// and refuses lower ones, so a holder that lost the lock while paused cannot overwrite it.
await client.withLock('invoice-42', async ({ token, signal }) => {
  await upsertFencedRow(pool, {
    table: 'invoice',
    key: { id: 42 },
    values: { total: 250 },
    token,
  });
  signal.throwIfAborted(); // stop as soon as the lock can no longer be trusted
  console.log(`invoice 42 written under fencing token ${token}`);
});
await pool.end();
