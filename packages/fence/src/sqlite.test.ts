import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeFenceConformance } from './conformance.js';
import { isStaleTokenError, type StaleTokenError } from './errors.js';
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
    ).toThrow(/invalid table/);
    expect(() => upsertFencedRow(db, { table: 't', key: {}, token: 1n })).toThrow(/invalid key/);
  });
});

describe('sqlite withFence', () => {
  it('rolls back the fence advance when the statements throw', () => {
    const db = new Database(':memory:');
    db.exec(fenceTableDDL());
    db.exec('CREATE TABLE log (line TEXT)');
    withFence(db, 'r', 5n, (tx) => tx.prepare("INSERT INTO log VALUES ('five')").run());
    expect(
      caught(() =>
        withFence(db, 'r', 8n, (tx) => {
          tx.prepare("INSERT INTO log VALUES ('eight')").run();
          throw new Error('boom');
        }),
      ),
    ).toHaveProperty('message', 'boom');
    // Token 8 was never recorded, so 6 is still accepted.
    withFence(db, 'r', 6n, (tx) => tx.prepare("INSERT INTO log VALUES ('six')").run());
    expect(db.prepare('SELECT line FROM log').pluck().all()).toEqual(['five', 'six']);
  });

  it('does not run the statements for a stale token', () => {
    const db = new Database(':memory:');
    db.exec(fenceTableDDL());
    withFence(db, 'r', 5n, () => undefined);
    let ran = false;
    const err = caught(() => withFence(db, 'r', 4n, () => (ran = true)));
    expect(isStaleTokenError(err)).toBe(true);
    expect(ran).toBe(false);
  });

  it('refuses an async statements function', () => {
    const db = new Database(':memory:');
    db.exec(fenceTableDDL());
    expect(() => withFence(db, 'r', 1n, async () => undefined)).toThrow(/returned a Promise/);
    expect(db.prepare('SELECT count(*) FROM leasehold_fence').pluck().get()).toBe(0);
  });
});
