import type { Leasehold } from '@leasehold/core';
import Database from 'better-sqlite3';
import type { ClientBase } from 'pg';
import { describe, expect, it } from 'vitest';
import { describeFenceConformance } from './conformance.js';
import { InvalidArgumentError, isInvalidArgumentError, type StaleTokenError } from './errors.js';
import { etcdStore, fencedTxn } from './etcd.js';
import * as memory from './memory.js';
import type { MemoryState } from './memory.js';
import * as postgres from './postgres.js';
import {
  fencedDel,
  fencedExec,
  fencedHset,
  fencedSet,
  redisStore,
  type RedisScripting,
} from './redis.js';
import * as sqlite from './sqlite.js';

// Validation comes before any I/O: stand-ins for the clients are enough.
const db = {} as never;

describe('every function that takes an options object refuses anything else', () => {
  const calls: [string, (bad: unknown) => unknown][] = [
    ['postgres fenceTableDDL', (bad) => postgres.fenceTableDDL(bad as never)],
    ['postgresStoreDDL', (bad) => postgres.postgresStoreDDL(bad as never)],
    ['postgresStore', (bad) => postgres.postgresStore(db, bad as never)],
    ['sqlite fenceTableDDL', (bad) => sqlite.fenceTableDDL(bad as never)],
    ['sqliteStoreDDL', (bad) => sqlite.sqliteStoreDDL(bad as never)],
    ['sqliteStore', (bad) => sqlite.sqliteStore(db, bad as never)],
    ['redisStore', (bad) => redisStore(db, bad as never)],
    ['etcdStore', (bad) => etcdStore({} as Leasehold, bad as never)],
    [
      'describeFenceConformance',
      (bad) => describeFenceConformance('x', () => ({}) as never, bad as never),
    ],
  ];
  for (const [name, call] of calls) {
    for (const bad of ['my_table', 42, null, ['a']]) {
      it(`${name}(${JSON.stringify(bad)})`, () => {
        let error: unknown;
        try {
          call(bad);
        } catch (err) {
          error = err;
        }
        expect(isInvalidArgumentError(error), String(error)).toBe(true);
        expect((error as Error).message).toMatch(/^options must be an object \{.*\}, got /);
      });
    }
  }
});

/** What a call threw, sync or async; `undefined` if it did not. */
async function thrown(call: () => unknown): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  return undefined;
}

/** Not a `pg` error: what the stand-in clients answer, to show a call got past its checks. */
class Sent extends Error {}

/**
 * Stand-ins that count what reaches them: every fenced call, each with the options misspelt,
 * must throw before anything does. SQLite and memory are real: there, nothing may be written.
 */
function backends() {
  let sent = 0;
  const pg = {
    on: () => pg,
    removeListener: () => pg,
    async query() {
      sent++;
      throw new Sent('reached PostgreSQL');
    },
  } as unknown as ClientBase;
  const redis: RedisScripting = {
    async evalsha() {
      sent++;
      return [1, 'OK'];
    },
    async eval() {
      sent++;
      return [1, 'OK'];
    },
  };
  const redisStoreClient = Object.assign(redis, {
    hmget: async () => [null, null],
    get: async () => null,
  }) as never;
  // Validation reads the client's prefixes only; a call to etcd goes through `client.etcd`.
  const etcd = {
    lockPrefix: '/L/',
    electionPrefix: '/E/',
    get etcd(): never {
      sent++;
      throw new Sent('reached etcd');
    },
  } as unknown as Leasehold;
  const db = new Database(':memory:');
  db.exec(sqlite.fenceTableDDL());
  db.exec(sqlite.fenceTableDDL({ table: 'fences' }));
  for (const ddl of sqlite.sqliteStoreDDL()) db.exec(ddl);
  db.exec('CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER, fence INTEGER)');
  const state: MemoryState = new Map();
  let applied = 0;
  const written = () => {
    const rows = ['leasehold_fence', 'fences', 'leasehold_value', 'accounts'].map(
      (table) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n,
    );
    return sent + applied + state.size + rows.reduce((a, b) => a + b, 0);
  };
  const apply = () => void applied++;
  return { pg, redis, redisStoreClient, etcd, db, state, apply, written, reached: () => sent };
}

const put = [{ type: 'put' as const, key: '/app/x', value: 'v' }];

/** `<name>.<key> must be left out (not an option; allowed: ...), got <type>`: core's wording. */
const leftOut = (name: string, key: string, allowed: string, type: string) =>
  `${name}.${key} must be left out (not an option; allowed: ${allowed}), got ${type}`;

describe('a misspelt option is refused, in core’s wording, before anything is sent or written', () => {
  type B = ReturnType<typeof backends>;
  const rows: [string, (b: B) => unknown, string][] = [
    [
      'memory withFence',
      (b) => memory.withFence(b.state, { resource: 'r', token: 1n, tabel: 'x' } as never, b.apply),
      leftOut('fence', 'tabel', 'resource, token', 'string'),
    ],
    [
      'memoryStore().write',
      (b) =>
        memory
          .memoryStore(b.state)
          .write({ resource: 'r', token: 1n, value: 'v', vaule: 'w' } as never),
      leftOut('write', 'vaule', 'resource, token, value', 'string'),
    ],
    [
      'fencedTxn',
      (b) => fencedTxn(b.etcd, { resource: 'r', token: 1n, ops: put, prefx: '/myfence/' } as never),
      leftOut('txn', 'prefx', 'resource, token, ops, prefix, timeoutMs', 'string'),
    ],
    [
      'fencedTxn (timeout)',
      (b) => fencedTxn(b.etcd, { resource: 'r', token: 1n, ops: put, timeout: 500 } as never),
      leftOut('txn', 'timeout', 'resource, token, ops, prefix, timeoutMs', 'number'),
    ],
    [
      'etcdStore',
      (b) => etcdStore(b.etcd, { prefx: '/myfence/' } as never),
      leftOut('options', 'prefx', 'prefix, timeoutMs', 'string'),
    ],
    [
      'etcdStore().write',
      (b) =>
        etcdStore(b.etcd).write({ resource: 'r', token: 1n, value: 'v', prefix: '/x/' } as never),
      leftOut('write', 'prefix', 'resource, token, value', 'string'),
    ],
    [
      'postgres fenceTableDDL',
      () => postgres.fenceTableDDL({ tabel: 'fences' } as never),
      leftOut('options', 'tabel', 'table', 'string'),
    ],
    [
      'postgresStoreDDL',
      () => postgres.postgresStoreDDL({ valueTabel: 'values' } as never),
      leftOut('options', 'valueTabel', 'valueTable, via, fenceTable', 'string'),
    ],
    [
      'postgresStore',
      (b) => postgres.postgresStore(b.pg, { via: 'fence-table', fenceTabel: 'fences' } as never),
      leftOut('options', 'fenceTabel', 'valueTable, via, fenceTable', 'string'),
    ],
    [
      'postgresStore().write',
      (b) =>
        postgres
          .postgresStore(b.pg)
          .write({ resource: 'r', token: 1n, value: 'v', tokn: 2n } as never),
      leftOut('write', 'tokn', 'resource, token, value', 'bigint'),
    ],
    [
      'postgres withFence',
      (b) =>
        postgres.withFence(
          b.pg,
          { resource: 'r', token: 1n, fenceTabel: 'fences' } as never,
          async () => b.apply(),
        ),
      leftOut(
        'options',
        'fenceTabel',
        'resource, token, table, idleInTransactionTimeoutMs',
        'string',
      ),
    ],
    [
      'postgres withFence (idle bound)',
      (b) =>
        postgres.withFence(
          b.pg,
          { resource: 'r', token: 1n, idleTimeoutMs: 500 } as never,
          async () => b.apply(),
        ),
      leftOut(
        'options',
        'idleTimeoutMs',
        'resource, token, table, idleInTransactionTimeoutMs',
        'number',
      ),
    ],
    [
      'fencedQuery',
      (b) =>
        postgres.fencedQuery(b.pg, { resource: 'r', token: 1n, tabel: 'fences' } as never, {
          text: 'SELECT 1',
        }),
      leftOut('options', 'tabel', 'resource, token, table', 'string'),
    ],
    [
      'fencedQuery (statement)',
      (b) =>
        postgres.fencedQuery(b.pg, { resource: 'r', token: 1n }, {
          text: 'SELECT 1',
          rowMode: 'array',
        } as never),
      leftOut('statement', 'rowMode', 'text, values', 'string'),
    ],
    [
      'postgres upsertFencedRow',
      (b) =>
        postgres.upsertFencedRow(b.pg, {
          table: 'accounts',
          key: { id: 'a' },
          values: { balance: 1 },
          token: 1n,
          fenceColum: 'version',
        } as never),
      leftOut('write', 'fenceColum', 'table, key, values, token, fenceColumn, resource', 'string'),
    ],
    [
      'sqlite fenceTableDDL',
      () => sqlite.fenceTableDDL({ tabel: 'fences' } as never),
      leftOut('options', 'tabel', 'table', 'string'),
    ],
    [
      'sqliteStoreDDL',
      () => sqlite.sqliteStoreDDL({ vai: 'fence-table' } as never),
      leftOut('options', 'vai', 'valueTable, via, fenceTable', 'string'),
    ],
    [
      'sqliteStore',
      (b) => sqlite.sqliteStore(b.db, { via: 'fence-table', fenceTabel: 'fences' } as never),
      leftOut('options', 'fenceTabel', 'valueTable, via, fenceTable', 'string'),
    ],
    [
      'sqliteStore().write',
      (b) =>
        sqlite
          .sqliteStore(b.db)
          .write({ resource: 'r', token: 1n, value: 'v', vaule: 'w' } as never),
      leftOut('write', 'vaule', 'resource, token, value', 'string'),
    ],
    [
      'sqlite withFence',
      (b) =>
        sqlite.withFence(
          b.db,
          { resource: 'r', token: 1n, fenceTabel: 'fences' } as never,
          b.apply,
        ),
      leftOut('options', 'fenceTabel', 'resource, token, table', 'string'),
    ],
    [
      'sqlite upsertFencedRow',
      (b) =>
        sqlite.upsertFencedRow(b.db, {
          table: 'accounts',
          key: { id: 'a' },
          value: { balance: 1 },
          token: 1n,
        } as never),
      leftOut('write', 'value', 'table, key, values, token, fenceColumn, resource', 'object'),
    ],
    [
      'fencedExec',
      (b) =>
        fencedExec(b.redis, {
          fenceKey: 'f',
          token: 1n,
          commands: [['SET', 'k', 'v']],
          resouce: 'orders',
        } as never),
      leftOut('exec', 'resouce', 'fenceKey, token, commands, resource', 'string'),
    ],
    [
      'fencedSet',
      (b) =>
        fencedSet(b.redis, { fenceKey: 'f', token: 1n, key: 'k', value: 'v', ttl: 5 } as never),
      leftOut('write', 'ttl', 'fenceKey, token, key, value', 'number'),
    ],
    [
      'fencedHset',
      (b) =>
        fencedHset(b.redis, { fenceKey: 'f', token: 1n, key: 'h', field: { a: '1' } } as never),
      leftOut('write', 'field', 'fenceKey, token, key, fields', 'object'),
    ],
    [
      'fencedDel',
      (b) => fencedDel(b.redis, { fenceKey: 'f', token: 1n, key: 'k' } as never),
      leftOut('write', 'key', 'fenceKey, token, keys', 'string'),
    ],
    [
      'redisStore',
      (b) => redisStore(b.redisStoreClient, { prefx: 'app:' } as never),
      leftOut('options', 'prefx', 'prefix', 'string'),
    ],
    [
      'redisStore().write',
      (b) =>
        redisStore(b.redisStoreClient).write({
          resource: 'r',
          token: 1n,
          value: 'v',
          ttl: 5,
        } as never),
      leftOut('write', 'ttl', 'resource, token, value', 'number'),
    ],
    [
      'describeFenceConformance',
      () => describeFenceConformance('x', () => ({}) as never, { concurentWriters: 8 } as never),
      leftOut('options', 'concurentWriters', 'concurrentWriters', 'number'),
    ],
  ];
  for (const [name, call, message] of rows) {
    it(name, async () => {
      const b = backends();
      const err = await thrown(() => call(b));
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as Error).message).toBe(message);
      expect(b.written()).toBe(0);
    });
  }
});

describe('the refusal of an unknown key', () => {
  it('names only the type of its value, never the value (a misspelt option may be a secret)', () => {
    const cases: [unknown, string][] = [
      ['hunter2', 'string'],
      [42, 'number'],
      [7n, 'bigint'],
      [true, 'boolean'],
      [null, 'null'],
      [['a'], 'an array'],
      [{ password: 'hunter2' }, 'object'],
      [() => 'hunter2', 'function'],
      [undefined, 'undefined'],
    ];
    for (const [value, type] of cases) {
      let err: unknown;
      try {
        redisStore({} as never, { prefix: 'app:', passwrd: value } as never);
      } catch (e) {
        err = e;
      }
      expect((err as Error).message).toBe(leftOut('options', 'passwrd', 'prefix', type));
      expect((err as Error).message).not.toContain('hunter2');
    }
  });

  it('refuses an unknown key whose value is undefined; a known key given as undefined is left out', async () => {
    const b = backends();
    expect(() => postgres.fenceTableDDL({ tabel: undefined } as never)).toThrow(
      leftOut('options', 'tabel', 'table', 'undefined'),
    );
    expect(postgres.fenceTableDDL({ table: undefined })).toBe(postgres.fenceTableDDL());
    expect(
      sqlite.sqliteStoreDDL({ valueTable: undefined, via: undefined, fenceTable: undefined }),
    ).toEqual(sqlite.sqliteStoreDDL());
    expect(etcdStore(b.etcd, { prefix: undefined, timeoutMs: undefined }).prefix).toBe(
      '/leasehold/fence/',
    );
    expect(() => redisStore(b.redisStoreClient, { prefix: undefined })).not.toThrow();
    expect(b.written()).toBe(0);
  });
});

describe('a call with every documented option still passes its checks', () => {
  it('memory', async () => {
    const b = backends();
    memory.withFence(b.state, { resource: 'r', token: 2n }, b.apply);
    await memory.memoryStore(b.state).write({ resource: 's', token: 3n, value: 'v' });
    expect(b.written()).toBe(3); // one apply, two resources
  });

  it('etcd: fencedTxn and etcdStore reach etcd', async () => {
    const b = backends();
    const txn = { resource: 'r', token: 1n, ops: put, prefix: '/app/', timeoutMs: 500 };
    expect(await thrown(() => fencedTxn(b.etcd, txn))).toBeInstanceOf(Sent);
    const store = etcdStore(b.etcd, { prefix: '/app/', timeoutMs: 500 });
    expect(store.fenceKey('r')).toBe('/app/token/r');
    expect(
      await thrown(() => store.write({ resource: 'r', token: 1n, value: 'v' })),
    ).toBeInstanceOf(Sent);
    expect(b.reached()).toBe(2);
  });

  it('postgres: every fenced call reaches PostgreSQL, the DDL names the tables', async () => {
    const b = backends();
    const options = { valueTable: 'vals', via: 'fence-table', fenceTable: 'fences' } as const;
    expect(postgres.fenceTableDDL({ table: 'fences' })).toContain('"fences"');
    expect(postgres.postgresStoreDDL(options).join('\n')).toMatch(/"vals"[^]*"fences"/);
    const calls = [
      () => postgres.postgresStore(b.pg, options).write({ resource: 'r', token: 1n, value: 'v' }),
      () =>
        postgres.withFence(
          b.pg,
          { resource: 'r', token: 1n, table: 'fences', idleInTransactionTimeoutMs: 500 },
          async () => b.apply(),
        ),
      () =>
        postgres.fencedQuery(
          b.pg,
          { resource: 'r', token: 1n, table: 'fences' },
          { text: 'SELECT $1::int', values: [1] },
        ),
      () =>
        postgres.upsertFencedRow(b.pg, {
          table: 'accounts',
          key: { id: 'a' },
          values: { balance: 1 },
          token: 1n,
          fenceColumn: 'version',
          resource: 'account a',
        }),
    ];
    for (const call of calls) expect(await thrown(call)).toBeInstanceOf(Sent);
    expect(b.reached()).toBe(calls.length);
  });

  it('sqlite: every call writes', async () => {
    const b = backends();
    const options = { valueTable: 'vals', via: 'fence-table', fenceTable: 'fences' } as const;
    expect(sqlite.fenceTableDDL({ table: 'fences' })).toContain('"fences"');
    for (const ddl of sqlite.sqliteStoreDDL(options)) b.db.exec(ddl);
    const store = sqlite.sqliteStore(b.db, options);
    await store.write({ resource: 'r', token: 5n, value: 'v' });
    expect(await store.read('r')).toEqual({ value: 'v', token: 5n });
    expect(sqlite.withFence(b.db, { resource: 'q', token: 1n, table: 'fences' }, () => 'ran')).toBe(
      'ran',
    );
    const row = {
      table: 'accounts',
      key: { id: 'a' },
      values: { balance: 1 },
      fenceColumn: 'fence',
      resource: 'account a',
    };
    sqlite.upsertFencedRow(b.db, { ...row, token: 9n });
    const err = await thrown(() => sqlite.upsertFencedRow(b.db, { ...row, token: 8n }));
    expect((err as StaleTokenError).resource).toBe('account a');
    expect(b.written()).toBe(3); // two fence rows and the account; vals is not counted
  });

  it('redis: every fenced call reaches Redis', async () => {
    const b = backends();
    await fencedExec(b.redis, {
      fenceKey: 'f',
      token: 1n,
      commands: [['SET', 'k', 'v']],
      resource: 'orders',
    });
    await fencedSet(b.redis, { fenceKey: 'f', token: 1n, key: 'k', value: 'v' });
    await fencedHset(b.redis, { fenceKey: 'f', token: 1n, key: 'h', fields: { a: '1', b: 2 } });
    await fencedDel(b.redis, { fenceKey: 'f', token: 1n, keys: ['k', 'h'] });
    await redisStore(b.redisStoreClient, { prefix: 'app:' }).write({
      resource: 'r',
      token: 1n,
      value: 'v',
    });
    expect(b.reached()).toBe(5);
  });
});
