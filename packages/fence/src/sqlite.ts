import type BetterSqlite3 from 'better-sqlite3';
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
 * Fencing in SQLite (better-sqlite3), the same two ways as PostgreSQL:
 * - {@link upsertFencedRow}: one conditional upsert on a row with its own INTEGER fence column;
 * - {@link withFence}: a fence table and your statements in one `db.transaction`.
 *
 * SQLite INTEGER is a signed 64-bit integer, the same range as a token. Tokens are bound as
 * `bigint` and read back with `safeIntegers`, so values above 2^53 stay exact end to end. Both
 * helpers are synchronous, like better-sqlite3 itself.
 */

export type SqliteDatabase = BetterSqlite3.Database;

/** Defaults for every option in this module, in one place. */
export const sqliteDefaults = {
  fenceTable: 'leasehold_fence',
  fenceColumn: 'fence',
  valueTable: 'leasehold_value',
} as const;

/** DDL for the fence table {@link withFence} needs. STRICT so a token can only be an INTEGER. */
export function fenceTableDDL(table: string = sqliteDefaults.fenceTable): string {
  const t = quoteIdentifier(table, 'fence table', true);
  return (
    `CREATE TABLE IF NOT EXISTS ${t} (\n` +
    `  resource TEXT PRIMARY KEY NOT NULL,\n` +
    `  token INTEGER NOT NULL CHECK (token >= 1)\n` +
    `) STRICT`
  );
}

// Preparing is most of the cost of a small write; statements are cached per database and text.
const cache = new WeakMap<SqliteDatabase, Map<string, BetterSqlite3.Statement>>();
function prepare(db: SqliteDatabase, sql: string): BetterSqlite3.Statement {
  let statements = cache.get(db);
  if (statements === undefined) {
    statements = new Map<string, BetterSqlite3.Statement>();
    cache.set(db, statements);
  }
  let statement = statements.get(sql);
  if (statement === undefined) {
    statement = db.prepare(sql);
    if (statement.reader) statement.safeIntegers(true);
    statements.set(sql, statement);
  }
  return statement;
}

/** One fenced row write: which row, what to set, under which token. */
export interface FencedRowWrite {
  /** Table name, optionally `schema.table`. */
  table: string;
  /** Columns of a primary key or unique constraint that identify the row, and their values. */
  key: Record<string, unknown>;
  /** Other columns to set, and their values. */
  values?: Record<string, unknown>;
  token: TokenInput;
  /** The row's INTEGER token column. Default `fence`. */
  fenceColumn?: string;
  /** The name a {@link StaleTokenError} reports. Default `table[column=value,...]`. */
  resource?: string;
}

/**
 * Inserts the row, or updates it iff its fence column is NULL or <= the token, in one statement
 * (`INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE fence IS NULL OR fence <= excluded.fence`).
 *
 * @throws StaleTokenError when the row holds a higher token.
 */
export function upsertFencedRow(db: SqliteDatabase, write: FencedRowWrite): void {
  const token = parseToken(write.token);
  const table = quoteIdentifier(write.table, 'table', true);
  const fence = quoteIdentifier(write.fenceColumn ?? sqliteDefaults.fenceColumn, 'fence column');
  const keys = Object.keys(write.key).map((c) => quoteIdentifier(c, 'key column'));
  const sets = Object.keys(write.values ?? {}).map((c) => quoteIdentifier(c, 'value column'));
  if (keys.length === 0) {
    throw new InvalidArgumentError(
      `invalid key {} for table ${table}: allowed: one or more columns of a unique constraint`,
    );
  }
  const columns = [...keys, ...sets, fence];
  const updates = [...sets, fence].map((c) => `${c} = excluded.${c}`);
  // Unqualified columns in the DO UPDATE clause name the existing row.
  const upsert =
    `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')}) ` +
    `ON CONFLICT (${keys.join(', ')}) DO UPDATE SET ${updates.join(', ')} ` +
    `WHERE ${fence} IS NULL OR ${fence} <= excluded.${fence}`;
  const keyValues = Object.values(write.key);
  const info = prepare(db, upsert).run(...keyValues, ...Object.values(write.values ?? {}), token);
  if (info.changes === 1) return;
  const where = keys.map((c) => `${c} = ?`).join(' AND ');
  const row = prepare(db, `SELECT ${fence} AS fence FROM ${table} WHERE ${where}`).get(
    ...keyValues,
  ) as { fence: bigint | null } | undefined;
  const name =
    write.resource ??
    `${write.table}[${Object.entries(write.key)
      .map(([c, v]) => `${c}=${String(v)}`)
      .join(',')}]`;
  throw new StaleTokenError(name, token, row?.fence ?? undefined);
}

export interface WithFenceOptions {
  /** The fence table, created with {@link fenceTableDDL}. Default `leasehold_fence`. */
  table?: string;
}

/**
 * Runs `statements` in one `db.transaction` that first advances `resource`'s highest token in
 * the fence table iff `token` >= the stored one. The transaction starts IMMEDIATE (takes the
 * write lock up front), so writers in other processes queue on the lock instead of failing with
 * SQLITE_BUSY when upgrading a read. Inside an open transaction it nests as a savepoint.
 * On a stale token nothing runs and nothing changes; if `statements` throw, everything rolls back.
 *
 * @throws StaleTokenError when the fence table holds a higher token for `resource`.
 */
export function withFence<T>(
  db: SqliteDatabase,
  resource: string,
  token: TokenInput,
  statements: (db: SqliteDatabase) => T,
  options: WithFenceOptions = {},
): T {
  checkResource(resource);
  const t = parseToken(token);
  const table = quoteIdentifier(options.table ?? sqliteDefaults.fenceTable, 'fence table', true);
  const advance = prepare(
    db,
    `INSERT INTO ${table} (resource, token) VALUES (?, ?) ` +
      `ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE token <= excluded.token`,
  );
  const current = prepare(db, `SELECT token FROM ${table} WHERE resource = ?`);
  return db
    .transaction(() => {
      if (advance.run(resource, t).changes !== 1) {
        const row = current.get(resource) as { token: bigint } | undefined;
        throw new StaleTokenError(resource, t, row?.token);
      }
      const result = statements(db);
      if (result instanceof Promise) {
        throw new InvalidArgumentError(
          'invalid statements for withFence: returned a Promise; allowed: a synchronous function ' +
            '(better-sqlite3 transactions cannot span an await)',
        );
      }
      return result;
    })
    .immediate();
}

export type SqliteStoreOptions = SqlStoreOptions;

/** DDL for a {@link sqliteStore}: its value table, plus the fence table when it uses one. */
export function sqliteStoreDDL(options: SqliteStoreOptions = {}): string[] {
  const values = quoteIdentifier(
    options.valueTable ?? sqliteDefaults.valueTable,
    'value table',
    true,
  );
  const ddl = [
    `CREATE TABLE IF NOT EXISTS ${values} (\n` +
      `  resource TEXT PRIMARY KEY NOT NULL,\n` +
      `  value TEXT NOT NULL,\n` +
      `  fence INTEGER NOT NULL\n` +
      `) STRICT`,
  ];
  if (options.via === 'fence-table') ddl.push(fenceTableDDL(options.fenceTable));
  return ddl;
}

/** A {@link FencedStore} of one text value per resource over both helpers. */
export function sqliteStore(db: SqliteDatabase, options: SqliteStoreOptions = {}): FencedStore {
  const valueTable = options.valueTable ?? sqliteDefaults.valueTable;
  const fenceTable = options.fenceTable ?? sqliteDefaults.fenceTable;
  const values = quoteIdentifier(valueTable, 'value table', true);
  const fences = quoteIdentifier(fenceTable, 'fence table', true);
  const viaTable = options.via === 'fence-table';

  return {
    async write(resource, token, value) {
      checkResource(resource);
      if (!viaTable) {
        upsertFencedRow(db, {
          table: valueTable,
          key: { resource },
          values: { value },
          token,
          resource,
        });
        return;
      }
      const t = parseToken(token);
      withFence(
        db,
        resource,
        t,
        () => {
          prepare(
            db,
            `INSERT INTO ${values} (resource, value, fence) VALUES (?, ?, ?) ` +
              `ON CONFLICT (resource) DO UPDATE SET value = excluded.value, fence = excluded.fence`,
          ).run(resource, value, t);
        },
        { table: fenceTable },
      );
    },
    async read(resource): Promise<FencedValue | undefined> {
      const row = prepare(db, `SELECT value, fence FROM ${values} WHERE resource = ?`).get(
        checkResource(resource),
      ) as { value: string; fence: bigint } | undefined;
      return row === undefined ? undefined : { value: row.value, token: row.fence };
    },
    async highestToken(resource) {
      const sql = viaTable
        ? `SELECT token FROM ${fences} WHERE resource = ?`
        : `SELECT fence AS token FROM ${values} WHERE resource = ?`;
      const row = prepare(db, sql).get(checkResource(resource)) as { token: bigint } | undefined;
      return row?.token;
    },
  };
}
