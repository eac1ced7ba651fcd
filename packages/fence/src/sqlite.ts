/**
 * Fencing in SQLite (better-sqlite3), the same two ways as PostgreSQL:
 * - {@link upsertFencedRow}: one conditional upsert on a row with its own INTEGER fence column;
 * - {@link withFence}: a fence table and your statements in one `db.transaction`.
 *
 * SQLite INTEGER is a signed 64-bit integer, the same range as a token. Tokens are bound as
 * `bigint` and compared as `CAST(? AS INTEGER)`, so values above 2^53 stay exact end to end. Both
 * helpers are synchronous, like better-sqlite3 itself.
 *
 * @module @leasehold/fence/sqlite
 */
import type BetterSqlite3 from 'better-sqlite3';
import {
  checkFence,
  checkFunction,
  checkObject,
  checkSqlStoreOptions,
  checkWrite,
  checkResource,
  keysOf,
  type Fence,
  type FencedStore,
  type SqlStoreOptions,
} from './contract.js';
import { InvalidArgumentError, StaleTokenError } from './errors.js';
import * as sql from './sql.js';
import { parseToken, type TokenInput } from './token.js';

/** A better-sqlite3 database. */
export type SqliteDatabase = BetterSqlite3.Database;

/** Defaults for every option in this module, in one place. */
export const sqliteDefaults = {
  /** The fence table {@link withFence} uses. */
  fenceTable: 'leasehold_fence',
  /** The token column of a fenced row. */
  fenceColumn: 'fence',
  /** The value table of {@link sqliteStore}. */
  valueTable: 'leasehold_value',
} as const;

/** Names the fence table: the same option {@link withFence} takes. */
export interface FenceTableOptions {
  /** The fence table, optionally `schema.table`. Default `leasehold_fence`. */
  table?: string;
}

/** Every key of {@link FenceTableOptions}. */
const FENCE_TABLE_OPTION_KEYS = keysOf<FenceTableOptions>()(['table']);

/** DDL for the fence table {@link withFence} needs. STRICT so a token can only be an INTEGER. */
export function fenceTableDDL(options: FenceTableOptions = {}): string {
  checkObject('options', options, '{ table? }', FENCE_TABLE_OPTION_KEYS);
  return sql.fenceTableDDL('sqlite', options.table ?? sqliteDefaults.fenceTable);
}

// Preparing is most of the cost of a small write; statements are cached per database and text.
const cache = new WeakMap<SqliteDatabase, Map<string, BetterSqlite3.Statement>>();
function prepare(db: SqliteDatabase, text: string): BetterSqlite3.Statement {
  let statements = cache.get(db);
  if (statements === undefined) {
    statements = new Map<string, BetterSqlite3.Statement>();
    cache.set(db, statements);
  }
  let statement = statements.get(text);
  if (statement === undefined) {
    statement = db.prepare(text);
    statements.set(text, statement);
  }
  return statement;
}

/**
 * Refuses a token column without INTEGER affinity: as text, '9' > '10'. Checked once per
 * (database, table, column).
 */
function checkTokenColumn(
  db: SqliteDatabase,
  table: string,
  column: string,
  create?: string,
): void {
  const query = sql.columnTypeQuery('sqlite', table, column);
  if (sql.isChecked(db, query)) return;
  const rows = prepare(db, query.sql).all(...query.params) as { name: string; type: string }[];
  // SQLite identifiers are case-insensitive.
  const found = rows.find((row) => row.name.toLowerCase() === column.toLowerCase());
  sql.checkIntegerColumn('sqlite', query, rows.length > 0, found?.type, create);
  sql.markChecked(db, query);
}

/** One fenced row write: which row, what to set, under which token. */
export interface FencedRowWrite {
  /** Table name, optionally `schema.table`. */
  table: string;
  /** Columns of a primary key or unique constraint that identify the row, and their values. */
  key: Record<string, unknown>;
  /** Other columns to set, and their values. */
  values?: Record<string, unknown>;
  /** The writer's fencing token; the row keeps the highest it has accepted in `fenceColumn`. */
  token: TokenInput;
  /** The row's INTEGER token column. Default `fence`. */
  fenceColumn?: string;
  /** The name a {@link StaleTokenError} reports. Default `table[column=value,...]`. */
  resource?: string;
}

/** Every key of {@link FencedRowWrite} (`key` and `values` are the user's columns: free). */
const FENCED_ROW_WRITE_KEYS = keysOf<FencedRowWrite>()(sql.FENCED_ROW_WRITE_KEYS);

/**
 * Inserts the row, or updates it iff its fence column is NULL or <= the token, in one statement
 * (`INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE fence IS NULL OR fence <= CAST(? AS INTEGER)`).
 *
 * @throws InvalidArgumentError when the fence column lacks INTEGER affinity (checked once).
 * @throws StaleTokenError when the row holds a higher token.
 */
export function upsertFencedRow(db: SqliteDatabase, write: FencedRowWrite): void {
  checkObject(
    'write',
    write,
    '{ table, key, values?, token, fenceColumn?, resource? }',
    FENCED_ROW_WRITE_KEYS,
  );
  const token = parseToken(write.token);
  const fenceColumn = write.fenceColumn ?? sqliteDefaults.fenceColumn;
  const statements = sql.fencedRowSQL('sqlite', {
    table: write.table,
    keyColumns: Object.keys(write.key),
    valueColumns: Object.keys(write.values ?? {}),
    fenceColumn,
  });
  checkTokenColumn(db, write.table, fenceColumn);
  const keyValues = Object.values(write.key);
  const params = [...keyValues, ...Object.values(write.values ?? {}), token, token];
  if (prepare(db, statements.upsert).run(...params).changes === 1) return;
  const row = prepare(db, statements.select).get(...keyValues) as
    { fence: string | null } | undefined;
  const name =
    write.resource ??
    `${write.table}[${Object.entries(write.key)
      .map(([c, v]) => `${c}=${String(v)}`)
      .join(',')}]`;
  throw new StaleTokenError(name, token, toToken(row?.fence));
}

/** `{ resource, token }` and the fence table. */
export interface WithFenceOptions extends Fence, FenceTableOptions {}

/** Every key of {@link WithFenceOptions}. */
const WITH_FENCE_OPTION_KEYS = keysOf<WithFenceOptions>()(['resource', 'token', 'table']);

/**
 * Runs `statements` in one `db.transaction` that first advances `resource`'s highest token in
 * the fence table iff `token` >= the stored one. The transaction starts IMMEDIATE (takes the
 * write lock up front), so writers in other processes queue on the lock instead of failing with
 * SQLITE_BUSY when upgrading a read. Inside an open transaction it nests as a savepoint.
 * On a stale token nothing runs and nothing changes; if `statements` throw, everything rolls back.
 *
 * @throws InvalidArgumentError when the fence table's `token` lacks INTEGER affinity, or when
 *   `statements` returns a Promise (a better-sqlite3 transaction cannot span an `await`).
 * @throws StaleTokenError when the fence table holds a higher token for `resource`.
 *
 * @example
 * ```ts
 * withFence(db, { resource: 'invoice-42', token: lock.token }, (db) => {
 *   db.prepare('UPDATE invoices SET sent = 1 WHERE id = ?').run(42);
 * });
 * ```
 */
export function withFence<T>(
  db: SqliteDatabase,
  options: WithFenceOptions,
  statements: (db: SqliteDatabase) => T,
): T {
  const { resource, token } = checkFence(options, {
    name: 'options',
    allowed: WITH_FENCE_OPTION_KEYS,
  });
  checkFunction('statements', statements);
  const table = options.table ?? sqliteDefaults.fenceTable;
  const fences = sql.fenceTableSQL('sqlite', table);
  checkTokenColumn(
    db,
    table,
    'token',
    sql.createFenceTable('sqlite', table, sqliteDefaults.fenceTable),
  );
  const advance = prepare(db, fences.advance);
  const current = prepare(db, fences.select);
  return db
    .transaction(() => {
      if (advance.run(resource, token, token).changes !== 1) {
        const row = current.get(resource) as { token: string } | undefined;
        throw new StaleTokenError(resource, token, toToken(row?.token));
      }
      const result = statements(db);
      if (result instanceof Promise) {
        throw new InvalidArgumentError(
          'statements must be a synchronous function (better-sqlite3 transactions cannot span ' +
            'an await), got one that returned a Promise',
        );
      }
      return result;
    })
    .immediate();
}

function toToken(text: string | null | undefined): bigint | undefined {
  return text === null || text === undefined ? undefined : BigInt(text);
}

/** Options of {@link sqliteStore} and {@link sqliteStoreDDL}; every field is optional. */
export type SqliteStoreOptions = SqlStoreOptions;

/** DDL for a {@link sqliteStore}: its value table, plus the fence table when it uses one. */
export function sqliteStoreDDL(options: SqliteStoreOptions = {}): string[] {
  checkSqlStoreOptions(options);
  const ddl = [sql.valueTableDDL('sqlite', options.valueTable ?? sqliteDefaults.valueTable)];
  if (options.via === 'fence-table') ddl.push(fenceTableDDL({ table: options.fenceTable }));
  return ddl;
}

/** A {@link FencedStore} of one text value per resource over both helpers. */
export function sqliteStore(db: SqliteDatabase, options: SqliteStoreOptions = {}): FencedStore {
  checkSqlStoreOptions(options);
  const valueTable = options.valueTable ?? sqliteDefaults.valueTable;
  const fenceTable = options.fenceTable ?? sqliteDefaults.fenceTable;
  const values = sql.valueTableSQL('sqlite', valueTable);
  const fences = sql.fenceTableSQL('sqlite', fenceTable);
  const viaTable = options.via === 'fence-table';

  return {
    async write(write) {
      const { resource, token, value } = checkWrite(write);
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
      withFence(db, { resource, token, table: fenceTable }, () => {
        prepare(db, values.write).run(resource, value, token);
      });
    },
    async read(resource) {
      const row = prepare(db, values.read).get(checkResource(resource)) as
        { value: string; token: string } | undefined;
      return row === undefined ? undefined : { value: row.value, token: BigInt(row.token) };
    },
    async highestToken(resource) {
      const row = prepare(db, viaTable ? fences.select : values.read).get(
        checkResource(resource),
      ) as { token: string } | undefined;
      return toToken(row?.token);
    },
  };
}
