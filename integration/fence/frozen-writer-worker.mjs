// A fence holder in its own process, for the frozen-writer tests: withFence on a real pg Pool,
// token 5, then a statement whose result is far larger than the socket buffers (`big`) or a
// pause between statements (`idle`). Prints {"inside":true} once the statement is sent, then one
// JSON line with the outcome. The parent SIGSTOPs it on "inside".
//
//   node frozen-writer-worker.mjs <url> <fence table> <big|idle> <idleInTransactionTimeoutMs>
import pg from 'pg';
import { withFence } from '@leasehold/fence/postgres';

const [url, table, mode, idleMs] = process.argv.slice(2);
const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const pool = new pg.Pool({ connectionString: url, max: 1 });
try {
  const result = await withFence(
    pool,
    { resource: 'printer', token: 5n, table, idleInTransactionTimeoutMs: Number(idleMs) },
    async (tx) => {
      await tx.query('SELECT 1');
      if (mode === 'big') {
        // 20 MB: more than loopback's socket buffers, so the backend blocks sending it.
        const big = tx.query("SELECT repeat('x', 1000000) FROM generate_series(1, 20)");
        say({ inside: true });
        await big;
      } else {
        say({ inside: true });
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      await tx.query('SELECT 2');
      return 'late statement ran';
    },
  );
  say({ result });
} catch (err) {
  say({ error: String(err), code: err?.code });
}
await pool.end();
