import { describe, expect, it } from 'vitest';
import {
  electionsSection,
  locksSection,
  queues,
  renderQueues,
  reportJson,
  type Queue,
} from './inspect.js';
import type { Entry } from './read.js';

const entry = (key: string, token: bigint, value = '', leaseId = 1n): Entry => ({
  key,
  value,
  token,
  leaseId,
});

describe('queues', () => {
  const entries = [
    entry('/l/b/2', 9n),
    entry('/l/b/1', 4n),
    entry('/l/a%2Fx/3', 6n),
    entry('/l/a/1', 5n),
    entry('/l/not-a-queue-key', 1n),
  ];

  it('groups keys by decoded name, names in order, each queue by create revision', () => {
    const grouped = queues('/l/', entries);
    expect([...grouped.keys()]).toEqual(['a', 'a/x', 'b']);
    expect(grouped.get('b')!.map((e) => e.token)).toEqual([4n, 9n]);
  });

  it('filters by name prefix (--prefix)', () => {
    expect([...queues('/l/', entries, 'a').keys()]).toEqual(['a', 'a/x']);
    expect([...queues('/l/', entries, 'a/').keys()]).toEqual(['a/x']);
  });
});

const deploy: Queue = {
  name: 'deploy',
  first: { key: '/l/deploy/ab', value: 'web-3:4711', token: 812n, leaseId: 'ab', ttlSeconds: 7 },
  behind: [
    { key: '/l/deploy/cd', value: '', token: 815n, leaseId: 'cd', ttlSeconds: -1 },
    { key: '/l/deploy/0', value: 'x', token: 820n, leaseId: '0', ttlSeconds: null },
  ],
};

describe('the table', () => {
  it('lists holders with waiters in order under them', () => {
    expect(renderQueues('LOCKS', '/l/', 'HOLDER', [deploy])).toEqual([
      'LOCKS under /l/',
      'NAME    HOLDER        TOKEN  LEASE  TTL      WAITING',
      'deploy  "web-3:4711"  812    ab     7s       2',
      '  #1    (no value)    815    cd     expired',
      '  #2    "x"           820    0      none',
    ]);
  });
  it('says when there is nothing', () => {
    expect(renderQueues('ELECTIONS', '/e/', 'LEADER', [])).toEqual(['ELECTIONS: none under /e/']);
    // With --prefix, "none" is about that filter: other names may be under the key prefix.
    expect(renderQueues('LOCKS', '/l/', 'HOLDER', [], 'deploy/')).toEqual([
      'LOCKS: none whose name starts with "deploy/" under /l/',
    ]);
  });
});

describe('the JSON report', () => {
  it('has holders with waiters, leaders with candidates; tokens as decimal strings', () => {
    const data = new Map([
      [locksSection, { prefix: '/l/', list: [deploy] }],
      [electionsSection, { prefix: '/e/', list: [{ ...deploy, name: 'sched' }] }],
    ]) as Map<never, unknown>;
    const doc = JSON.parse(
      reportJson({ lockPrefix: '/l/', electionPrefix: '/e/' }, new Date(0), data),
    ) as Record<string, unknown>;
    expect(doc).toEqual({
      time: '1970-01-01T00:00:00.000Z',
      lockPrefix: '/l/',
      electionPrefix: '/e/',
      cronPrefix: '/leasehold/cron/',
      locks: [
        {
          name: 'deploy',
          holder: {
            key: '/l/deploy/ab',
            value: 'web-3:4711',
            token: '812',
            leaseId: 'ab',
            ttlSeconds: 7,
          },
          waiters: [
            { key: '/l/deploy/cd', value: '', token: '815', leaseId: 'cd', ttlSeconds: -1 },
            { key: '/l/deploy/0', value: 'x', token: '820', leaseId: '0', ttlSeconds: null },
          ],
        },
      ],
      elections: [
        {
          name: 'sched',
          leader: {
            key: '/l/deploy/ab',
            value: 'web-3:4711',
            token: '812',
            leaseId: 'ab',
            ttlSeconds: 7,
          },
          candidates: [
            { key: '/l/deploy/cd', value: '', token: '815', leaseId: 'cd', ttlSeconds: -1 },
            { key: '/l/deploy/0', value: 'x', token: '820', leaseId: '0', ttlSeconds: null },
          ],
        },
      ],
    });
  });
});
