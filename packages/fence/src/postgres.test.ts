import type { ClientBase } from 'pg';
import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError, isStaleTokenError, type StaleTokenError } from './errors.js';
import { fenceTableDDL, upsertFencedRow, withFence } from './postgres.js';

type Answer = { rowCount: number; rows: Record<string, unknown>[] };

interface Handlers {
  submit(connection: unknown): void;
  handleRowDescription(msg: { fields: { name: string; dataTypeID: number }[] }): void;
  handleDataRow(msg: { fields: unknown[] }): void;
  handleCommandComplete(msg: { text: string }): void;
  handleReadyForQuery(): void;
}

/**
 * Plays pg's side of a batched submission: collects the statements it writes (Parse, Bind,
 * Describe, Execute), answers each from the script in order, then ReadyForQuery.
 */
async function answerBatch(
  batch: Handlers,
  record: (sql: string, params: unknown[]) => Answer,
): Promise<void> {
  const statements: { sql: string; params: unknown[]; describe: boolean }[] = [];
  batch.submit({
    stream: {},
    parse: ({ text }: { text: string }) =>
      statements.push({ sql: text, params: [], describe: false }),
    bind: ({ values }: { values: unknown[] }) => (statements.at(-1)!.params = [...values]),
    describe: () => (statements.at(-1)!.describe = true),
    execute: () => undefined,
    close: () => undefined,
    sync: () => undefined,
  });
  await Promise.resolve();
  for (const { sql, params, describe } of statements) {
    const { rows, rowCount } = record(sql, params);
    const names = Object.keys(rows[0] ?? {});
    if (describe)
      batch.handleRowDescription({ fields: names.map((name) => ({ name, dataTypeID: 25 })) });
    for (const row of rows) batch.handleDataRow({ fields: names.map((n) => row[n]) });
    batch.handleCommandComplete({ text: `${sql.split(' ')[0]} ${rowCount}` });
  }
  batch.handleReadyForQuery();
}

/**
 * Records every query and answers from a script, so SQL shape and parameters can be checked.
 * The column type check is answered with `columnType` (bigint unless told) and not recorded.
 */
function fakeClient(answer: (sql: string) => Answer, columnType: string | null = 'bigint') {
  const queries: { sql: string; params: unknown[] | undefined }[] = [];
  const typeChecks: unknown[][] = [];
  const client = {
    getTypeParser: () => (v: string) => v,
    // withFence listens for the connection's errors while it runs.
    on: () => client,
    removeListener: () => client,
    async query(sql: string | Handlers, params?: unknown[]) {
      if (typeof sql !== 'string') {
        await answerBatch(sql, (text, values) => {
          queries.push({ sql: text, params: values });
          return answer(text);
        });
        return sql;
      }
      if (sql.includes('to_regclass')) {
        typeChecks.push(params ?? []);
        return { rowCount: 1, rows: [{ found: true, type: columnType }] };
      }
      queries.push({ sql, params });
      return answer(sql);
    },
  };
  return { client: client as unknown as ClientBase, queries, typeChecks };
}

const big = 9223372036854775807n;

describe('postgres upsertFencedRow', () => {
  it('sends the token as an int8 parameter, never in the SQL text, and compares with it', async () => {
    const { client, queries } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    await upsertFencedRow(client, {
      table: 'app.accounts',
      key: { id: 'a' },
      values: { balance: 10 },
      token: big,
    });
    const [upsert] = queries;
    expect(upsert?.sql).not.toContain(big.toString());
    expect(upsert?.sql).toContain('INSERT INTO "app"."accounts" AS "target"');
    expect(upsert?.sql).toContain('VALUES ($1, $2, $3::int8)');
    expect(upsert?.sql).toContain('WHERE "target"."fence" IS NULL OR "target"."fence" <= $4::int8');
    expect(upsert?.params).toEqual(['a', 10, '9223372036854775807', '9223372036854775807']);
  });

  it('reads the current token back when no row changed', async () => {
    const { client, queries } = fakeClient((sql) =>
      sql.startsWith('SELECT')
        ? { rowCount: 1, rows: [{ fence: '9007199254740993' }] }
        : { rowCount: 0, rows: [] },
    );
    let caught: unknown;
    try {
      await upsertFencedRow(client, { table: 't', key: { id: 7 }, token: 9007199254740992n });
    } catch (err) {
      caught = err;
    }
    expect(isStaleTokenError(caught)).toBe(true);
    expect((caught as StaleTokenError).highestToken).toBe(9007199254740993n);
    expect((caught as StaleTokenError).resource).toBe('t[id=7]');
    expect(queries[1]?.params).toEqual([7]);
  });

  it('validates identifiers and tokens before sending anything', async () => {
    const { client, queries, typeChecks } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    await expect(
      upsertFencedRow(client, { table: 't', key: { 'id"--': 1 }, token: 1n }),
    ).rejects.toThrow(/^key column must be /);
    await expect(
      upsertFencedRow(client, { table: 't', key: { id: 1 }, token: '01' }),
    ).rejects.toThrow(/^fencing token must be .*, got "01"/);
    expect(queries).toEqual([]);
    expect(typeChecks).toEqual([]);
  });

  it('checks the fence column type once per handle, table and column', async () => {
    const { client, typeChecks } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    const write = (table: string, fenceColumn?: string) =>
      upsertFencedRow(client, { table, key: { id: 1 }, token: 1n, fenceColumn });
    await write('app.accounts');
    await write('app.accounts');
    await write('app.accounts', 'other_fence');
    await write('ledger');
    expect(typeChecks).toEqual([
      ['"app"."accounts"', 'fence'],
      ['"app"."accounts"', 'other_fence'],
      ['"ledger"', 'fence'],
    ]);
    const other = fakeClient(() => ({ rowCount: 1, rows: [] }));
    await upsertFencedRow(other.client, { table: 'app.accounts', key: { id: 1 }, token: 1n });
    expect(other.typeChecks).toHaveLength(1);
  });

  it.each([
    ['text', /must have type bigint \(int8\), got type text$/],
    ['integer', /got type integer$/],
    [null, /^table "t" must have a column "fence" .*, got a table without column "fence"$/],
  ])('refuses a fence column of type %s before writing', async (type, message) => {
    const { client, queries } = fakeClient(() => ({ rowCount: 1, rows: [] }), type);
    const err = await upsertFencedRow(client, { table: 't', key: { id: 1 }, token: 1n }).catch(
      (e: unknown) => e,
    );
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toMatch(message);
    expect(queries).toEqual([]);
  });
});

describe('postgres withFence', () => {
  // The fence upsert returns the greater of the stored token and the caller's.
  const claims = (highest: string) => (sql: string) =>
    sql.startsWith('INSERT')
      ? { rowCount: 1, rows: [{ token: highest }] }
      : { rowCount: 1, rows: [] };

  it('advances the fence first, runs the statements, commits', async () => {
    const { client, queries, typeChecks } = fakeClient(claims('5'));
    const result = await withFence(client, { resource: 'orders', token: 5n }, async (tx) => {
      await tx.query('UPDATE orders SET x = 1');
      return 'done';
    });
    expect(result).toBe('done');
    // The session's own idle bound (read once per connection; the fake answers none), then
    // BEGIN and the claim, which sets this transaction's bound too, in one round trip.
    expect(queries.map((q) => q.sql.split(' ')[0])).toEqual([
      'SELECT',
      'BEGIN',
      'INSERT',
      'UPDATE',
      'COMMIT',
    ]);
    expect(queries[0]?.sql).toContain('FROM pg_settings');
    expect(typeChecks).toEqual([['"leasehold_fence"', 'token']]);
    expect(queries[2]?.params).toEqual(['orders', '5', '10000']);
    expect(queries[2]?.sql).not.toMatch(/\b5\b/);
    expect(queries[2]?.sql).toContain(
      "set_config('idle_in_transaction_session_timeout', $3, true)",
    );
    expect(queries[2]?.sql).toContain('SELECT $1, $2::int8');
    expect(queries[2]?.sql).toContain('SET token = GREATEST("fence".token, $2::int8)');
    expect(queries[2]?.sql).toContain('RETURNING CAST(token AS text)');
  });

  it('rolls back without running the statements on a stale token', async () => {
    const { client, queries } = fakeClient(claims('9'));
    let ran = false;
    const err = await withFence(client, { resource: 'orders', token: 5n }, async () => {
      ran = true;
    }).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(9n);
    expect(ran).toBe(false);
    expect(queries.at(-1)?.sql).toBe('ROLLBACK');
  });

  it('rolls back and rethrows when the statements fail', async () => {
    const { client, queries } = fakeClient(claims('5'));
    const boom = new Error('boom');
    await expect(
      withFence(client, { resource: 'orders', token: 5n }, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(queries.at(-1)?.sql).toBe('ROLLBACK');
  });

  it('checks out and releases a pool client, also when the fence table is refused', async () => {
    for (const type of ['bigint', 'text']) {
      const { client } = fakeClient(claims('1'), type);
      let released = 0;
      const pooled = Object.assign(client, { release: () => released++ });
      const pool = { totalCount: 0, idleCount: 0, connect: async () => pooled };
      await withFence(pool as never, { resource: 'r', token: 1n }, async () => undefined).catch(
        (e: unknown) => expect(isInvalidArgumentError(e)).toBe(true),
      );
      expect(released, type).toBe(1);
    }
  });

  it('refuses the positional style of earlier versions with a clear error', async () => {
    const { client, queries } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    const positional = withFence as (...args: unknown[]) => Promise<unknown>;
    const err = await positional(client, 'orders', 5n, async () => undefined).catch(
      (e: unknown) => e,
    );
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toMatch(/^fence must be an object .*, got "orders"$/);
    expect(queries).toEqual([]);
  });
});

describe('postgres fenceTableDDL', () => {
  it('creates an int8 token column under a validated name', () => {
    expect(fenceTableDDL({ table: 'app.fences' })).toContain(
      'CREATE TABLE IF NOT EXISTS "app"."fences"',
    );
    expect(fenceTableDDL()).toContain('token int8 NOT NULL');
    expect(() => fenceTableDDL({ table: 'x;y' })).toThrow(/^fence table must be .*, got "x;y"$/);
  });
});
