/**
 * The SQL both relational backends run, built in one place for both dialects, so PostgreSQL and
 * SQLite cannot drift apart. Only validated, quoted identifiers become SQL text; every value,
 * and the token above all, is a bound parameter.
 *
 * Tokens are compared against the token *parameter* typed as a 64-bit integer (`$n::int8`,
 * `CAST(? AS INTEGER)`), never against the inserted column value: were a fence column text,
 * `fence <= EXCLUDED.fence` would compare strings and accept token 9 after token 10. The column
 * type is also checked up front (see {@link checkIntegerColumn}) so a wrong schema fails with a
 * clear message rather than a driver error.
 */
import { InvalidArgumentError } from './errors.js';
import { quoteIdentifier } from './identifier.js';

/**
 * The keys of a fenced row write, the same for PostgreSQL and SQLite; each backend checks the
 * list against its own `FencedRowWrite` (`keysOf`), so neither can drift from it.
 */
export const FENCED_ROW_WRITE_KEYS = [
  'table',
  'key',
  'values',
  'token',
  'fenceColumn',
  'resource',
] as const;

export type Dialect = 'postgres' | 'sqlite';

interface Spec {
  /** Placeholder of the i-th (1-based) parameter. */
  param(i: number): string;
  /** The i-th parameter as a 64-bit integer: how every token enters a comparison. */
  token(i: number): string;
  text: string;
  integer: string;
  /** What a token column must be, for error messages. */
  required: string;
  /** SQLite lets a non-INTEGER primary key be NULL unless told. */
  primaryKey: string;
  tableSuffix: string;
  /** Extra fence-table column and its refresh on advance. */
  fenceColumns: string;
  touch: string;
}

const SPECS: Record<Dialect, Spec> = {
  postgres: {
    param: (i) => `$${i}`,
    token: (i) => `$${i}::int8`,
    text: 'text',
    integer: 'int8',
    required: 'type bigint (int8)',
    primaryKey: 'PRIMARY KEY',
    tableSuffix: '',
    fenceColumns: ',\n  updated_at timestamptz NOT NULL DEFAULT now()',
    touch: ', updated_at = now()',
  },
  sqlite: {
    // Anonymous: better-sqlite3 does not bind numbered parameters, so a reused value is repeated.
    param: () => '?',
    token: () => 'CAST(? AS INTEGER)',
    text: 'TEXT',
    integer: 'INTEGER',
    required: 'INTEGER affinity (a declared type containing "INT", e.g. INTEGER)',
    primaryKey: 'PRIMARY KEY NOT NULL',
    // STRICT: a token column can only hold integers.
    tableSuffix: ' STRICT',
    fenceColumns: '',
    touch: '',
  },
};

export function fenceTableDDL(dialect: Dialect, table: string): string {
  const d = SPECS[dialect];
  const t = quoteIdentifier(table, 'fence table', true);
  return (
    `CREATE TABLE IF NOT EXISTS ${t} (\n` +
    `  resource ${d.text} ${d.primaryKey},\n` +
    `  token ${d.integer} NOT NULL CHECK (token >= 1)${d.fenceColumns}\n` +
    `)${d.tableSuffix}`
  );
}

export function valueTableDDL(dialect: Dialect, table: string): string {
  const d = SPECS[dialect];
  const t = quoteIdentifier(table, 'value table', true);
  return (
    `CREATE TABLE IF NOT EXISTS ${t} (\n` +
    `  resource ${d.text} ${d.primaryKey},\n` +
    `  value ${d.text} NOT NULL,\n` +
    `  fence ${d.integer} NOT NULL\n` +
    `)${d.tableSuffix}`
  );
}

export interface FencedRowShape {
  table: string;
  keyColumns: readonly string[];
  valueColumns: readonly string[];
  fenceColumn: string;
}

export interface FencedRowSQL {
  /** Parameters: key values, other values, token, token. Changes one row iff accepted. */
  upsert: string;
  /** Parameters: key values. Returns `fence` as text (or NULL). */
  select: string;
}

/**
 * `INSERT ... ON CONFLICT (key) DO UPDATE SET ... WHERE fence IS NULL OR fence <= token`. A NULL
 * fence counts as "never fenced", so a column added to existing rows works at once.
 */
export function fencedRowSQL(dialect: Dialect, shape: FencedRowShape): FencedRowSQL {
  const d = SPECS[dialect];
  const table = quoteIdentifier(shape.table, 'table', true);
  const fence = quoteIdentifier(shape.fenceColumn, 'fence column');
  const keys = shape.keyColumns.map((c) => quoteIdentifier(c, 'key column'));
  const sets = shape.valueColumns.map((c) => quoteIdentifier(c, 'value column'));
  if (keys.length === 0) {
    throw new InvalidArgumentError(
      `keyColumns must be one or more columns of a unique constraint of table ${table}, got none`,
    );
  }
  const columns = [...keys, ...sets, fence];
  const values = columns.map((_, i) =>
    i === columns.length - 1 ? d.token(i + 1) : d.param(i + 1),
  );
  const updates = [...sets, fence].map((c) => `${c} = EXCLUDED.${c}`);
  const upsert =
    `INSERT INTO ${table} AS "target" (${columns.join(', ')}) VALUES (${values.join(', ')}) ` +
    `ON CONFLICT (${keys.join(', ')}) DO UPDATE SET ${updates.join(', ')} ` +
    `WHERE "target".${fence} IS NULL OR "target".${fence} <= ${d.token(columns.length + 1)}`;
  const where = keys.map((c, i) => `${c} = ${d.param(i + 1)}`).join(' AND ');
  const select = `SELECT CAST(${fence} AS ${d.text}) AS fence FROM ${table} WHERE ${where}`;
  return { upsert, select };
}

export interface FenceTableSQL {
  /** Parameters: resource, token, token. Changes one row iff accepted. */
  advance: string;
  /** Parameters: resource. Returns `token` as text. */
  select: string;
}

export function fenceTableSQL(dialect: Dialect, fenceTable: string): FenceTableSQL {
  const d = SPECS[dialect];
  const table = quoteIdentifier(fenceTable, 'fence table', true);
  const advance =
    `INSERT INTO ${table} AS "fence" (resource, token) VALUES (${d.param(1)}, ${d.token(2)}) ` +
    `ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token${d.touch} ` +
    `WHERE "fence".token <= ${d.token(3)}`;
  const select = `SELECT CAST(token AS ${d.text}) AS token FROM ${table} WHERE resource = ${d.param(1)}`;
  return { advance, select };
}

/** The fence-table statements that run batched with other statements (PostgreSQL only). */
export interface FenceClaimSQL {
  /**
   * Parameters: resource, token. Upserts the row to the greater of the stored token and `token`
   * and returns that greater one as text (`token`): stale iff it is above `token`. Always writes
   * (and locks) the row, so the caller rolls back on stale. Exact: it reads the row version it
   * locked, not a snapshot.
   */
  claim: string;
  /**
   * {@link claim}, which also sets the transaction's `idle_in_transaction_session_timeout` to
   * its third parameter (milliseconds, as text) first: one statement instead of two.
   */
  claimBounded: string;
  /**
   * Parameters: resource, token. Advances the row iff `token` >= the stored one, and otherwise
   * fails with `division_by_zero` (SQLSTATE 22012), so the statements batched after it are
   * skipped and its implicit transaction rolls back. The divisor is a column, so the planner
   * cannot fold it into an error for every call.
   */
  advanceOrFail: string;
}

/** SQLSTATE of {@link FenceClaimSQL.advanceOrFail}'s stale failure. */
export const STALE_SQLSTATE = '22012';

export function fenceClaimSQL(fenceTable: string): FenceClaimSQL {
  const d = SPECS.postgres;
  const table = quoteIdentifier(fenceTable, 'fence table', true);
  const insert =
    `INSERT INTO ${table} AS "fence" (resource, token) VALUES (${d.param(1)}, ${d.token(2)}) ` +
    'ON CONFLICT (resource) DO UPDATE SET token = ';
  const upsert = `ON CONFLICT (resource) DO UPDATE SET token = GREATEST("fence".token, ${d.token(2)})${d.touch} RETURNING CAST(token AS text)`;
  return {
    claim: `${insert}GREATEST("fence".token, ${d.token(2)})${d.touch} RETURNING CAST(token AS text)`,
    claimBounded:
      `INSERT INTO ${table} AS "fence" (resource, token) SELECT ${d.param(1)}, ${d.token(2)} ` +
      `FROM (SELECT set_config('idle_in_transaction_session_timeout', ${d.param(3)}, true)) AS bound ` +
      upsert,
    advanceOrFail:
      `${insert}CASE WHEN "fence".token <= ${d.token(2)} THEN ${d.token(2)} ` +
      `ELSE "fence".token / 0 END${d.touch}`,
  };
}

export interface ValueTableSQL {
  /** Parameters: resource, value, token. Unconditional: run it under the fence table. */
  write: string;
  /** Parameters: resource. Returns `value` and `token` (as text). */
  read: string;
}

export function valueTableSQL(dialect: Dialect, valueTable: string): ValueTableSQL {
  const d = SPECS[dialect];
  const table = quoteIdentifier(valueTable, 'value table', true);
  return {
    write:
      `INSERT INTO ${table} (resource, value, fence) VALUES (${d.param(1)}, ${d.param(2)}, ${d.token(3)}) ` +
      `ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence`,
    read: `SELECT value, CAST(fence AS ${d.text}) AS token FROM ${table} WHERE resource = ${d.param(1)}`,
  };
}

/** How to read a token column's type, and the names to report it by. */
export interface ColumnTypeQuery {
  /**
   * PostgreSQL: one row `{ found, type }`, `type` from `format_type` (`bigint` for int8) or NULL
   * when there is no such column. SQLite: one row `{ name, type }` per column of the table, none
   * when the table does not exist.
   */
  sql: string;
  params: unknown[];
  /** Quoted names, for messages and the cache. */
  table: string;
  column: string;
}

/**
 * How to create a missing fence table, for the "not found" message: the DDL function by name,
 * with the table option if it is not the default.
 */
export function createFenceTable(dialect: Dialect, table: string, defaultTable: string): string {
  const args = table === defaultTable ? '' : `{ table: ${JSON.stringify(table)} }`;
  const run =
    dialect === 'postgres'
      ? `await pool.query(fenceTableDDL(${args}))`
      : `db.exec(fenceTableDDL(${args}))`;
  return `create it once, in your migrations, with fenceTableDDL() from @leasehold/fence/${dialect}: ${run}`;
}

export function columnTypeQuery(dialect: Dialect, table: string, column: string): ColumnTypeQuery {
  const quotedTable = quoteIdentifier(table, 'table', true);
  const quotedColumn = quoteIdentifier(column, 'token column');
  if (dialect === 'postgres') {
    return {
      // to_regclass resolves the quoted name the way the statements do (search_path included).
      sql:
        'SELECT to_regclass($1) IS NOT NULL AS found, (SELECT format_type(a.atttypid, NULL) ' +
        'FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = $2 ' +
        'AND a.attnum > 0 AND NOT a.attisdropped) AS type',
      params: [quotedTable, column],
      table: quotedTable,
      column: quotedColumn,
    };
  }
  const [schema, name] = table.includes('.') ? table.split('.') : [null, table];
  return {
    sql: 'SELECT name, type FROM pragma_table_xinfo(?, ?)',
    params: [name, schema],
    table: quotedTable,
    column: quotedColumn,
  };
}

/** SQLite's affinity rule (https://sqlite.org/datatype3.html, 3.1): the first match wins. */
export function sqliteAffinity(declared: string): 'INTEGER' | 'TEXT' | 'BLOB' | 'REAL' | 'NUMERIC' {
  const type = declared.toUpperCase();
  if (type.includes('INT')) return 'INTEGER';
  if (/CHAR|CLOB|TEXT/.test(type)) return 'TEXT';
  if (type.includes('BLOB') || type === '') return 'BLOB';
  if (/REAL|FLOA|DOUB/.test(type)) return 'REAL';
  return 'NUMERIC';
}

/**
 * Throws unless a token column holds 64-bit integers: PostgreSQL `bigint`, SQLite INTEGER
 * affinity. `found` says whether the table exists; `type` is the column's type (PostgreSQL) or
 * declared type (SQLite), `undefined` if there is no such column.
 */
export function checkIntegerColumn(
  dialect: Dialect,
  { table, column }: ColumnTypeQuery,
  found: boolean,
  type: string | undefined,
  create?: string,
): void {
  const wanted = `a column ${column} with ${SPECS[dialect].required}`;
  if (!found) {
    throw new InvalidArgumentError(
      `table ${table} must exist, with ${wanted}, got no such table` +
        (create === undefined ? '' : `; ${create}`),
    );
  }
  if (type === undefined) {
    throw new InvalidArgumentError(
      `table ${table} must have ${wanted}, got a table without column ${column}`,
    );
  }
  const ok = dialect === 'postgres' ? type === 'bigint' : sqliteAffinity(type) === 'INTEGER';
  if (!ok) {
    const actual =
      dialect === 'postgres'
        ? `type ${type}`
        : `declared type ${JSON.stringify(type)}, which has ${sqliteAffinity(type)} affinity`;
    throw new InvalidArgumentError(
      `token column ${column} of table ${table} must have ${SPECS[dialect].required}, got ${actual}`,
    );
  }
}

// Columns already found to be integers, per database handle: the check costs a round trip, so it
// runs once per (handle, table, column). A column changed afterwards still compares as an integer
// (or fails) because every comparison casts the token parameter.
const checked = new WeakMap<object, Set<string>>();

export function isChecked(db: object, { table, column }: ColumnTypeQuery): boolean {
  return checked.get(db)?.has(`${table}.${column}`) ?? false;
}

export function markChecked(db: object, { table, column }: ColumnTypeQuery): void {
  let columns = checked.get(db);
  if (columns === undefined) checked.set(db, (columns = new Set()));
  columns.add(`${table}.${column}`);
}
