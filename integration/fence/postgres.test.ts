import { describeFenceConformance } from '@leasehold/fence/conformance';
import { isStaleTokenError, type StaleTokenError } from '@leasehold/fence';
import {
  postgresStore,
  postgresStoreDDL,
  upsertFencedRow,
  withFence,
  fenceTableDDL,
  type PostgresStoreOptions,
} from '@leasehold/fence/postgres';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  describeWith,
  findPostgres,
  pgPool,
  uniqueName,
  type PgClient,
  type PgPool,
} from './stores.js';

describeWith(await findPostgres(), 'fence: PostgreSQL', (url) => {
  const pools: PgPool[] = [];
  const tables: string[] = [];
  const newPool = (): PgPool => {
    const pool = pgPool(url);
    pools.push(pool);
    return pool;
  };
  let admin: PgPool;
  beforeAll(() => {
    admin = newPool();
  });
  afterAll(async () => {
    // Only this file's own tables; shared data is never touched.
    for (const table of tables) await admin.query(`DROP TABLE IF EXISTS "${table}"`);
    await Promise.all(pools.map((pool) => pool.end()));
  });

  for (const via of ['row', 'fence-table'] as const) {
    describeFenceConformance(`postgres (${via})`, async () => {
      const options: PostgresStoreOptions = {
        via,
        valueTable: uniqueName(`value_${via.replace('-', '_')}`),
        fenceTable: uniqueName('fence'),
      };
      tables.push(options.valueTable!, options.fenceTable!);
      for (const ddl of postgresStoreDDL(options)) await admin.query(ddl);
      return {
        store: postgresStore(newPool(), options),
        reopen: async () => postgresStore(newPool(), options),
      };
    });
  }

  it('fences rows of an existing table through its own fence column (seed pattern)', async () => {
    const table = uniqueName('accounts');
    tables.push(table);
    await admin.query(
      `CREATE TABLE "${table}" (id text PRIMARY KEY, balance int NOT NULL, fence int8)`,
    );
    // A row from before fencing existed: NULL fence, accepted by any token.
    await admin.query(`INSERT INTO "${table}" (id, balance) VALUES ('alice', 100)`);

    await upsertFencedRow(admin, {
      table,
      key: { id: 'alice' },
      values: { balance: 90 },
      token: 9007199254740993n,
    });
    const err = await upsertFencedRow(admin, {
      table,
      key: { id: 'alice' },
      values: { balance: 0 },
      token: 9007199254740992n,
    }).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(9007199254740993n);

    await upsertFencedRow(admin, { table, key: { id: 'bob' }, values: { balance: 5 }, token: 1n });
    const { rows } = await admin.query(
      `SELECT id, balance, fence::text AS fence FROM "${table}" ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: 'alice', balance: 90, fence: '9007199254740993' },
      { id: 'bob', balance: 5, fence: '1' },
    ]);
  });

  it('withFence rolls back the fence advance when the statements fail', async () => {
    const fences = uniqueName('fence');
    const log = uniqueName('log');
    tables.push(fences, log);
    await admin.query(fenceTableDDL(fences));
    await admin.query(`CREATE TABLE "${log}" (line text)`);
    const insert = (line: string) => async (tx: PgClient) => {
      await tx.query(`INSERT INTO "${log}" VALUES ($1)`, [line]);
    };

    await withFence(admin, 'job', 5n, insert('five'), { table: fences });
    const boom = new Error('boom');
    await expect(
      withFence(
        admin,
        'job',
        8n,
        async (tx) => {
          await insert('eight')(tx);
          throw boom;
        },
        { table: fences },
      ),
    ).rejects.toBe(boom);
    // Token 8 was rolled back with the statements, so 6 is still the newest holder.
    await withFence(admin, 'job', 6n, insert('six'), { table: fences });
    await expect(withFence(admin, 'job', 5n, insert('late'), { table: fences })).rejects.toSatisfy(
      isStaleTokenError,
    );
    const { rows } = await admin.query(`SELECT line FROM "${log}"`);
    expect(rows.map((r: { line: string }) => r.line).sort()).toEqual(['five', 'six']);
    expect(admin.idleCount).toBe(admin.totalCount); // every checked-out client went back
  });

  it('withFence holds the fence row: a lower token waits for the open transaction, then is stale', async () => {
    const fences = uniqueName('fence');
    tables.push(fences);
    await admin.query(fenceTableDDL(fences));
    const pool = newPool();

    let commit!: () => void;
    const holding = new Promise<void>((resolve) => (commit = resolve));
    let insideHigh!: (pid: number) => void;
    const highStarted = new Promise<number>((resolve) => (insideHigh = resolve));
    const high = withFence(
      pool,
      'printer',
      10n,
      async (tx) => {
        const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        insideHigh(rows[0]!.pid);
        await holding;
      },
      { table: fences },
    );
    await highStarted;

    const lowClient = await pool.connect();
    const { rows } = await lowClient.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const lowPid = rows[0]!.pid;
    const low = withFence(lowClient, 'printer', 9n, async () => 'ran', { table: fences }).finally(
      () => lowClient.release(),
    );
    // The low writer is observably blocked on the high writer's row lock (an event, not a delay).
    await expect
      .poll(
        async () =>
          (
            await admin.query<{ wait: string | null }>(
              'SELECT wait_event_type AS wait FROM pg_stat_activity WHERE pid = $1',
              [lowPid],
            )
          ).rows[0]?.wait,
        { timeout: 10_000, interval: 20 },
      )
      .toBe('Lock');
    commit();
    await high;
    const err = await low.catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(10n);
  });
});
