import { TcpFaultProxy } from '@leasehold/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadlineIn, etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

// etcd3 talks HTTP/2 through the proxy to the run's shared etcd.
describe('TcpFaultProxy in front of etcd', () => {
  let proxy: TcpFaultProxy;
  let client: ReturnType<typeof etcdClient>;
  const key = `${uniquePrefix('fault-proxy')}k`;
  const get = (ms = 1000) => client.get(key).options(deadlineIn(ms)).string();

  beforeAll(async () => {
    proxy = await TcpFaultProxy.start({ target: sharedEndpoints()[0]! });
    client = etcdClient(proxy.url);
    await client.put(key).value('v');
  });

  afterAll(async () => {
    client.close();
    await proxy.close();
  });

  it('pass: calls go through', async () => {
    expect(proxy.mode).toBe('pass');
    expect(await get()).toBe('v');
  });

  it('stall: a call with a short deadline fails; after healing calls work again', async () => {
    proxy.setMode('stall');
    await expect(get(300)).rejects.toThrow();
    proxy.setMode('pass');
    const healed = performance.now();
    expect(await waitFor(() => get(), { what: 'get after heal' })).toBe('v');
    console.log(
      `[leasehold] etcd3 recovered ${Math.round(performance.now() - healed)} ms after stall healed`,
    );
  });

  it('delay: calls still succeed, later', async () => {
    proxy.setMode('delay', { delayMs: 100 });
    try {
      const t0 = performance.now();
      expect(await get(5000)).toBe('v');
      // Request and response each wait at least delayMs.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    } finally {
      proxy.setMode('pass');
    }
  });

  it('reset: calls fail with connection errors, then recover once traffic passes', async () => {
    expect(await get()).toBe('v');
    proxy.setMode('reset');
    await expect(get(2000)).rejects.toThrow();
    expect(proxy.connectionCount).toBe(0);
    proxy.setMode('pass');
    const healed = performance.now();
    expect(await waitFor(() => get(), { what: 'get after reset ends' })).toBe('v');
    console.log(
      `[leasehold] etcd3 recovered ${Math.round(performance.now() - healed)} ms after resets stopped`,
    );
  });
});
