import type { ClientBase, Pool, PoolClient } from 'pg';
import {
  checkFence,
  checkResource,
  type Fence,
  type FencedStore,
  type SqlStoreOptions,
} from './contract.js';
import { StaleTokenError } from './errors.js';
import * as sql from './sql.js';
import { parseToken, type TokenInput } from './token.js';

/**
 * Fencing in PostgreSQL, two ways:
 * - {@link upsertFencedRow}: the row carries its own `fence int8` column and the write is one
 *   conditional upsert (the "seed" pattern: no extra table, one round trip);
 * - {@link withFence}: a fence table keeps the highest token per resource, and your statements
 *   run in the same transaction as the conditional upsert of that token.
 *
 * Tokens always travel as decimal-string parameters cast with `::int8`, so PostgreSQL compares
 * them as exact 64-bit integers; only validated, quoted identifiers ever become SQL text.
 */

/** A pool, a pooled client or a connected client from `pg`. */
export type PgQueryable = Pool | ClientBase;

/** Defaults for every option in this module, in one place. */
export const postgresDefaults = {
  /** The fence table {@link withFence} uses. */
  fenceTable: 'leasehold_fence',
  /** The token column of a fenced row. */
  fenceColumn: 'fence',
  /** The value table of {@link postgresStore}. */
  valueTable: 'leasehold_value',
} as const;

/** Names the fence table: the same option {@link withFence} takes. */
export interface FenceTableOptions {
  /** The fence table, optionally `schema.table`. Default `leasehold_fence`. */
  table?: string;
}

/**
 * DDL for the fence table {@link withFence} needs. Idempotent (`IF NOT EXISTS`); run it in your
 * migrations.
 */
export function fenceTableDDL(options: FenceTableOptions = {}): string {
  return sql.fenceTableDDL('postgres', options.table ?? postgresDefaults.fenceTable);
}

/** One fenced row write: which row, what to set, under which token. */
export interface FencedRowWrite {
  /** Table name, optionally `schema.table`. */
  table: string;
  /** Columns that identify the row (a primary key or unique constraint) and their values. */
  key: Record<string, unknown>;
  /** Other columns to set, and their values. */
  values?: Record<string, unknown>;
  token: TokenInput;
  /** The row's `int8` token column. Default `fence`. */
  fenceColumn?: string;
  /** The name a {@link StaleTokenError} reports. Default `table[column=value,...]`. */
  resource?: string;
}

/**
 * Inserts the row, or updates it iff its fence column is NULL or <= the token, in one statement:
 * `INSERT ... ON CONFLICT (key) DO UPDATE SET ... WHERE t.fence IS NULL OR t.fence <= $n::int8`.
 * A NULL fence counts as "never fenced" so a column added to existing rows works at once.
 *
 * @throws InvalidArgumentError when the fence column is not `bigint` (checked once per handle).
 * @throws StaleTokenError when the row holds a higher token (read back for the message).
 */
export async function upsertFencedRow(db: PgQueryable, write: FencedRowWrite): Promise<void> {
  const token = parseToken(write.token);
  const keyValues = Object.values(write.key);
  const statements = sql.fencedRowSQL('postgres', {
    table: write.table,
    keyColumns: Object.keys(write.key),
    valueColumns: Object.keys(write.values ?? {}),
    fenceColumn: write.fenceColumn ?? postgresDefaults.fenceColumn,
  });
  await checkTokenColumn(db, write.table, write.fenceColumn ?? postgresDefaults.fenceColumn);
  const t = token.toString();
  const params = [...keyValues, ...Object.values(write.values ?? {}), t, t];
  const result = await db.query(statements.upsert, params);
  if (result.rowCount === 1) return;
  const current = await db.query<{ fence: string | null }>(statements.select, keyValues);
  throw new StaleTokenError(
    write.resource ?? rowName(write),
    token,
    toToken(current.rows[0]?.fence),
  );
}

function rowName(write: FencedRowWrite): string {
  const key = Object.entries(write.key).map(([c, v]) => `${c}=${String(v)}`);
  return `${write.table}[${key.join(',')}]`;
}

/** `{ resource, token }` and the fence table. */
export interface WithFenceOptions extends Fence, FenceTableOptions {}

/**
 * Runs `statements` in one transaction that first advances `resource`'s highest token in the
 * fence table, iff `token` >= the stored one. The upsert keeps the fence row locked until commit,
 * so a concurrent writer of the same resource waits and then sees the new token. On a stale token
 * the transaction rolls back before `statements` run; if `statements` throw, it rolls back and
 * the error propagates unchanged.
 *
 * Pass a pool (a client is checked out and released) or a client that is not already in a
 * transaction. The transaction uses the session's default isolation level; under SERIALIZABLE a
 * serialization failure surfaces as pg's own error, to retry as you would any other.
 *
 * @throws InvalidArgumentError when the fence table's `token` is not `bigint` (checked once).
 * @throws StaleTokenError when the fence table holds a higher token for `resource`.
 */
export async function withFence<T>(
  db: PgQueryable,
  options: WithFenceOptions,
  statements: (tx: ClientBase) => Promise<T>,
): Promise<T> {
  const { resource, token } = checkFence(options);
  const table = options.table ?? postgresDefaults.fenceTable;
  const fences = sql.fenceTableSQL('postgres', table);
  const t = token.toString();
  const client = isPool(db) ? await db.connect() : db;
  let broken: unknown;
  try {
    await checkTokenColumn(db, table, 'token', client);
    await client.query('BEGIN');
    try {
      const advanced = await client.query(fences.advance, [resource, t, t]);
      if (advanced.rowCount !== 1) {
        const current = await client.query<{ token: string }>(fences.select, [resource]);
        throw new StaleTokenError(resource, token, toToken(current.rows[0]?.token));
      }
      const result = await statements(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        // A connection that cannot roll back must not go back to the pool.
        broken = rollbackError;
      });
      throw err;
    }
  } finally {
    if (client !== db) (client as PoolClient).release(broken instanceof Error ? broken : undefined);
  }
}

/**
 * Refuses a token column that is not `bigint`: as text, '9' > '10'. Checked once per
 * (handle, table, column); `via` is the client to ask when `db` is a pool already checked out.
 */
async function checkTokenColumn(
  db: PgQueryable,
  table: string,
  column: string,
  via: PgQueryable = db,
): Promise<void> {
  const query = sql.columnTypeQuery('postgres', table, column);
  if (sql.isChecked(db, query)) return;
  const { rows } = await via.query<{ found: boolean; type: string | null }>(
    query.sql,
    query.params,
  );
  sql.checkIntegerColumn('postgres', query, rows[0]?.found === true, rows[0]?.type ?? undefined);
  sql.markChecked(db, query);
}

function isPool(db: PgQueryable): db is Pool {
  return 'totalCount' in db && 'idleCount' in db;
}

function toToken(text: string | null | undefined): bigint | undefined {
  return text === null || text === undefined ? undefined : BigInt(text);
}

export type PostgresStoreOptions = SqlStoreOptions;

/** DDL for a {@link postgresStore}: its value table, plus the fence table when it uses one. */
export function postgresStoreDDL(options: PostgresStoreOptions = {}): string[] {
  const ddl = [sql.valueTableDDL('postgres', options.valueTable ?? postgresDefaults.valueTable)];
  if (options.via === 'fence-table') ddl.push(fenceTableDDL({ table: options.fenceTable }));
  return ddl;
}

/**
 * A {@link FencedStore} of one text value per resource: the conformance suite's view of this
 * module, and a worked example of both helpers.
 */
export function postgresStore(db: PgQueryable, options: PostgresStoreOptions = {}): FencedStore {
  const valueTable = options.valueTable ?? postgresDefaults.valueTable;
  const fenceTable = options.fenceTable ?? postgresDefaults.fenceTable;
  const values = sql.valueTableSQL('postgres', valueTable);
  const fences = sql.fenceTableSQL('postgres', fenceTable);
  const viaTable = options.via === 'fence-table';

  return {
    async write(write) {
      const { resource, token } = checkFence(write);
      if (!viaTable) {
        await upsertFencedRow(db, {
          table: valueTable,
          key: { resource },
          values: { value: write.value },
          token,
          resource,
        });
        return;
      }
      await withFence(db, { resource, token, table: fenceTable }, async (tx) => {
        await tx.query(values.write, [resource, write.value, token.toString()]);
      });
    },

    async read(resource) {
      const { rows } = await db.query<{ value: string; token: string }>(values.read, [
        checkResource(resource),
      ]);
      const row = rows[0];
      return row === undefined ? undefined : { value: row.value, token: BigInt(row.token) };
    },

    async highestToken(resource) {
      const { rows } = viaTable
        ? await db.query<{ token: string }>(fences.select, [checkResource(resource)])
        : await db.query<{ token: string }>(values.read, [checkResource(resource)]);
      return toToken(rows[0]?.token);
    },
  };
}
