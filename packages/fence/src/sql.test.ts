import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError } from './errors.js';
import {
  checkIntegerColumn,
  columnTypeQuery,
  fenceTableDDL,
  fenceTableSQL,
  fencedRowSQL,
  sqliteAffinity,
  valueTableDDL,
  valueTableSQL,
} from './sql.js';

const row = {
  table: 'app.accounts',
  keyColumns: ['id'],
  valueColumns: ['balance'],
  fenceColumn: 'fence',
};

describe('fencedRowSQL', () => {
  it('PostgreSQL: numbered parameters, the token compared as $n::int8', () => {
    expect(fencedRowSQL('postgres', row)).toEqual({
      upsert:
        'INSERT INTO "app"."accounts" AS "target" ("id", "balance", "fence") ' +
        'VALUES ($1, $2, $3::int8) ON CONFLICT ("id") DO UPDATE SET ' +
        '"balance" = EXCLUDED."balance", "fence" = EXCLUDED."fence" ' +
        'WHERE "target"."fence" IS NULL OR "target"."fence" <= $4::int8',
      select: 'SELECT CAST("fence" AS text) AS fence FROM "app"."accounts" WHERE "id" = $1',
    });
  });

  it('SQLite: the same statement with anonymous parameters and CAST(? AS INTEGER)', () => {
    expect(fencedRowSQL('sqlite', { ...row, keyColumns: ['a', 'b'] })).toEqual({
      upsert:
        'INSERT INTO "app"."accounts" AS "target" ("a", "b", "balance", "fence") ' +
        'VALUES (?, ?, ?, CAST(? AS INTEGER)) ON CONFLICT ("a", "b") DO UPDATE SET ' +
        '"balance" = EXCLUDED."balance", "fence" = EXCLUDED."fence" ' +
        'WHERE "target"."fence" IS NULL OR "target"."fence" <= CAST(? AS INTEGER)',
      select:
        'SELECT CAST("fence" AS TEXT) AS fence FROM "app"."accounts" WHERE "a" = ? AND "b" = ?',
    });
  });

  it('never compares the column with the inserted value, which takes the column type', () => {
    for (const dialect of ['postgres', 'sqlite'] as const) {
      expect(fencedRowSQL(dialect, row).upsert).not.toMatch(/<= EXCLUDED/);
      expect(fenceTableSQL(dialect, 'f').advance).not.toMatch(/<= EXCLUDED/);
    }
  });

  it('refuses an empty key and unsafe identifiers', () => {
    expect(() => fencedRowSQL('postgres', { ...row, keyColumns: [] })).toThrow(
      /^keyColumns must be one or more columns .*, got none$/,
    );
    expect(() => fencedRowSQL('sqlite', { ...row, fenceColumn: 'f; --' })).toThrow(
      /^fence column must be .*, got "f; --"$/,
    );
  });
});

describe('fence and value tables', () => {
  it('PostgreSQL', () => {
    expect(fenceTableSQL('postgres', 'fences')).toEqual({
      advance:
        'INSERT INTO "fences" AS "fence" (resource, token) VALUES ($1, $2::int8) ' +
        'ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now() ' +
        'WHERE "fence".token <= $3::int8',
      select: 'SELECT CAST(token AS text) AS token FROM "fences" WHERE resource = $1',
    });
    expect(valueTableSQL('postgres', 'v').write).toBe(
      'INSERT INTO "v" (resource, value, fence) VALUES ($1, $2, $3::int8) ' +
        'ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence',
    );
    expect(fenceTableDDL('postgres', 'fences')).toBe(
      'CREATE TABLE IF NOT EXISTS "fences" (\n' +
        '  resource text PRIMARY KEY,\n' +
        '  token int8 NOT NULL CHECK (token >= 1),\n' +
        '  updated_at timestamptz NOT NULL DEFAULT now()\n' +
        ')',
    );
    expect(valueTableDDL('postgres', 'v')).toContain('fence int8 NOT NULL\n)');
  });

  it('SQLite', () => {
    expect(fenceTableSQL('sqlite', 'fences')).toEqual({
      advance:
        'INSERT INTO "fences" AS "fence" (resource, token) VALUES (?, CAST(? AS INTEGER)) ' +
        'ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token ' +
        'WHERE "fence".token <= CAST(? AS INTEGER)',
      select: 'SELECT CAST(token AS TEXT) AS token FROM "fences" WHERE resource = ?',
    });
    expect(fenceTableDDL('sqlite', 'fences')).toBe(
      'CREATE TABLE IF NOT EXISTS "fences" (\n' +
        '  resource TEXT PRIMARY KEY NOT NULL,\n' +
        '  token INTEGER NOT NULL CHECK (token >= 1)\n' +
        ') STRICT',
    );
    expect(valueTableDDL('sqlite', 'v')).toContain('fence INTEGER NOT NULL\n) STRICT');
  });
});

describe('token column type', () => {
  it('asks PostgreSQL by quoted table name and SQLite by table and schema', () => {
    expect(columnTypeQuery('postgres', 'app.accounts', 'fence')).toMatchObject({
      params: ['"app"."accounts"', 'fence'],
      table: '"app"."accounts"',
      column: '"fence"',
    });
    expect(columnTypeQuery('sqlite', 'accounts', 'fence').params).toEqual(['accounts', null]);
    expect(columnTypeQuery('sqlite', 'aux.accounts', 'fence').params).toEqual(['accounts', 'aux']);
  });

  it.each([
    ['INTEGER', 'INTEGER'],
    ['bigint', 'INTEGER'],
    ['UNSIGNED BIG INT', 'INTEGER'],
    ['VARCHAR(20)', 'TEXT'],
    ['text', 'TEXT'],
    ['', 'BLOB'],
    ['BLOB', 'BLOB'],
    ['DOUBLE PRECISION', 'REAL'],
    ['NUMERIC', 'NUMERIC'],
    ['DECIMAL(10,5)', 'NUMERIC'],
  ] as const)('SQLite affinity of %j is %s', (declared, affinity) => {
    expect(sqliteAffinity(declared)).toBe(affinity);
  });

  it.each([
    [
      'postgres',
      true,
      'text',
      /^token column "fence" of table "t" must have type bigint \(int8\), got type text$/,
    ],
    [
      'postgres',
      true,
      undefined,
      /^table "t" must have a column "fence" with type bigint \(int8\), got a table without column "fence"$/,
    ],
    [
      'postgres',
      false,
      undefined,
      /^table "t" must exist, with a column "fence" with type bigint \(int8\), got no such table$/,
    ],
    [
      'sqlite',
      true,
      'TEXT',
      /must have INTEGER affinity .*, got declared type "TEXT", which has TEXT affinity$/,
    ],
    ['sqlite', true, 'NUMERIC', /has NUMERIC affinity/],
  ] as const)('%s refuses found=%s type=%s', (dialect, found, type, message) => {
    let caught: unknown;
    try {
      checkIntegerColumn(dialect, columnTypeQuery(dialect, 't', 'fence'), found, type);
    } catch (err) {
      caught = err;
    }
    expect(isInvalidArgumentError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(message);
  });

  it('accepts bigint and INTEGER affinity', () => {
    expect(() =>
      checkIntegerColumn('postgres', columnTypeQuery('postgres', 't', 'f'), true, 'bigint'),
    ).not.toThrow();
    expect(() =>
      checkIntegerColumn('sqlite', columnTypeQuery('sqlite', 't', 'f'), true, 'BIGINT'),
    ).not.toThrow();
  });
});
