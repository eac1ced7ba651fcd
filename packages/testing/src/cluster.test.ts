import { describe, expect, it } from 'vitest';
import { makeCluster } from './cluster.js';

function parts() {
  const events: string[] = [];
  let finishRestore = () => {};
  const cluster = makeCluster({
    provider: 'binary',
    endpoints: ['http://127.0.0.1:1'],
    members: [],
    dispose: async () => {
      events.push('dispose');
    },
    restore: (path, clusterToken) => {
      events.push(
        clusterToken === undefined ? `restore ${path}` : `restore ${path} as ${clusterToken}`,
      );
      return new Promise<void>((resolve) => {
        finishRestore = () => {
          events.push('restored');
          resolve();
        };
      });
    },
  });
  return { cluster, events, finishRestore: () => finishRestore() };
}

describe('makeCluster', () => {
  it('close is idempotent: every caller gets the same promise, dispose runs once', async () => {
    const { cluster, events } = parts();
    const first = cluster.close();
    expect(cluster.close()).toBe(first);
    await cluster[Symbol.asyncDispose]();
    await first;
    expect(events).toEqual(['dispose']);
  });

  it('close waits for a running restore; restores overlap with neither each other nor close', async () => {
    const { cluster, events, finishRestore } = parts();
    const restoring = cluster.restore('/s.db');
    await expect(cluster.restore('/t.db')).rejects.toMatchObject({
      code: 'ETCD_INVALID_OPTION',
      message: expect.stringMatching(/another restore/) as unknown,
    });
    const closing = cluster.close();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(events).toEqual(['restore /s.db']);
    finishRestore();
    await Promise.all([restoring, closing]);
    expect(events).toEqual(['restore /s.db', 'restored', 'dispose']);
    await expect(cluster.restore('/s.db')).rejects.toThrow(/the cluster is closed/);
  });

  it('passes a new cluster token to the provider, and refuses a bad one before anything runs', async () => {
    const { cluster, events, finishRestore } = parts();
    for (const bad of ['', 'has space', 'a,b', 'x'.repeat(65), 42]) {
      await expect(cluster.restore('/s.db', { clusterToken: bad as string })).rejects.toMatchObject(
        {
          code: 'ETCD_INVALID_OPTION',
          message: expect.stringMatching(/clusterToken must be 1 to 64 letters/) as unknown,
        },
      );
    }
    await expect(cluster.restore('/s.db', null as never)).rejects.toThrow(/must be an object/);
    for (const bad of [['rebuilt-1'], 'rebuilt-1', 7]) {
      await expect(cluster.restore('/s.db', bad as never)).rejects.toMatchObject({
        code: 'ETCD_INVALID_OPTION',
        message: expect.stringMatching(/^restore options must be an object/) as unknown,
      });
    }
    // Misspelt, the token would be dropped and the rebuilt cluster keep the old identity.
    await expect(cluster.restore('/s.db', { clustrToken: 'x' } as never)).rejects.toMatchObject({
      code: 'ETCD_INVALID_OPTION',
      message:
        'restore options.clustrToken must be left out (not an option; allowed: clusterToken), got string',
    });
    expect(events).toEqual([]);
    const restoring = cluster.restore('/s.db', { clusterToken: 'rebuilt-1' });
    finishRestore();
    await restoring;
    expect(events).toEqual(['restore /s.db as rebuilt-1', 'restored']);
  });
});
