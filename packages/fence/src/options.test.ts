import type { Leasehold } from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { describeFenceConformance } from './conformance.js';
import { isInvalidArgumentError } from './errors.js';
import { etcdStore } from './etcd.js';
import * as postgres from './postgres.js';
import { redisStore } from './redis.js';
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
