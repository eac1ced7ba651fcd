import { describeFenceConformance } from '@leasehold/fence/conformance';
import {
  sqliteStore,
  sqliteStoreDDL,
  type SqliteDatabase,
  type SqliteStoreOptions,
} from '@leasehold/fence/sqlite';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { openSqlite } from './stores.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-fence-it-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

for (const via of ['row', 'fence-table'] as const) {
  describeFenceConformance(`sqlite file (${via})`, () => {
    const file = join(dir, `${via}.db`);
    const options: SqliteStoreOptions = { via };
    const open: SqliteDatabase[] = [];
    const connect = () => {
      const db = openSqlite(file);
      // Two connections write the same file: wait for the lock instead of failing at once.
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
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
