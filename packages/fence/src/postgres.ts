/**
 * Fencing in PostgreSQL, two ways:
 * - {@link upsertFencedRow}: the row carries its own `fence int8` column and the write is one
 *   conditional upsert (the "seed" pattern: no extra table, one round trip);
 * - {@link withFence}: a fence table keeps the highest token per resource, and your statements
 *   run in the same transaction as the conditional upsert of that token.
 *
 * Tokens always travel as decimal-string parameters cast with `::int8`, so PostgreSQL compares
 * them as exact 64-bit integers; only validated, quoted identifiers ever become SQL text.
 *
 * @module @leasehold/fence/postgres
 */
import { createHash } from 'node:crypto';
import type { ClientBase, Pool, PoolClient } from 'pg';
import {
  checkFence,
  checkFunction,
  checkKeys,
  checkObject,
  checkSqlStoreOptions,
  checkWrite,
  checkResource,
  keysOf,
  type Fence,
  type FencedStore,
  type SqlStoreOptions,
} from './contract.js';
import { invalid, InvalidArgumentError, StaleTokenError } from './errors.js';
import { batch, BatchError, rows, type BatchResult, type BatchStatement } from './pg-batch.js';
import * as sql from './sql.js';
import { parseToken, type TokenInput } from './token.js';

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
  /**
   * How long {@link withFence}'s transaction may sit idle between statements before PostgreSQL
   * ends the connection (`idle_in_transaction_session_timeout`, set for that transaction only).
   * The fence row stays locked until commit: without a bound, a holder frozen inside the
   * callback (GC, SIGSTOP, a VM pause) would block the next holder's writes for as long as
   * the freeze lasts.
   */
  idleInTransactionTimeoutMs: 10_000,
} as const;

/** PostgreSQL's limit for its millisecond settings (2^31 - 1). */
const MAX_PG_TIMEOUT_MS = 2_147_483_647;

/** Names the fence table: the same option {@link withFence} takes. */
export interface FenceTableOptions {
  /** The fence table, optionally `schema.table`. Default `leasehold_fence`. */
  table?: string;
}

/** Every key of {@link FenceTableOptions}. */
const FENCE_TABLE_OPTION_KEYS = keysOf<FenceTableOptions>()(['table']);

/**
 * DDL for the fence table {@link withFence} needs. Idempotent (`IF NOT EXISTS`); run it in your
 * migrations.
 */
export function fenceTableDDL(options: FenceTableOptions = {}): string {
  checkObject('options', options, '{ table? }', FENCE_TABLE_OPTION_KEYS);
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
  /** The writer's fencing token; the row keeps the highest it has accepted in `fenceColumn`. */
  token: TokenInput;
  /** The row's `int8` token column. Default `fence`. */
  fenceColumn?: string;
  /** The name a {@link StaleTokenError} reports. Default `table[column=value,...]`. */
  resource?: string;
}

/** Every key of {@link FencedRowWrite} (`key` and `values` are the user's columns: free). */
const FENCED_ROW_WRITE_KEYS = keysOf<FencedRowWrite>()(sql.FENCED_ROW_WRITE_KEYS);

/**
 * Inserts the row, or updates it iff its fence column is NULL or <= the token, in one statement:
 * `INSERT ... ON CONFLICT (key) DO UPDATE SET ... WHERE t.fence IS NULL OR t.fence <= $n::int8`.
 * A NULL fence counts as "never fenced" so a column added to existing rows works at once.
 *
 * @throws InvalidArgumentError when the fence column is not `bigint` (checked once per handle).
 * @throws StaleTokenError when the row holds a higher token (read back for the message).
 *
 * @example
 * ```ts
 * // Once: ALTER TABLE accounts ADD COLUMN fence int8 (and a unique constraint on id)
 * await upsertFencedRow(pool, {
 *   table: 'accounts',
 *   key: { id: 7 },
 *   values: { balance: 120 },
 *   token: lock.token,
 * });
 * ```
 */
export async function upsertFencedRow(db: PgQueryable, write: FencedRowWrite): Promise<void> {
  checkObject(
    'write',
    write,
    '{ table, key, values?, token, fenceColumn?, resource? }',
    FENCED_ROW_WRITE_KEYS,
  );
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

/** Every key of {@link WithFenceOptions}. */
const WITH_FENCE_OPTION_KEYS = keysOf<WithFenceOptions>()(['resource', 'token', 'table']);

/** {@link withFence}'s options: those of every fenced call, and the idle bound. */
export interface WithFenceTxOptions extends WithFenceOptions {
  /**
   * How long the transaction may sit idle between your statements before PostgreSQL ends the
   * connection, which rolls it back and unlocks the fence row: a holder frozen inside the
   * callback, between statements, blocks the resource's next writer at most this long. A
   * stricter bound the session already has (a role's, the server's) stays. An integer from 1 to
   * 2147483647, or 0 to leave the session's bound as it is. Default 10000.
   */
  idleInTransactionTimeoutMs?: number;
}

/** Every key of {@link WithFenceTxOptions}. */
const WITH_FENCE_TX_OPTION_KEYS = keysOf<WithFenceTxOptions>()([
  'resource',
  'token',
  'table',
  'idleInTransactionTimeoutMs',
]);

function idleTimeoutOf(options: WithFenceTxOptions): number {
  const ms = options.idleInTransactionTimeoutMs ?? postgresDefaults.idleInTransactionTimeoutMs;
  if (!Number.isInteger(ms) || ms < 0 || ms > MAX_PG_TIMEOUT_MS) {
    throw invalid(
      'options.idleInTransactionTimeoutMs',
      `an integer from 0 (no bound) to ${MAX_PG_TIMEOUT_MS}`,
      ms,
    );
  }
  return ms;
}

/**
 * Runs `statements` in one transaction that first advances `resource`'s highest token in the
 * fence table, iff `token` >= the stored one. The upsert keeps the fence row locked until commit,
 * so a concurrent writer of the same resource waits and then sees the new token. On a stale token
 * the transaction rolls back before `statements` run; if `statements` throw, it rolls back and
 * the error propagates unchanged.
 *
 * Round trips: `BEGIN` and the fence upsert go out together in one, then your statements, then
 * `COMMIT`: the same count as a plain `BEGIN`/statements/`COMMIT`.
 *
 * The fence row is locked until commit, so a writer frozen inside `statements` (a GC pause,
 * SIGSTOP, a VM migration) would block the next holder's writes for the length of its freeze.
 * The transaction therefore runs with `idle_in_transaction_session_timeout` set to
 * `idleInTransactionTimeoutMs` (10 s by default, for this transaction only): PostgreSQL ends a
 * connection left idle inside it that long, rolling it back and unlocking the row, and the
 * frozen writer's next statement fails when it wakes.
 *
 * Pass a pool (a client is checked out and released) or a client that is not already in a
 * transaction. The transaction uses the session's default isolation level; under SERIALIZABLE a
 * serialization failure surfaces as pg's own error, to retry as you would any other.
 *
 * @throws InvalidArgumentError when the fence table's `token` is not `bigint` (checked once).
 * @throws StaleTokenError when the fence table holds a higher token for `resource`.
 *
 * @example
 * ```ts
 * await withFence(pool, { resource: 'invoice-42', token: lock.token }, async (tx) => {
 *   await tx.query('UPDATE invoices SET sent = true WHERE id = $1', [42]);
 * });
 * ```
 */
export async function withFence<T>(
  db: PgQueryable,
  options: WithFenceTxOptions,
  statements: (tx: ClientBase) => Promise<T>,
): Promise<T> {
  const { resource, token } = checkFence(options, {
    name: 'options',
    allowed: WITH_FENCE_TX_OPTION_KEYS,
  });
  const idleMs = idleTimeoutOf(options);
  checkFunction('statements', statements);
  const table = options.table ?? postgresDefaults.fenceTable;
  const claims = sql.fenceClaimSQL(table);
  if (!isPool(db) && inFence.has(db)) {
    throw new InvalidArgumentError(
      "db must be a pool, or a client not inside withFence, got a client already inside withFence (a nested or concurrent call on one client would share, and commit, the other call's transaction)",
    );
  }
  const client = isPool(db) ? await db.connect() : db;
  inFence.add(client);
  let broken: unknown;
  // PostgreSQL ends a connection left idle in the transaction past the bound; pg then emits
  // 'error' on the client, which would crash a process with no listener for it. Here it only
  // marks the connection broken: the statement that meets it fails on its own.
  const onError = (err: unknown) => void (broken ??= err);
  client.on('error', onError);
  try {
    await checkTokenColumn(
      db,
      table,
      'token',
      client,
      sql.createFenceTable('postgres', table, postgresDefaults.fenceTable),
    );
    const bound = await idleBoundFor(client, idleMs);
    let began = false;
    try {
      // The claim sets the transaction's idle bound too, when it must: still one statement.
      const [claim, values] =
        bound === undefined
          ? [claims.claim, [resource, token.toString()]]
          : [claims.claimBounded, [resource, token.toString(), String(bound)]];
      const [, claimed] = await batchPrepared(client, [
        { text: 'BEGIN', values: [] },
        { text: claim, values, name: statementName(claim) },
      ]).catch((err: unknown) => {
        // BEGIN ran unless it was the statement that failed; the error is pg's own.
        began = !(err instanceof BatchError && err.index === 0);
        throw err instanceof BatchError ? err.cause : err;
      });
      began = true;
      // The greater of the stored token and ours, read from the row version now locked.
      const highest = BigInt(claimed!.rawRows[0]![0]!);
      if (highest > token) throw new StaleTokenError(resource, token, highest);
      const result = await statements(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      if (began) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          // A connection that cannot roll back must not go back to the pool.
          broken ??= rollbackError;
        });
      }
      throw err;
    }
  } finally {
    inFence.delete(client);
    client.removeListener('error', onError);
    if (client !== db) (client as PoolClient).release(broken instanceof Error ? broken : undefined);
  }
}

/** The session's own idle bound (ms, 0 for none), read once per connection. */
const SESSION_BOUND =
  "SELECT setting::bigint AS ms FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'";
const sessionBounds = new WeakMap<object, number>();

/**
 * The bound to set for this transaction, or undefined when the session's own is already as
 * strict (a role's or the server's stricter setting stays; 0 leaves the session's as it is). The
 * session's is read on a connection's first call and remembered for it: a `SET` of it later on
 * that connection is not seen.
 */
async function idleBoundFor(client: ClientBase, optionMs: number): Promise<number | undefined> {
  if (optionMs === 0) return undefined;
  let session = sessionBounds.get(client);
  if (session === undefined) {
    const { rows } = await client.query<{ ms: string }>(SESSION_BOUND);
    session = Number(rows[0]?.ms ?? 0);
    sessionBounds.set(client, session);
  }
  return session > 0 && session <= optionMs ? undefined : optionMs;
}

/** Clients inside a withFence right now: a second call on one would share its transaction. */
const inFence = new WeakSet<object>();

/** One statement to run under a fence: its text and its parameters (`$1`, `$2`, ...). */
export interface FencedStatement {
  /** The SQL text, with `$1`, `$2`, ... for parameters. */
  text: string;
  /** The parameters, as `pg` takes them. */
  values?: readonly unknown[];
}

/** Every key of {@link FencedStatement}: not a `pg` query config (no `name`, `rowMode`, `types`). */
const FENCED_STATEMENT_KEYS = keysOf<FencedStatement>()(['text', 'values']);

/** What {@link fencedQuery} returns: the statement's rows (typed by the client) and count. */
export interface FencedQueryResult<R> {
  /** The rows the statement returned. */
  rows: R[];
  /** Rows affected or returned, from the command tag; `null` for commands without a count. */
  rowCount: number | null;
  /** The command tag, e.g. `UPDATE 1`. */
  command: string;
}

/**
 * Runs one statement under the fence in a single round trip: the fence advance and your statement
 * go out together and run as one implicit transaction. If the fence table holds a higher token
 * the advance fails, your statement is skipped, nothing is written and this rejects with
 * {@link StaleTokenError}; if your statement fails, the advance rolls back with it and pg's error
 * propagates unchanged. Like {@link withFence}, the fence row stays locked until the end, so
 * concurrent writers of one resource queue on it.
 *
 * On a client inside an open transaction both statements join that transaction instead, and a
 * stale token aborts it (roll it back). Values are sent as text: strings, finite numbers,
 * bigints, booleans and null (cast in the SQL where the type is not inferred, e.g. `$1::int8`).
 *
 * @throws InvalidArgumentError when the fence table's `token` is not `bigint` (checked once) or a
 *   value is of a type this call does not send.
 * @throws StaleTokenError when the fence table holds a higher token for `resource`.
 *
 * @example
 * ```ts
 * const { rowCount } = await fencedQuery(
 *   pool,
 *   { resource: 'invoice-42', token: lock.token },
 *   { text: 'UPDATE invoices SET sent = true WHERE id = $1', values: [42] },
 * );
 * ```
 */
export async function fencedQuery<R = Record<string, unknown>>(
  db: PgQueryable,
  options: WithFenceOptions,
  statement: FencedStatement,
): Promise<FencedQueryResult<R>> {
  const { resource, token } = checkFence(options, {
    name: 'options',
    allowed: WITH_FENCE_OPTION_KEYS,
  });
  const table = options.table ?? postgresDefaults.fenceTable;
  const advance = sql.fenceClaimSQL(table).advanceOrFail;
  const text = checkStatementText(statement);
  const values = (statement.values ?? []).map(textValue);
  const client = isPool(db) ? await db.connect() : db;
  let broken: Error | undefined;
  try {
    await checkTokenColumn(
      db,
      table,
      'token',
      client,
      sql.createFenceTable('postgres', table, postgresDefaults.fenceTable),
    );
    try {
      const [, result] = await batchPrepared(client, [
        { text: advance, values: [resource, token.toString()], name: statementName(advance) },
        { text, values, describe: true },
      ]);
      return {
        rows: rows<R>(client, result!),
        rowCount: result!.rowCount,
        command: result!.command,
      };
    } catch (err) {
      if (!(err instanceof BatchError)) {
        // Not an answer from the server: the connection is suspect, keep it out of the pool.
        if (err instanceof Error) broken = err;
        throw err;
      }
      const cause = err.cause as { code?: unknown };
      if (err.index !== 0 || cause.code !== sql.STALE_SQLSTATE) throw err.cause;
    }
    const current = await client.query<{ token: string }>(
      sql.fenceTableSQL('postgres', table).select,
      [resource],
    );
    throw new StaleTokenError(resource, token, toToken(current.rows[0]?.token));
  } finally {
    if (client !== db) (client as PoolClient).release(broken);
  }
}

/**
 * {@link batch}, sent once more if a statement this package had prepared on the connection is gone
 * (`DEALLOCATE ALL`, `DISCARD ALL`, a pooler that switched server connections): the failed batch
 * forgot the name, so the second one prepares it again. A batch that opened a transaction is
 * rolled back first; the failure came before any statement of the caller's ran.
 */
async function batchPrepared(
  client: ClientBase,
  statements: readonly BatchStatement[],
): Promise<BatchResult[]> {
  try {
    return await batch(client, statements);
  } catch (err) {
    const failed = err instanceof BatchError ? statements[err.index] : undefined;
    const code = err instanceof BatchError ? (err.cause as { code?: unknown }).code : undefined;
    if (failed?.name === undefined || code !== MISSING_STATEMENT) throw err;
    if (statements[0]?.text === 'BEGIN') await client.query('ROLLBACK');
    return batch(client, statements);
  }
}

/** SQLSTATE invalid_sql_statement_name: `prepared statement "..." does not exist`. */
const MISSING_STATEMENT = '26000';

/** A prepared-statement name unique to `text` (the fence table is part of it). */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `leasehold_fence_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
    statementNames.set(text, name);
  }
  return name;
}
const statementNames = new Map<string, string>();

function checkStatementText(statement: FencedStatement): string {
  if (typeof statement === 'object' && statement !== null && !Array.isArray(statement)) {
    checkKeys('statement', statement, FENCED_STATEMENT_KEYS);
  }
  const text = (statement as Partial<FencedStatement> | null)?.text;
  if (typeof text !== 'string' || text.trim().length === 0) {
    throw invalid('statement.text', 'one SQL statement (in { text, values?: [...] })', text);
  }
  return text;
}

function textValue(value: unknown, i: number): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  throw invalid(
    `statement.values[${i}] ($${i + 1})`,
    'a string, finite number, bigint, boolean or null',
    value,
  );
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
  create?: string,
): Promise<void> {
  const query = sql.columnTypeQuery('postgres', table, column);
  if (sql.isChecked(db, query)) return;
  const { rows } = await via.query<{ found: boolean; type: string | null }>(
    query.sql,
    query.params,
  );
  sql.checkIntegerColumn(
    'postgres',
    query,
    rows[0]?.found === true,
    rows[0]?.type ?? undefined,
    create,
  );
  sql.markChecked(db, query);
}

function isPool(db: PgQueryable): db is Pool {
  return 'totalCount' in db && 'idleCount' in db;
}

function toToken(text: string | null | undefined): bigint | undefined {
  return text === null || text === undefined ? undefined : BigInt(text);
}

/** Options of {@link postgresStore} and {@link postgresStoreDDL}; every field is optional. */
export type PostgresStoreOptions = SqlStoreOptions;

/** DDL for a {@link postgresStore}: its value table, plus the fence table when it uses one. */
export function postgresStoreDDL(options: PostgresStoreOptions = {}): string[] {
  checkSqlStoreOptions(options);
  const ddl = [sql.valueTableDDL('postgres', options.valueTable ?? postgresDefaults.valueTable)];
  if (options.via === 'fence-table') ddl.push(fenceTableDDL({ table: options.fenceTable }));
  return ddl;
}

/**
 * A {@link FencedStore} of one text value per resource: the conformance suite's view of this
 * module, and a worked example of both helpers.
 */
export function postgresStore(db: PgQueryable, options: PostgresStoreOptions = {}): FencedStore {
  checkSqlStoreOptions(options);
  const valueTable = options.valueTable ?? postgresDefaults.valueTable;
  const fenceTable = options.fenceTable ?? postgresDefaults.fenceTable;
  const values = sql.valueTableSQL('postgres', valueTable);
  const fences = sql.fenceTableSQL('postgres', fenceTable);
  const viaTable = options.via === 'fence-table';

  return {
    async write(write) {
      const { resource, token, value } = checkWrite(write);
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
      await withFence(db, { resource, token, table: fenceTable }, async (tx) => {
        await tx.query(values.write, [resource, value, token.toString()]);
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
