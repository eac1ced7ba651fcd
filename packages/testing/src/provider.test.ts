import { describe, expect, it } from 'vitest';
import { EtcdHarnessError, isEtcdHarnessError } from './errors.js';
import { binaryHint, selectProvider, type ProviderProbes } from './provider.js';
import { missingTestcontainers } from './testcontainers-loader.js';

/** What the loader rejects with when testcontainers is installed but throws on import. */
const importCause = new TypeError("Cannot read properties of undefined (reading 'bind')");
const importFailure = new EtcdHarnessError(
  'ETCD_UNAVAILABLE',
  missingTestcontainers("provider 'container'", `TypeError: ${importCause.message}`),
  { cause: importCause },
);

interface Facts {
  endpoints?: string[];
  engine?: boolean;
  testcontainers?: boolean;
  binary?: boolean;
}

/** Probes that answer from `facts` and record which ones ran, in order. */
function probes(facts: Facts) {
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
    testcontainers: async () => {
      calls.push('testcontainers');
      return (facts.testcontainers ?? true) ? undefined : importFailure;
    },
    binary: async () => {
      calls.push('binary');
      return facts.binary ? '/usr/bin/etcd' : undefined;
    },
  };
  return { p, calls };
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isEtcdHarnessError(error)).toBe(true);
  expect(error).toMatchObject({ code: 'ETCD_UNAVAILABLE' });
  return error as Error;
}

describe('selectProvider', () => {
  it("'auto' prefers ETCD_ENDPOINTS, then an engine, then a binary, probing lazily", async () => {
    const all = probes({ endpoints: ['http://e:1'], engine: true, binary: true });
    expect(await selectProvider('auto', all.p)).toBe('external');
    expect(all.calls).toEqual(['endpoints']);

    const noEndpoints = probes({ engine: true, binary: true });
    expect(await selectProvider('auto', noEndpoints.p)).toBe('container');
    expect(noEndpoints.calls).toEqual(['endpoints', 'engine', 'testcontainers']);

    const noEngine = probes({ binary: true });
    expect(await selectProvider('auto', noEngine.p)).toBe('binary');
    // Without an engine, testcontainers is not even imported.
    expect(noEngine.calls).toEqual(['endpoints', 'engine', 'binary']);
  });

  it("'auto' falls back to the binary when an engine answers but testcontainers cannot be imported, and says why", async () => {
    const { p, calls } = probes({ engine: true, testcontainers: false, binary: true });
    const notes: string[] = [];
    expect(await selectProvider('auto', p, undefined, (line) => notes.push(line))).toBe('binary');
    expect(calls).toEqual(['endpoints', 'engine', 'testcontainers', 'binary']);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(/provider 'auto' uses the etcd binary: a container engine answered/);
    expect(notes[0]).toContain("TypeError: Cannot read properties of undefined (reading 'bind')");
  });

  it('an available container provider is chosen without a note', async () => {
    const notes: string[] = [];
    const { p } = probes({ engine: true, binary: true });
    expect(await selectProvider('local', p, undefined, (line) => notes.push(line))).toBe(
      'container',
    );
    expect(notes).toEqual([]);
  });

  it("'auto' with nothing available explains every way to get etcd", async () => {
    const message = (await failure(selectProvider('auto', probes({}).p))).message;
    expect(message).toMatch(/ETCD_ENDPOINTS/);
    expect(message).toMatch(/apt-get install etcd-server/);
    expect(message).toMatch(/podman system service/);
    expect(message).toMatch(/no container engine answered/);
  });

  it("'auto' says so when an engine answered but testcontainers is missing and there is no binary", async () => {
    const { message } = await failure(
      selectProvider('auto', probes({ engine: true, testcontainers: false }).p),
    );
    expect(message).toMatch(
      /a container engine answered, but .*testcontainers .*cannot be imported/,
    );
    expect(message).toContain("TypeError: Cannot read properties of undefined (reading 'bind')");
    expect(message).toMatch(/installed but throws on import/);
  });

  it("'local' never picks 'external', even with ETCD_ENDPOINTS set", async () => {
    const everything = probes({ endpoints: ['http://e:1'], engine: true, binary: true });
    expect(await selectProvider('local', everything.p)).toBe('container');
    expect(everything.calls).toEqual(['engine', 'testcontainers']);

    const binaryOnly = probes({ endpoints: ['http://e:1'], binary: true });
    expect(await selectProvider('local', binaryOnly.p)).toBe('binary');

    const noTestcontainers = probes({ engine: true, testcontainers: false, binary: true });
    expect(await selectProvider('local', noTestcontainers.p)).toBe('binary');
  });

  it("'local' with neither an engine nor a binary fails without suggesting ETCD_ENDPOINTS", async () => {
    const { message } = await failure(
      selectProvider('local', probes({ endpoints: ['http://e:1'] }).p),
    );
    expect(message).toMatch(/provider 'local' starts etcd itself \(ETCD_ENDPOINTS is not used\)/);
    expect(message).toMatch(/apt-get install etcd-server/);
    expect(message).toMatch(/podman system service/);
    expect(message).not.toMatch(/set ETCD_ENDPOINTS/);
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

  it("explicit 'container' whose testcontainers fails to import rethrows the import error, cause kept", async () => {
    const error = await failure(
      selectProvider('container', probes({ engine: true, testcontainers: false, binary: true }).p),
    );
    expect(error.cause).toBe(importCause);
    expect(error.message).toMatch(
      /provider 'container' needs the optional peer dependency testcontainers/,
    );
    expect(error.message).toContain("reading 'bind'");
    expect(error.message).toMatch(/pnpm add -D testcontainers@12\.0\.1/);
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
