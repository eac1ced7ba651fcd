import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeFenceConformance } from './conformance.js';
import { isInvalidArgumentError, isStaleTokenError, type StaleTokenError } from './errors.js';
import {
  fenceTableDDL,
  sqliteStore,
  sqliteStoreDDL,
  upsertFencedRow,
  withFence,
  type SqliteStoreOptions,
} from './sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-fence-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function conformance(via: 'row' | 'fence-table'): void {
  const file = join(dir, `${via}.db`);
  const options: SqliteStoreOptions = { via };
  describeFenceConformance(`sqlite (${via})`, () => {
    const open: Database.Database[] = [];
    const connect = () => {
      const db = new Database(file);
      open.push(db);
      for (const ddl of sqliteStoreDDL(options)) db.exec(ddl);
      return sqliteStore(db, options);
    };
    return {
      store: connect(),
      reopen: async () => connect(),
      close: async () => open.forEach((db) => db.close()),
    };
  });
}
conformance('row');
conformance('fence-table');

function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('sqlite upsertFencedRow (seed pattern)', () => {
  it('updates only rows whose fence is lower, with a NULL fence counting as unfenced', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER, fence INTEGER)');
    db.exec("INSERT INTO accounts VALUES ('a', 1, NULL)");
    upsertFencedRow(db, {
      table: 'accounts',
      key: { id: 'a' },
      values: { balance: 2 },
      token: 9007199254740993n,
    });
    const err = caught(() =>
      upsertFencedRow(db, {
        table: 'accounts',
        key: { id: 'a' },
        values: { balance: 3 },
        token: 9007199254740992n,
      }),
    ) as StaleTokenError;
    expect(isStaleTokenError(err)).toBe(true);
    expect(err.resource).toBe('accounts[id=a]');
    expect(err.highestToken).toBe(9007199254740993n);
    const row = db.prepare('SELECT balance, fence FROM accounts').safeIntegers(true).get();
    expect(row).toEqual({ balance: 2n, fence: 9007199254740993n });
  });

  it('refuses identifiers that are not plain names', () => {
    const db = new Database(':memory:');
    expect(() =>
      upsertFencedRow(db, { table: 'a; drop table x', key: { id: 1 }, token: 1n }),
    ).toThrow(/^table must be /);
    expect(() => upsertFencedRow(db, { table: 't', key: {}, token: 1n })).toThrow(
      /^keyColumns must be /,
    );
  });
});

describe('sqlite withFence', () => {
  it('rolls back the fence advance when the statements throw', () => {
    const db = new Database(':memory:');
    db.exec(fenceTableDDL());
    db.exec('CREATE TABLE log (line TEXT)');
    withFence(db, { resource: 'r', token: 5n }, (tx) =>
      tx.prepare("INSERT INTO log VALUES ('five')").run(),
    );
    expect(
      caught(() =>
        withFence(db, { resource: 'r', token: 8n }, (tx) => {
          tx.prepare("INSERT INTO log VALUES ('eight')").run();
          throw new Error('boom');
        }),
      ),
    ).toHaveProperty('message', 'boom');
    // Token 8 was never recorded, so 6 is still accepted.
    withFence(db, { resource: 'r', token: 6n }, (tx) =>
      tx.prepare("INSERT INTO log VALUES ('six')").run(),
    );
    expect(db.prepare('SELECT line FROM log').pluck().all()).toEqual(['five', 'six']);
  });

  it('does not run the statements for a stale token', () => {
    const db = new Database(':memory:');
    db.exec(fenceTableDDL());
    withFence(db, { resource: 'r', token: 5n }, () => undefined);
    let ran = false;
    const err = caught(() => withFence(db, { resource: 'r', token: 4n }, () => (ran = true)));
    expect(isStaleTokenError(err)).toBe(true);
    expect(ran).toBe(false);
  });

  it('refuses an async statements function', () => {
    const db = new Database(':memory:');
    db.exec(fenceTableDDL());
    expect(() => withFence(db, { resource: 'r', token: 1n }, async () => undefined)).toThrow(
      /returned a Promise/,
    );
    expect(db.prepare('SELECT count(*) FROM leasehold_fence').pluck().get()).toBe(0);
  });
});

describe('sqlite fence column type', () => {
  it.each(['TEXT', 'VARCHAR(20)', 'BLOB', 'REAL', 'NUMERIC', ''])(
    'upsertFencedRow refuses a fence column declared %j, naming the table, the column and INTEGER affinity',
    (declared) => {
      const db = new Database(':memory:');
      db.exec(`CREATE TABLE accounts (id TEXT PRIMARY KEY, body TEXT, fence ${declared})`);
      const write = (token: bigint) =>
        upsertFencedRow(db, { table: 'accounts', key: { id: 'a' }, values: { body: 'x' }, token });
      // As text, '9' > '10': without the check token 9 would overwrite token 10's row.
      const err = caught(() => write(10n));
      expect(isInvalidArgumentError(err)).toBe(true);
      expect((err as Error).message).toContain('"accounts"');
      expect((err as Error).message).toContain('"fence"');
      expect((err as Error).message).toContain('INTEGER affinity');
      expect(isInvalidArgumentError(caught(() => write(9n)))).toBe(true);
      expect(db.prepare('SELECT count(*) FROM accounts').pluck().get()).toBe(0);
    },
  );

  it.each(['INTEGER', 'INT', 'BIGINT', 'int8'])(
    'accepts a fence column declared %s',
    (declared) => {
      const db = new Database(':memory:');
      db.exec(`CREATE TABLE accounts (id TEXT PRIMARY KEY, fence ${declared})`);
      upsertFencedRow(db, { table: 'accounts', key: { id: 'a' }, token: 10n });
      expect(
        isStaleTokenError(
          caught(() => upsertFencedRow(db, { table: 'accounts', key: { id: 'a' }, token: 9n })),
        ),
      ).toBe(true);
    },
  );

  it('compares with the integer token even if the column is re-created as TEXT after the check', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE accounts (id TEXT PRIMARY KEY, fence INTEGER)');
    upsertFencedRow(db, { table: 'accounts', key: { id: 'a' }, token: 10n }); // checked, cached
    db.exec('DROP TABLE accounts');
    db.exec(
      "CREATE TABLE accounts (id TEXT PRIMARY KEY, fence TEXT); INSERT INTO accounts VALUES ('a', '10')",
    );
    const err = caught(() =>
      upsertFencedRow(db, { table: 'accounts', key: { id: 'a' }, token: 9n }),
    );
    expect(isStaleTokenError(err)).toBe(true);
    expect(db.prepare('SELECT fence FROM accounts').pluck().get()).toBe('10');
  });

  it('withFence refuses a fence table whose token column is TEXT', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE fences (resource TEXT PRIMARY KEY, token TEXT NOT NULL)');
    let ran = 0;
    const err = caught(() =>
      withFence(db, { resource: 'job', token: 10n, table: 'fences' }, () => ran++),
    );
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toContain('"fences"');
    expect((err as Error).message).toContain('"token"');
    expect((err as Error).message).toContain('INTEGER affinity');
    expect(ran).toBe(0);
  });

  it('withFence compares with the integer token even if the table is re-created as TEXT after the check', () => {
    const db = new Database(':memory:');
    db.exec(fenceTableDDL({ table: 'fences' }));
    withFence(db, { resource: 'job', token: 10n, table: 'fences' }, () => undefined);
    db.exec('DROP TABLE fences');
    db.exec(
      "CREATE TABLE fences (resource TEXT PRIMARY KEY, token TEXT NOT NULL); INSERT INTO fences VALUES ('job', '10')",
    );
    expect(
      isStaleTokenError(
        caught(() =>
          withFence(db, { resource: 'job', token: 9n, table: 'fences' }, () => undefined),
        ),
      ),
    ).toBe(true);
  });
});
