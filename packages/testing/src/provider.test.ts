import { describe, expect, it } from 'vitest';
import { isEtcdHarnessError } from './errors.js';
import { binaryHint, selectProvider, type ProviderProbes } from './provider.js';

function probes(facts: { endpoints?: string[]; engine?: boolean; binary?: boolean }) {
  const calls: string[] = [];
  const p: ProviderProbes = {
    endpoints: () => {
      calls.push('endpoints');
      return facts.endpoints ?? [];
    },
    engine: async () => {
      calls.push('engine');
      return facts.engine ? { dockerHost: 'unix:///x.sock' } : undefined;
    },
    binary: async () => {
      calls.push('binary');
      return facts.binary ? '/usr/bin/etcd' : undefined;
    },
  };
  return { p, calls };
}

describe('selectProvider', () => {
  it("'auto' prefers ETCD_ENDPOINTS, then an engine, then a binary, probing lazily", async () => {
    const all = probes({ endpoints: ['http://e:1'], engine: true, binary: true });
    expect(await selectProvider('auto', all.p)).toBe('external');
    expect(all.calls).toEqual(['endpoints']);

    const noEndpoints = probes({ engine: true, binary: true });
    expect(await selectProvider('auto', noEndpoints.p)).toBe('container');
    expect(noEndpoints.calls).toEqual(['endpoints', 'engine']);

    expect(await selectProvider('auto', probes({ binary: true }).p)).toBe('binary');
  });

  it("'auto' with nothing available explains every way to get etcd", async () => {
    const error: unknown = await selectProvider('auto', probes({}).p).catch((e: unknown) => e);
    expect(isEtcdHarnessError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'ETCD_UNAVAILABLE' });
    const message = (error as Error).message;
    expect(message).toMatch(/ETCD_ENDPOINTS/);
    expect(message).toMatch(/apt-get install etcd-server/);
    expect(message).toMatch(/podman system service/);
  });

  it('an explicit provider is checked, never replaced by another one', async () => {
    const everything = probes({ endpoints: ['http://e:1'], engine: true, binary: true }).p;
    expect(await selectProvider('binary', everything)).toBe('binary');
    expect(await selectProvider('container', everything)).toBe('container');
    await expect(selectProvider('container', probes({ binary: true }).p)).rejects.toThrow(
      /provider 'container' needs a container engine/,
    );
    await expect(selectProvider('binary', probes({ engine: true }).p)).rejects.toThrow(
      /apt-get install etcd-server/,
    );
    await expect(selectProvider('external', probes({ binary: true }).p)).rejects.toThrow(
      /ETCD_ENDPOINTS/,
    );
  });
});

describe('binaryHint', () => {
  it('names the binary that was looked for', async () => {
    await expect(selectProvider('binary', probes({}).p, binaryHint('/opt/etcd'))).rejects.toThrow(
      /"\/opt\/etcd" \(from the binary option or ETCD_BIN\)/,
    );
    expect(binaryHint(undefined)).toMatch(/not on PATH/);
  });
});
