import type { ClientBase, Pool, PoolClient } from 'pg';
import {
  checkResource,
  type FencedStore,
  type FencedValue,
  type SqlStoreOptions,
} from './contract.js';
import { InvalidArgumentError, StaleTokenError } from './errors.js';
import { quoteIdentifier } from './identifier.js';
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

/**
 * DDL for the fence table {@link withFence} needs. Idempotent (`IF NOT EXISTS`); run it in your
 * migrations.
 */
export function fenceTableDDL(table: string = postgresDefaults.fenceTable): string {
  const t = quoteIdentifier(table, 'fence table', true);
  return (
    `CREATE TABLE IF NOT EXISTS ${t} (\n` +
    `  resource text PRIMARY KEY,\n` +
    `  token int8 NOT NULL CHECK (token >= 1),\n` +
    `  updated_at timestamptz NOT NULL DEFAULT now()\n` +
    `)`
  );
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
 * `INSERT ... ON CONFLICT (key) DO UPDATE SET ... WHERE t.fence IS NULL OR t.fence <= EXCLUDED.fence`.
 * A NULL fence counts as "never fenced" so a column added to existing rows works at once.
 *
 * @throws StaleTokenError when the row holds a higher token (read back for the message).
 */
export async function upsertFencedRow(db: PgQueryable, write: FencedRowWrite): Promise<void> {
  const token = parseToken(write.token);
  const sql = fencedRowSQL(write);
  const params = [...Object.values(write.key), ...Object.values(write.values ?? {})];
  const result = await db.query(sql.upsert, [...params, token.toString()]);
  if (result.rowCount === 1) return;
  const current = await db.query<{ fence: string | null }>(sql.select, Object.values(write.key));
  throw new StaleTokenError(
    write.resource ?? rowName(write),
    token,
    toToken(current.rows[0]?.fence ?? undefined),
  );
}

function fencedRowSQL(write: FencedRowWrite): { upsert: string; select: string } {
  const table = quoteIdentifier(write.table, 'table', true);
  const fence = quoteIdentifier(write.fenceColumn ?? postgresDefaults.fenceColumn, 'fence column');
  const keys = Object.keys(write.key).map((c) => quoteIdentifier(c, 'key column'));
  const sets = Object.keys(write.values ?? {}).map((c) => quoteIdentifier(c, 'value column'));
  if (keys.length === 0) {
    throw new InvalidArgumentError(
      `invalid key {} for table ${table}: allowed: one or more columns of a unique constraint`,
    );
  }
  const columns = [...keys, ...sets, fence];
  const placeholders = columns.map((_, i) =>
    i === columns.length - 1 ? `$${i + 1}::int8` : `$${i + 1}`,
  );
  const updates = [...sets, fence].map((c) => `${c} = EXCLUDED.${c}`);
  const upsert =
    `INSERT INTO ${table} AS "target" (${columns.join(', ')}) VALUES (${placeholders.join(', ')}) ` +
    `ON CONFLICT (${keys.join(', ')}) DO UPDATE SET ${updates.join(', ')} ` +
    `WHERE "target".${fence} IS NULL OR "target".${fence} <= EXCLUDED.${fence}`;
  const where = keys.map((c, i) => `${c} = $${i + 1}`).join(' AND ');
  const select = `SELECT ${fence}::text AS fence FROM ${table} WHERE ${where}`;
  return { upsert, select };
}

function rowName(write: FencedRowWrite): string {
  const key = Object.entries(write.key).map(([c, v]) => `${c}=${String(v)}`);
  return `${write.table}[${key.join(',')}]`;
}

export interface WithFenceOptions {
  /** The fence table, created with {@link fenceTableDDL}. Default `leasehold_fence`. */
  table?: string;
}

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
 * @throws StaleTokenError when the fence table holds a higher token for `resource`.
 */
export async function withFence<T>(
  db: PgQueryable,
  resource: string,
  token: TokenInput,
  statements: (tx: ClientBase) => Promise<T>,
  options: WithFenceOptions = {},
): Promise<T> {
  checkResource(resource);
  const t = parseToken(token);
  const table = quoteIdentifier(options.table ?? postgresDefaults.fenceTable, 'fence table', true);
  const client = isPool(db) ? await db.connect() : db;
  let broken: unknown;
  try {
    await client.query('BEGIN');
    try {
      const advanced = await client.query(
        `INSERT INTO ${table} AS "fence" (resource, token) VALUES ($1, $2::int8) ` +
          `ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now() ` +
          `WHERE "fence".token <= EXCLUDED.token`,
        [resource, t.toString()],
      );
      if (advanced.rowCount !== 1) {
        const current = await client.query<{ token: string }>(
          `SELECT token::text AS token FROM ${table} WHERE resource = $1`,
          [resource],
        );
        throw new StaleTokenError(resource, t, toToken(current.rows[0]?.token));
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

function isPool(db: PgQueryable): db is Pool {
  return 'totalCount' in db && 'idleCount' in db;
}

function toToken(text: string | null | undefined): bigint | undefined {
  return text === null || text === undefined ? undefined : BigInt(text);
}

export type PostgresStoreOptions = SqlStoreOptions;

/** DDL for a {@link postgresStore}: its value table, plus the fence table when it uses one. */
export function postgresStoreDDL(options: PostgresStoreOptions = {}): string[] {
  const values = quoteIdentifier(
    options.valueTable ?? postgresDefaults.valueTable,
    'value table',
    true,
  );
  const ddl = [
    `CREATE TABLE IF NOT EXISTS ${values} (\n` +
      `  resource text PRIMARY KEY,\n` +
      `  value text NOT NULL,\n` +
      `  fence int8 NOT NULL\n` +
      `)`,
  ];
  if (options.via === 'fence-table') ddl.push(fenceTableDDL(options.fenceTable));
  return ddl;
}

/**
 * A {@link FencedStore} of one text value per resource: the conformance suite's view of this
 * module, and a worked example of both helpers.
 */
export function postgresStore(db: PgQueryable, options: PostgresStoreOptions = {}): FencedStore {
  const valueTable = options.valueTable ?? postgresDefaults.valueTable;
  const fenceTable = options.fenceTable ?? postgresDefaults.fenceTable;
  const values = quoteIdentifier(valueTable, 'value table', true);
  const fences = quoteIdentifier(fenceTable, 'fence table', true);
  const viaTable = options.via === 'fence-table';

  return {
    async write(resource, token, value) {
      checkResource(resource);
      if (!viaTable) {
        await upsertFencedRow(db, {
          table: valueTable,
          key: { resource },
          values: { value },
          token,
          resource,
        });
        return;
      }
      await withFence(
        db,
        resource,
        token,
        async (tx) => {
          await tx.query(
            `INSERT INTO ${values} (resource, value, fence) VALUES ($1, $2, $3::int8) ` +
              `ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence`,
            [resource, value, parseToken(token).toString()],
          );
        },
        { table: fenceTable },
      );
    },

    async read(resource): Promise<FencedValue | undefined> {
      const { rows } = await db.query<{ value: string; fence: string }>(
        `SELECT value, fence::text AS fence FROM ${values} WHERE resource = $1`,
        [checkResource(resource)],
      );
      const row = rows[0];
      return row === undefined ? undefined : { value: row.value, token: BigInt(row.fence) };
    },

    async highestToken(resource) {
      const { rows } = await db.query<{ token: string }>(
        viaTable
          ? `SELECT token::text AS token FROM ${fences} WHERE resource = $1`
          : `SELECT fence::text AS token FROM ${values} WHERE resource = $1`,
        [checkResource(resource)],
      );
      return toToken(rows[0]?.token);
    },
  };
}
