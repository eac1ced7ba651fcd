import { describeFenceConformance } from '@leasehold/fence/conformance';
import { isInvalidArgumentError, isStaleTokenError, type StaleTokenError } from '@leasehold/fence';
import {
  postgresStore,
  postgresStoreDDL,
  upsertFencedRow,
  withFence,
  fencedQuery,
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
  const newPool = (max?: number): PgPool => {
    const pool = pgPool(url, max);
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
  it('withFence: a writer frozen inside its transaction blocks the next holder at most idleInTransactionTimeoutMs, and its own late statement fails', async () => {
    const fences = uniqueName('fence');
    tables.push(fences);
    await admin.query(fenceTableDDL({ table: fences }));
    const pool = newPool();
    pool.on('error', () => undefined); // the frozen writer's connection is ended by the server
    const idleMs = 1_000;
    let wake!: () => void;
    const frozen = new Promise<void>((resolve) => (wake = resolve));
    let inside!: () => void;
    const entered = new Promise<void>((resolve) => (inside = resolve));
    // The old holder stops sending between its statements, as a SIGSTOPped process would.
    const old = withFence(
      pool,
      { resource: 'printer', token: 5n, table: fences, idleInTransactionTimeoutMs: idleMs },
      async (tx) => {
        await tx.query('SELECT 1');
        inside();
        await frozen;
        await tx.query('SELECT 2');
        return 'late statement ran';
      },
    ).catch((e: unknown) => e);
    await entered;
    const started = performance.now();
    const next = await withFence(
      pool,
      { resource: 'printer', token: 6n, table: fences },
      async () => 'next holder wrote',
    );
    const waitedMs = performance.now() - started;
    expect(next).toBe('next holder wrote');
    // PostgreSQL checks the idle bound on its own timer: the wait is the bound, not a freeze.
    expect(waitedMs).toBeLessThan(idleMs + 5_000);
    wake();
    const outcome = await old;
    expect(outcome).toBeInstanceOf(Error);
    expect(isStaleTokenError(outcome)).toBe(false);
    const { rows } = await admin.query<{ token: string }>(
      `SELECT token::text FROM "${fences}" WHERE resource = 'printer'`,
    );
    expect(rows).toEqual([{ token: '6' }]);
  });

  it('withFence refuses an idleInTransactionTimeoutMs that PostgreSQL cannot take, before anything is sent', async () => {
    for (const bad of [-1, 1.5, 2 ** 31, Number.NaN, '1000']) {
      const err = await withFence(
        admin,
        { resource: 'r', token: 1n, idleInTransactionTimeoutMs: bad as number },
        async () => undefined,
      ).catch((e: unknown) => e);
      expect(isInvalidArgumentError(err)).toBe(true);
      expect((err as Error).message).toMatch(
        /^options\.idleInTransactionTimeoutMs must be an integer from 0 \(no bound\) to \d+, got /,
      );
    }
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

  it('withFence and fencedQuery on a missing fence table name the DDL function that creates it', async () => {
    const missing = uniqueName('no_fence');
    const calls = [
      withFence(admin, { resource: 'job', token: 10n, table: missing }, async () => {}),
      fencedQuery(admin, { resource: 'job', token: 10n, table: missing }, { text: 'SELECT 1' }),
    ];
    for (const call of calls) {
      const err = await call.catch((e: unknown) => e);
      expect(isInvalidArgumentError(err)).toBe(true);
      expect((err as Error).message).toContain(
        `table "${missing}" must exist, with a column "token" with type bigint (int8), got no such table; create it once`,
      );
      expect((err as Error).message).toContain(
        `fenceTableDDL() from @leasehold/fence/postgres: await pool.query(fenceTableDDL({ table: "${missing}" }))`,
      );
    }
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
    expect((err as Error).message).toMatch(/GREATEST types text and bigint cannot be matched/);
    // The single-statement form refuses it the same way.
    const single = await fencedQuery(
      admin,
      { resource: 'job', token: 9n, table: fences },
      { text: 'SELECT 1' },
    ).catch((e: unknown) => e);
    expect(isStaleTokenError(single)).toBe(false);
    expect((single as Error).message).toMatch(/operator does not exist: text <= bigint/);
    const { rows } = await admin.query(`SELECT token FROM "${fences}"`);
    expect(rows).toEqual([{ token: '10' }]);
    expect(admin.idleCount).toBe(admin.totalCount);
  });

  /** A fence table and a counter table with one row per resource, this test's own. */
  async function ledger(): Promise<{ fences: string; counters: string }> {
    const fences = uniqueName('fence');
    const counters = uniqueName('counters');
    tables.push(fences, counters);
    await admin.query(fenceTableDDL({ table: fences }));
    await admin.query(
      `CREATE TABLE "${counters}" (id text PRIMARY KEY, n int NOT NULL, last text)`,
    );
    await admin.query(`INSERT INTO "${counters}" VALUES ('c', 0, NULL)`);
    return { fences, counters };
  }

  it('fencedQuery runs one statement under the fence and returns its rows, typed', async () => {
    const { fences, counters } = await ledger();
    const bump = (token: bigint) =>
      fencedQuery<{ n: number; last: string }>(
        admin,
        { resource: 'c', token, table: fences },
        {
          text: `UPDATE "${counters}" SET n = n + 1, last = $2 WHERE id = $1 RETURNING n, last`,
          values: ['c', token],
        },
      );
    const first = await bump(9007199254740993n);
    expect(first).toEqual({
      rows: [{ n: 1, last: '9007199254740993' }],
      rowCount: 1,
      command: 'UPDATE 1',
    });
    // Above 2^53 the token compares exactly: one less is stale, and its statement never ran.
    const err = await bump(9007199254740992n).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(9007199254740993n);
    expect((err as StaleTokenError).token).toBe(9007199254740992n);
    await bump(9223372036854775807n);
    const { rows } = await admin.query(`SELECT n, last FROM "${counters}"`);
    expect(rows).toEqual([{ n: 2, last: '9223372036854775807' }]);
    const fence = await admin.query(`SELECT token::text AS token FROM "${fences}"`);
    expect(fence.rows).toEqual([{ token: '9223372036854775807' }]);
    expect(admin.idleCount).toBe(admin.totalCount);
  });

  it('fencedQuery rolls the fence advance back with a statement that fails', async () => {
    const { fences, counters } = await ledger();
    await fencedQuery(
      admin,
      { resource: 'c', token: 5n, table: fences },
      {
        text: `UPDATE "${counters}" SET n = n + 1 WHERE id = 'c'`,
      },
    );
    const err = await fencedQuery(
      admin,
      { resource: 'c', token: 8n, table: fences },
      {
        text: `UPDATE "${counters}" SET n = n / 0 WHERE id = 'c'`,
      },
    ).catch((e: unknown) => e);
    // The statement's own division by zero is pg's error, not a stale token.
    expect(isStaleTokenError(err)).toBe(false);
    expect((err as { code?: string }).code).toBe('22012');
    // Token 8 was rolled back, so 6 is accepted.
    await fencedQuery(
      admin,
      { resource: 'c', token: 6n, table: fences },
      {
        text: `UPDATE "${counters}" SET n = n + 1 WHERE id = 'c'`,
      },
    );
    const { rows } = await admin.query(`SELECT n FROM "${counters}"`);
    expect(rows).toEqual([{ n: 2 }]);
    const fence = await admin.query(`SELECT token::text AS token FROM "${fences}"`);
    expect(fence.rows).toEqual([{ token: '6' }]);
  });

  it('fencedQuery refuses bad statements and values before anything is sent', async () => {
    const { fences } = await ledger();
    for (const statement of [{ text: '' }, { text: 'SELECT $1', values: [{}] }, null]) {
      const err = await fencedQuery(
        admin,
        { resource: 'c', token: 1n, table: fences },
        statement as never,
      ).catch((e: unknown) => e);
      expect(isInvalidArgumentError(err)).toBe(true);
    }
    const { rows } = await admin.query(`SELECT count(*)::int AS n FROM "${fences}"`);
    expect(rows).toEqual([{ n: 0 }]);
  });

  for (const kind of ['withFence', 'fencedQuery'] as const) {
    it(`${kind}: racing writers with shuffled tokens leave exactly the writes that were accepted`, async () => {
      const { fences, counters } = await ledger();
      const pool = newPool();
      const tokens = Array.from({ length: 24 }, (_, i) => 2n ** 60n + BigInt(i));
      tokens.sort(() => Math.random() - 0.5);
      const write = (token: bigint) => {
        const statement = {
          text: `UPDATE "${counters}" SET n = n + 1, last = $2 WHERE id = $1`,
          values: ['c', token.toString()],
        };
        return kind === 'withFence'
          ? withFence(pool, { resource: 'c', token, table: fences }, (tx) =>
              tx.query(statement.text, statement.values),
            )
          : fencedQuery(pool, { resource: 'c', token, table: fences }, statement);
      };
      const outcomes = await Promise.allSettled(tokens.map(write));
      const accepted = tokens.filter((_, i) => outcomes[i]!.status === 'fulfilled');
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') expect(isStaleTokenError(outcome.reason)).toBe(true);
      }
      // Every accepted write counted once, the highest token always accepted and last.
      const highest = tokens.reduce((a, b) => (a > b ? a : b));
      expect(accepted).toContain(highest);
      const { rows } = await admin.query(`SELECT n, last FROM "${counters}"`);
      expect(rows).toEqual([{ n: accepted.length, last: highest.toString() }]);
      const fence = await admin.query(`SELECT token::text AS token FROM "${fences}"`);
      expect(fence.rows).toEqual([{ token: highest.toString() }]);
      expect(pool.idleCount).toBe(pool.totalCount);
    });
  }

  it('prepares its fence statements once per connection and recovers when they are deallocated', async () => {
    const { fences, counters } = await ledger();
    const pool = newPool(1);
    const update = { text: `UPDATE "${counters}" SET n = n + 1 WHERE id = $1`, values: ['c'] };
    const prepared = async () =>
      (
        await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'leasehold_fence_%'",
        )
      ).rows[0]!.n;
    await withFence(pool, { resource: 'c', token: 1n, table: fences }, (tx) =>
      tx.query(update.text, update.values),
    );
    await fencedQuery(pool, { resource: 'c', token: 2n, table: fences }, update);
    // withFence's claim (which sets the idle bound), fencedQuery's advance.
    expect(await prepared()).toBe(2);
    await withFence(pool, { resource: 'c', token: 3n, table: fences }, (tx) =>
      tx.query(update.text, update.values),
    );
    expect(await prepared()).toBe(2);
    // Gone behind the package's back: the next calls prepare them again and succeed.
    await pool.query('DEALLOCATE ALL');
    await withFence(pool, { resource: 'c', token: 4n, table: fences }, (tx) =>
      tx.query(update.text, update.values),
    );
    await pool.query('DEALLOCATE ALL');
    await fencedQuery(pool, { resource: 'c', token: 5n, table: fences }, update);
    // Only the statement used since the last DEALLOCATE is back.
    expect(await prepared()).toBe(1);
    const { rows } = await admin.query(`SELECT n FROM "${counters}"`);
    expect(rows).toEqual([{ n: 5 }]);
  });

  it('withFence on a stale token leaves no partial write, also above 2^53', async () => {
    const { fences, counters } = await ledger();
    await withFence(admin, { resource: 'c', token: 9007199254740993n, table: fences }, (tx) =>
      tx.query(`UPDATE "${counters}" SET n = n + 1 WHERE id = 'c'`),
    );
    let ran = false;
    const err = await withFence(
      admin,
      { resource: 'c', token: 9007199254740992n, table: fences },
      async (tx) => {
        ran = true;
        await tx.query(`UPDATE "${counters}" SET n = n + 100 WHERE id = 'c'`);
      },
    ).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(9007199254740993n);
    expect(ran).toBe(false);
    const { rows } = await admin.query(
      `SELECT n, (SELECT token::text FROM "${fences}") AS token FROM "${counters}"`,
    );
    expect(rows).toEqual([{ n: 1, token: '9007199254740993' }]);
    expect(admin.idleCount).toBe(admin.totalCount);
  });
});
