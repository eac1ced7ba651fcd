import { describeFenceConformance } from '@leasehold/fence/conformance';
import { isInvalidArgumentError, isStaleTokenError, type StaleTokenError } from '@leasehold/fence';
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
    await admin.query(fenceTableDDL({ table: fences }));
    await admin.query(`CREATE TABLE "${log}" (line text)`);
    const insert = (line: string) => async (tx: PgClient) => {
      await tx.query(`INSERT INTO "${log}" VALUES ($1)`, [line]);
    };

    await withFence(admin, { resource: 'job', token: 5n, table: fences }, insert('five'));
    const boom = new Error('boom');
    await expect(
      withFence(admin, { resource: 'job', token: 8n, table: fences }, async (tx) => {
        await insert('eight')(tx);
        throw boom;
      }),
    ).rejects.toBe(boom);
    // Token 8 was rolled back with the statements, so 6 is still the newest holder.
    await withFence(admin, { resource: 'job', token: 6n, table: fences }, insert('six'));
    await expect(
      withFence(admin, { resource: 'job', token: 5n, table: fences }, insert('late')),
    ).rejects.toSatisfy(isStaleTokenError);
    const { rows } = await admin.query(`SELECT line FROM "${log}"`);
    expect(rows.map((r: { line: string }) => r.line).sort()).toEqual(['five', 'six']);
    expect(admin.idleCount).toBe(admin.totalCount); // every checked-out client went back
  });

  it('withFence holds the fence row: a lower token waits for the open transaction, then is stale', async () => {
    const fences = uniqueName('fence');
    tables.push(fences);
    await admin.query(fenceTableDDL({ table: fences }));
    const pool = newPool();

    let commit!: () => void;
    const holding = new Promise<void>((resolve) => (commit = resolve));
    let insideHigh!: (pid: number) => void;
    const highStarted = new Promise<number>((resolve) => (insideHigh = resolve));
    const high = withFence(pool, { resource: 'printer', token: 10n, table: fences }, async (tx) => {
      const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      insideHigh(rows[0]!.pid);
      await holding;
    });
    await highStarted;

    const lowClient = await pool.connect();
    const { rows } = await lowClient.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const lowPid = rows[0]!.pid;
    // Settled into a value at once: it rejects while the test awaits `high`, and a rejection
    // with no handler yet would be reported as unhandled.
    const low = withFence(
      lowClient,
      { resource: 'printer', token: 9n, table: fences },
      async () => 'ran',
    )
      .finally(() => lowClient.release())
      .catch((e: unknown) => e);
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
    const err = await low;
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(10n);
  });
  it('upsertFencedRow refuses a text fence column, naming the table, the column and the type', async () => {
    const table = uniqueName('text_fence');
    tables.push(table);
    await admin.query(`CREATE TABLE "${table}" (id text PRIMARY KEY, body text, fence text)`);
    const write = (token: bigint) =>
      upsertFencedRow(admin, { table, key: { id: 'a' }, values: { body: `t${token}` }, token });
    // As text, '9' > '10': without the check token 9 would overwrite token 10's row.
    const err = await write(10n).catch((e: unknown) => e);
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toContain(`"${table}"`);
    expect((err as Error).message).toContain('"fence"');
    expect((err as Error).message).toMatch(/bigint \(int8\)/);
    await expect(write(9n)).rejects.toSatisfy(isInvalidArgumentError);
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${table}"`)).rows[0]).toEqual({
      n: 0,
    });
  });

  it('upsertFencedRow compares with the int8 token even if the column turned text after the check', async () => {
    const table = uniqueName('retyped_fence');
    tables.push(table);
    await admin.query(`CREATE TABLE "${table}" (id text PRIMARY KEY, body text, fence int8)`);
    const write = (token: bigint) =>
      upsertFencedRow(admin, { table, key: { id: 'a' }, values: { body: `t${token}` }, token });
    await write(10n); // checks and caches the column type
    await admin.query(`ALTER TABLE "${table}" ALTER COLUMN fence TYPE text`);
    const err = await write(9n).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(isStaleTokenError(err)).toBe(false);
    expect((err as Error).message).toMatch(/operator does not exist: text <= bigint/);
    const { rows } = await admin.query(`SELECT body, fence FROM "${table}"`);
    expect(rows).toEqual([{ body: 't10', fence: '10' }]);
  });

  it('withFence refuses a fence table whose token column is text', async () => {
    const fences = uniqueName('text_token');
    tables.push(fences);
    // A hand-made fence table, as the DDL would make it but for the token's type.
    const columns = 'resource text PRIMARY KEY, token text NOT NULL, updated_at timestamptz';
    await admin.query(`CREATE TABLE "${fences}" (${columns})`);
    let ran = 0;
    const err = await withFence(
      admin,
      { resource: 'job', token: 10n, table: fences },
      async () => ran++,
    ).catch((e: unknown) => e);
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toContain(`"${fences}"`);
    expect((err as Error).message).toContain('"token"');
    expect((err as Error).message).toMatch(/bigint \(int8\)/);
    expect(ran).toBe(0);
  });

  it('withFence compares with the int8 token even if the column turned text after the check', async () => {
    const fences = uniqueName('retyped_token');
    tables.push(fences);
    // The DDL's table without its CHECK, which would stop the column turning text.
    const columns = 'resource text PRIMARY KEY, token int8 NOT NULL, updated_at timestamptz';
    await admin.query(`CREATE TABLE "${fences}" (${columns})`);
    await withFence(admin, { resource: 'job', token: 10n, table: fences }, async () => undefined);
    await admin.query(`ALTER TABLE "${fences}" ALTER COLUMN token TYPE text`);
    const err = await withFence(
      admin,
      { resource: 'job', token: 9n, table: fences },
      async () => undefined,
    ).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(false);
    expect((err as Error).message).toMatch(/operator does not exist: text <= bigint/);
    const { rows } = await admin.query(`SELECT token FROM "${fences}"`);
    expect(rows).toEqual([{ token: '10' }]);
  });
});
