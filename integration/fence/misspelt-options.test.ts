/**
 * A misspelt option must not fall back to its default: `fencedTxn(client, { ..., prefx })` used
 * to write its fence key under the default prefix, so two writers could be fenced by different
 * keys. Against the real stores: each misspelt call is refused in core's wording, and nothing
 * lands, neither where the option meant nor where its default points. The same calls spelt
 * right, with every documented option, write where the options say.
 */
import { connect, type Leasehold } from '@leasehold/core';
import { InvalidArgumentError, isStaleTokenError, type StaleTokenError } from '@leasehold/fence';
import { etcdStore, fencedTxn } from '@leasehold/fence/etcd';
import * as postgres from '@leasehold/fence/postgres';
import { fencedExec, fencedSet, redisStore } from '@leasehold/fence/redis';
import * as sqlite from '@leasehold/fence/sqlite';
import { Etcd3 } from 'etcd3';
import type { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import {
  describeWith,
  findPostgres,
  findRedis,
  openSqlite,
  ownSchema,
  pgPool,
  redisClient,
  uniqueName,
  type PgPool,
} from './stores.js';

/** `<name>.<key> must be left out (not an option; allowed: ...), got <type>`: core's wording. */
const leftOut = (name: string, key: string, allowed: string, type: string) =>
  `${name}.${key} must be left out (not an option; allowed: ${allowed}), got ${type}`;

async function refusal(call: () => unknown): Promise<{ class: boolean; message: string }> {
  try {
    await call();
  } catch (err) {
    return { class: err instanceof InvalidArgumentError, message: (err as Error).message };
  }
  throw new Error('expected the call to be refused, but it was accepted');
}

describe('fence etcd: misspelt options', () => {
  const endpoints = sharedEndpoints();
  const base = uniquePrefix('fence-misspelt');
  const intended = `${base}fence/`;
  const resource = `misspelt-${randomUUID()}`;
  const encoded = encodeURIComponent(resource);
  const admin = new Etcd3({ hosts: endpoints });
  let client: Leasehold;
  beforeAll(async () => {
    client = await connect({ endpoints });
  });
  afterAll(async () => {
    await client.close();
    await admin.delete().prefix(base);
    await admin.delete().key(`/leasehold/fence/token/${encoded}`);
    await admin.delete().key(`/leasehold/fence/value/${encoded}`);
    admin.close();
  });
  /** Every key either place holds: under this file's prefix, or the default one for `resource`. */
  const landed = async () => [
    ...(await admin.getAll().prefix(base).keys()),
    ...(await admin.getAll().prefix('/leasehold/fence/').keys()).filter((k) => k.endsWith(encoded)),
  ];

  it('fencedTxn({ prefx }) and etcdStore({ prefx }) are refused; no fence key, no value lands', async () => {
    const ops = [{ type: 'put' as const, key: `${base}data`, value: 'v' }];
    expect(
      await refusal(() =>
        fencedTxn(client, { resource, token: 5n, ops, prefx: intended } as never),
      ),
    ).toEqual({
      class: true,
      message: leftOut('txn', 'prefx', 'resource, token, ops, prefix, timeoutMs', 'string'),
    });
    expect(
      await refusal(() => fencedTxn(client, { resource, token: 5n, ops, timeout: 500 } as never)),
    ).toEqual({
      class: true,
      message: leftOut('txn', 'timeout', 'resource, token, ops, prefix, timeoutMs', 'number'),
    });
    expect(await refusal(() => etcdStore(client, { prefx: intended } as never))).toEqual({
      class: true,
      message: leftOut('options', 'prefx', 'prefix, timeoutMs', 'string'),
    });
    const store = etcdStore(client, { prefix: intended });
    expect(
      await refusal(() =>
        store.write({ resource, token: 5n, value: 'v', prefix: '/elsewhere/' } as never),
      ),
    ).toEqual({
      class: true,
      message: leftOut('write', 'prefix', 'resource, token, value', 'string'),
    });
    expect(await landed()).toEqual([]);
  });

  it('spelt right, with every option, the fence key lands under the prefix given', async () => {
    const ops = [{ type: 'put' as const, key: `${base}data`, value: 'v' }];
    await fencedTxn(client, { resource, token: 5n, ops, prefix: intended, timeoutMs: 5_000 });
    const store = etcdStore(client, { prefix: intended, timeoutMs: 5_000 });
    await store.write({ resource, token: 6n, value: 'w' });
    expect(await store.read(resource)).toEqual({ value: 'w', token: 6n });
    expect((await landed()).sort()).toEqual(
      [`${base}data`, `${intended}token/${encoded}`, `${intended}value/${encoded}`].sort(),
    );
  });
});

describeWith(await findPostgres(), 'fence PostgreSQL: misspelt options', (url) => {
  // search_path is this file's own schema: the default tables resolve inside it, so a call that
  // fell back to a default would write where this test can see it.
  const schema = ownSchema(url, 'misspelt');
  let pool: PgPool;
  beforeAll(async () => {
    pool = pgPool(schema.url, 2);
    for (const table of [undefined, 'fences']) {
      await pool.query(postgres.fenceTableDDL({ table }));
    }
    for (const valueTable of [undefined, 'vals']) {
      for (const ddl of postgres.postgresStoreDDL({ valueTable })) await pool.query(ddl);
    }
    await pool.query(
      'CREATE TABLE accounts (id text PRIMARY KEY, balance int, fence int8, version int8)',
    );
  });
  afterAll(async () => {
    await pool.end();
  });
  const rows = async () => {
    const { rows } = await schema.admin().query<Record<string, string[]>>(
      `SELECT
          (SELECT coalesce(array_agg(resource || '@' || token), '{}') FROM "${schema.name}".leasehold_fence) AS default_fences,
          (SELECT coalesce(array_agg(resource || '@' || token), '{}') FROM "${schema.name}".fences) AS fences,
          (SELECT coalesce(array_agg(resource), '{}') FROM "${schema.name}".leasehold_value) AS default_values,
          (SELECT coalesce(array_agg(resource), '{}') FROM "${schema.name}".vals) AS vals,
          (SELECT coalesce(array_agg(id || ':' || coalesce(fence::text, '-') || ':' || coalesce(version::text, '-')), '{}') FROM "${schema.name}".accounts) AS accounts`,
    );
    return rows[0];
  };

  it('every fenced call refuses a misspelt option; no row lands in the tables meant or the defaults', async () => {
    const cases: [() => unknown, string][] = [
      [
        () =>
          postgres.withFence(
            pool,
            { resource: 'job', token: 5n, fenceTabel: 'fences' } as never,
            async (tx) => tx.query(`INSERT INTO vals VALUES ('job', 'x', 5)`),
          ),
        leftOut(
          'options',
          'fenceTabel',
          'resource, token, table, idleInTransactionTimeoutMs',
          'string',
        ),
      ],
      [
        () =>
          postgres.withFence(
            pool,
            { resource: 'job', token: 5n, table: 'fences', idleTimeoutMs: 500 } as never,
            async () => undefined,
          ),
        leftOut(
          'options',
          'idleTimeoutMs',
          'resource, token, table, idleInTransactionTimeoutMs',
          'number',
        ),
      ],
      [
        () =>
          postgres.fencedQuery(pool, { resource: 'job', token: 5n, tabel: 'fences' } as never, {
            text: `INSERT INTO vals VALUES ('job', 'x', 5)`,
          }),
        leftOut('options', 'tabel', 'resource, token, table', 'string'),
      ],
      [
        () =>
          postgres.fencedQuery(pool, { resource: 'job', token: 5n, table: 'fences' }, {
            text: `INSERT INTO vals VALUES ('job', 'x', 5)`,
            rowMode: 'array',
          } as never),
        leftOut('statement', 'rowMode', 'text, values', 'string'),
      ],
      [
        () =>
          postgres.upsertFencedRow(pool, {
            table: 'accounts',
            key: { id: 'a' },
            values: { balance: 1 },
            token: 5n,
            fenceColum: 'version',
          } as never),
        leftOut(
          'write',
          'fenceColum',
          'table, key, values, token, fenceColumn, resource',
          'string',
        ),
      ],
      [
        () => postgres.postgresStore(pool, { via: 'fence-table', fenceTabel: 'fences' } as never),
        leftOut('options', 'fenceTabel', 'valueTable, via, fenceTable', 'string'),
      ],
      [
        () =>
          postgres
            .postgresStore(pool, { valueTable: 'vals' })
            .write({ resource: 'job', token: 5n, value: 'x', tokn: 6n } as never),
        leftOut('write', 'tokn', 'resource, token, value', 'bigint'),
      ],
      [
        () => postgres.fenceTableDDL({ tabel: 'fences' } as never),
        leftOut('options', 'tabel', 'table', 'string'),
      ],
      [
        () => postgres.postgresStoreDDL({ valueTabel: 'vals' } as never),
        leftOut('options', 'valueTabel', 'valueTable, via, fenceTable', 'string'),
      ],
    ];
    for (const [call, message] of cases) {
      expect(await refusal(call)).toEqual({ class: true, message });
    }
    expect(await rows()).toEqual({
      default_fences: [],
      fences: [],
      default_values: [],
      vals: [],
      accounts: [],
    });
  });

  it('refuses before it takes a connection from the pool', async () => {
    const fresh = pgPool(schema.url, 2);
    try {
      const calls = [
        () =>
          postgres.fencedQuery(fresh, { resource: 'job', token: 5n }, {
            text: 'SELECT 1',
            rowMode: 'array',
          } as never),
        () =>
          postgres.fencedQuery(fresh, { resource: 'job', token: 5n, tabel: 'f' } as never, {
            text: 'SELECT 1',
          }),
        () =>
          postgres.withFence(fresh, { resource: 'job', token: 5n, tabel: 'f' } as never, () =>
            Promise.resolve(),
          ),
        () =>
          postgres.upsertFencedRow(fresh, {
            table: 'accounts',
            key: { id: 'a' },
            values: { balance: 1 },
            token: 5n,
            fenceColum: 'version',
          } as never),
      ];
      for (const call of calls) expect((await refusal(call)).class).toBe(true);
      expect(fresh.totalCount, 'connections the refused calls took').toBe(0);
    } finally {
      // A connection taken and never released would keep end() waiting: only await a clean pool.
      const ending = fresh.end();
      if (fresh.totalCount === 0) await ending;
    }
  });

  it('spelt right, with every option, each call writes to the tables and column given', async () => {
    await postgres.withFence(
      pool,
      { resource: 'tx', token: 5n, table: 'fences', idleInTransactionTimeoutMs: 5_000 },
      async (tx) => tx.query(`INSERT INTO vals VALUES ('tx', 'x', 5)`),
    );
    const { rowCount } = await postgres.fencedQuery(
      pool,
      { resource: 'query', token: 6n, table: 'fences' },
      { text: `INSERT INTO vals VALUES ($1, 'y', 6)`, values: ['query'] },
    );
    expect(rowCount).toBe(1);
    const row = {
      table: 'accounts',
      key: { id: 'a' },
      values: { balance: 1 },
      fenceColumn: 'version',
      resource: 'account a',
    };
    await postgres.upsertFencedRow(pool, { ...row, token: 7n });
    const stale = await postgres
      .upsertFencedRow(pool, { ...row, token: 6n })
      .catch((err: unknown) => err);
    expect(stale).toSatisfy(isStaleTokenError);
    expect((stale as StaleTokenError).resource).toBe('account a');
    const store = postgres.postgresStore(pool, {
      valueTable: 'vals',
      via: 'fence-table',
      fenceTable: 'fences',
    });
    await store.write({ resource: 'store', token: 8n, value: 'z' });
    expect(await rows()).toEqual({
      default_fences: [],
      fences: expect.arrayContaining(['tx@5', 'query@6', 'store@8']) as unknown,
      default_values: [],
      vals: expect.arrayContaining(['tx', 'query', 'store']) as unknown,
      accounts: ['a:-:7'],
    });
  });
});

describeWith(await findRedis(), 'fence Redis: misspelt options', (url) => {
  const prefix = `${uniqueName('misspelt')}:`;
  const resource = `misspelt-${randomUUID()}`;
  // Where a misspelt redisStore prefix would have fallen back to.
  const defaults = [`leasehold:{${resource}}:value`, `leasehold:{${resource}}:fence`];
  let redis: Redis;
  beforeAll(async () => {
    redis = redisClient(url);
    await redis.connect();
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.del(...defaults);
    await redis.quit();
  });
  const landed = async () => [
    ...(await redis.keys(`${prefix}*`)),
    ...(await Promise.all(defaults.map(async (k) => ((await redis.exists(k)) ? k : [])))).flat(),
  ];

  it('every fenced call refuses a misspelt option; no key lands', async () => {
    const fenceKey = `${prefix}{job}:fence`;
    const cases: [() => unknown, string][] = [
      [
        () => redisStore(redis, { prefx: prefix } as never),
        leftOut('options', 'prefx', 'prefix', 'string'),
      ],
      [
        () =>
          redisStore(redis, { prefix }).write({ resource, token: 5n, value: 'v', ttl: 5 } as never),
        leftOut('write', 'ttl', 'resource, token, value', 'number'),
      ],
      [
        () =>
          fencedSet(redis, {
            fenceKey,
            token: 5n,
            key: `${prefix}{job}`,
            value: 'v',
            ttl: 5,
          } as never),
        leftOut('write', 'ttl', 'fenceKey, token, key, value', 'number'),
      ],
      [
        () =>
          fencedExec(redis, {
            fenceKey,
            token: 5n,
            commands: [['SET', `${prefix}{job}`, 'v']],
            resouce: 'job',
          } as never),
        leftOut('exec', 'resouce', 'fenceKey, token, commands, resource', 'string'),
      ],
    ];
    for (const [call, message] of cases) {
      expect(await refusal(call)).toEqual({ class: true, message });
    }
    expect(await landed()).toEqual([]);
  });

  it('spelt right, with every option, keys land under the prefix given', async () => {
    const store = redisStore(redis, { prefix });
    await store.write({ resource, token: 5n, value: 'v' });
    expect(await store.read(resource)).toEqual({ value: 'v', token: 5n });
    const fenceKey = `${prefix}{job}:fence`;
    await fencedExec(redis, {
      fenceKey,
      token: 5n,
      commands: [['SET', `${prefix}{job}`, 'v']],
      resource: 'job',
    });
    const stale = await fencedExec(redis, {
      fenceKey,
      token: 4n,
      commands: [['SET', `${prefix}{job}`, 'late']],
      resource: 'job',
    }).catch((err: unknown) => err);
    expect(stale).toSatisfy(isStaleTokenError);
    expect((stale as StaleTokenError).resource).toBe('job');
    expect((await landed()).sort()).toEqual(
      [
        `${prefix}{${resource}}:value`,
        `${prefix}{${resource}}:fence`,
        fenceKey,
        `${prefix}{job}`,
      ].sort(),
    );
  });
});

describe('fence SQLite (a file): misspelt options', () => {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-fence-misspelt-'));
  const db = openSqlite(join(dir, 'fence.db'));
  db.exec(sqlite.fenceTableDDL());
  db.exec(sqlite.fenceTableDDL({ table: 'fences' }));
  for (const valueTable of [undefined, 'vals']) {
    for (const ddl of sqlite.sqliteStoreDDL({ valueTable })) db.exec(ddl);
  }
  db.exec(
    'CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER, fence INTEGER, version INTEGER)',
  );
  afterAll(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const count = () =>
    Object.fromEntries(
      ['leasehold_fence', 'fences', 'leasehold_value', 'vals', 'accounts'].map((t) => [
        t,
        (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n,
      ]),
    );

  it('every fenced call refuses a misspelt option; no row lands', async () => {
    const cases: [() => unknown, string][] = [
      [
        () =>
          sqlite.withFence(db, { resource: 'job', token: 5n, fenceTabel: 'fences' } as never, () =>
            db.exec(`INSERT INTO vals VALUES ('job', 'x', 5)`),
          ),
        leftOut('options', 'fenceTabel', 'resource, token, table', 'string'),
      ],
      [
        () =>
          sqlite.upsertFencedRow(db, {
            table: 'accounts',
            key: { id: 'a' },
            values: { balance: 1 },
            token: 5n,
            fenceColum: 'version',
          } as never),
        leftOut(
          'write',
          'fenceColum',
          'table, key, values, token, fenceColumn, resource',
          'string',
        ),
      ],
      [
        () => sqlite.sqliteStore(db, { via: 'fence-table', fenceTabel: 'fences' } as never),
        leftOut('options', 'fenceTabel', 'valueTable, via, fenceTable', 'string'),
      ],
      [
        () =>
          sqlite
            .sqliteStore(db, { valueTable: 'vals' })
            .write({ resource: 'job', token: 5n, value: 'x', vaule: 'y' } as never),
        leftOut('write', 'vaule', 'resource, token, value', 'string'),
      ],
    ];
    for (const [call, message] of cases) {
      expect(await refusal(call)).toEqual({ class: true, message });
    }
    expect(count()).toEqual({
      leasehold_fence: 0,
      fences: 0,
      leasehold_value: 0,
      vals: 0,
      accounts: 0,
    });
  });

  it('spelt right, with every option, each call writes to the tables and column given', async () => {
    sqlite.withFence(db, { resource: 'tx', token: 5n, table: 'fences' }, () =>
      db.exec(`INSERT INTO vals VALUES ('tx', 'x', 5)`),
    );
    sqlite.upsertFencedRow(db, {
      table: 'accounts',
      key: { id: 'a' },
      values: { balance: 1 },
      token: 7n,
      fenceColumn: 'version',
      resource: 'account a',
    });
    const store = sqlite.sqliteStore(db, {
      valueTable: 'vals',
      via: 'fence-table',
      fenceTable: 'fences',
    });
    await store.write({ resource: 'store', token: 8n, value: 'z' });
    expect(count()).toEqual({
      leasehold_fence: 0,
      fences: 2,
      leasehold_value: 0,
      vals: 2,
      accounts: 1,
    });
    expect(db.prepare('SELECT fence, version FROM accounts').get()).toEqual({
      fence: null,
      version: 7,
    });
  });
});
