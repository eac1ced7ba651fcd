import { describe, expect, it } from 'vitest';
import { DEFAULT_ETCD_IMAGE, parseEndpoints, resolveOptions } from './options.js';
import type { EtcdAuthOptions, EtcdTlsOptions, StartEtcdOptions } from './types.js';

describe('resolveOptions', () => {
  it('applies built-in defaults with an empty env', () => {
    const r = resolveOptions({}, {});
    expect(r).toMatchObject({
      members: 1,
      provider: 'auto',
      image: DEFAULT_ETCD_IMAGE,
      binary: undefined,
      startupTimeoutMs: 30_000,
    });
    expect(DEFAULT_ETCD_IMAGE).toBe('quay.io/coreos/etcd:v3.4.23');
  });

  it('takes env defaults, and options win over env', () => {
    const env = {
      LEASEHOLD_ETCD_PROVIDER: 'binary',
      LEASEHOLD_ETCD_IMAGE: 'localhost/etcd:3.4',
      ETCD_BIN: '/opt/etcd',
    };
    expect(resolveOptions({}, env)).toMatchObject({
      provider: 'binary',
      image: 'localhost/etcd:3.4',
      binary: '/opt/etcd',
    });
    expect(
      resolveOptions({ provider: 'container', image: 'x:1', binary: '/b', members: 3 }, env),
    ).toMatchObject({ provider: 'container', image: 'x:1', binary: '/b', members: 3 });
  });

  it("accepts 'local', from the option and from LEASEHOLD_ETCD_PROVIDER", () => {
    expect(resolveOptions({ provider: 'local' }, {}).provider).toBe('local');
    expect(resolveOptions({}, { LEASEHOLD_ETCD_PROVIDER: 'local' }).provider).toBe('local');
  });

  it('treats blank env values as unset', () => {
    expect(resolveOptions({}, { LEASEHOLD_ETCD_PROVIDER: ' ', ETCD_BIN: '' })).toMatchObject({
      provider: 'auto',
      binary: undefined,
    });
  });

  it('rejects invalid values with a message naming what is allowed', () => {
    expect(() => resolveOptions({ members: 2 as 1 }, {})).toThrow(/members must be 1 or 3, got 2/);
    expect(() => resolveOptions({}, { LEASEHOLD_ETCD_PROVIDER: 'docker' })).toThrow(
      /provider must be one of external, container, binary, auto, local, got "docker" \(from LEASEHOLD_ETCD_PROVIDER\)/,
    );
    expect(() => resolveOptions({ startupTimeoutMs: 0 }, {})).toThrow(/startupTimeoutMs/);
  });

  it('takes every documented option, and every key of tls and auth, spelt right', () => {
    const signal = new AbortController().signal;
    const log = () => {};
    const options: Required<StartEtcdOptions> = {
      members: 3,
      provider: 'local',
      image: 'etcd:test',
      binary: '/usr/bin/etcd',
      startupTimeoutMs: 1_000,
      signal,
      log,
      tls: {
        certFile: 'c.pem',
        keyFile: 'k.pem',
        clientCaFile: 'ca.pem',
      } satisfies Required<EtcdTlsOptions>,
      auth: { rootPassword: 'p', tokenTtlSeconds: 60 } satisfies Required<EtcdAuthOptions>,
    };
    expect(resolveOptions(options, {})).toEqual({ ...options, provider: 'local' });
  });

  it('refuses a misspelt option instead of starting a cluster other than the one asked for', () => {
    expect(() => resolveOptions({ membrs: 3 } as never, {})).toThrow(
      /^options\.membrs must be left out \(not an option; allowed: members, provider, .*\), got number$/,
    );
    expect(() => resolveOptions({ members: { n: 3 } } as never, {})).toThrow(
      /^members must be 1 or 3, got \{"n":3\}$/,
    );
  });

  it('refuses options that are not an object instead of starting with the defaults', () => {
    for (const bad of ['3', 3, null, [3]]) {
      expect(() => resolveOptions(bad as never, {})).toThrow(
        /^startEtcd options must be an object such as \{ members: 3 \}, got /,
      );
    }
  });
});

describe('parseEndpoints', () => {
  it('splits, trims, drops empties and adds http:// where missing', () => {
    expect(parseEndpoints(undefined)).toEqual([]);
    expect(parseEndpoints(' , ')).toEqual([]);
    expect(parseEndpoints('127.0.0.1:2379, http://h:1,https://s:2')).toEqual([
      'http://127.0.0.1:2379',
      'http://h:1',
      'https://s:2',
    ]);
  });
});

describe('resolveOptions: tls and auth', () => {
  const tls = { certFile: '/c/server.crt', keyFile: '/c/server.key' };

  it('passes them through, and has none by default', () => {
    expect(resolveOptions({}, {})).toMatchObject({ tls: undefined, auth: undefined });
    const r = resolveOptions({ provider: 'binary', tls, auth: { rootPassword: 'p' } }, {});
    expect(r.tls).toEqual(tls);
    expect(r.auth).toEqual({ rootPassword: 'p' });
  });

  it("needs a cluster of the test's own: 'auto' becomes 'local', 'external' is refused", () => {
    const env = { ETCD_ENDPOINTS: 'http://127.0.0.1:2379' };
    expect(resolveOptions({ tls }, env).provider).toBe('local');
    expect(resolveOptions({ auth: { rootPassword: 'p' } }, env).provider).toBe('local');
    expect(() => resolveOptions({ provider: 'external', tls }, env)).toThrow(
      /tls needs an etcd the harness starts itself.*provider 'local'/,
    );
    expect(() =>
      resolveOptions({ auth: { rootPassword: 'p' } }, { LEASEHOLD_ETCD_PROVIDER: 'external' }),
    ).toThrow(/auth .*\(from LEASEHOLD_ETCD_PROVIDER\)/);
  });

  it('rejects malformed values with ETCD_INVALID_OPTION', () => {
    const bad: StartEtcdOptions[] = [
      { tls: { certFile: '', keyFile: 'k' } },
      { tls: { certFile: 'c' } as never },
      { tls: { certFile: 'c', keyFile: 'k', clientCaFile: '' } },
      { auth: { rootPassword: '' } },
      { auth: { rootPassword: 'p', tokenTtlSeconds: 0 } },
      { auth: { rootPassword: 'p', tokenTtlSeconds: 1.5 } },
    ];
    for (const options of bad) {
      expect(() => resolveOptions(options, {}), JSON.stringify(options)).toThrow(
        expect.objectContaining({ code: 'ETCD_INVALID_OPTION' }),
      );
    }
  });

  it('never repeats the root password in an error, also when its key is misspelt', () => {
    const options = { auth: { rootPassword: 'sekrit', tokenTtlSeconds: -1 } };
    expect(() => resolveOptions(options, {})).toThrow(/auth must be/);
    expect(() => resolveOptions(options, {})).not.toThrow(/sekrit/);
    const misspelt = { auth: { rootPasword: 'sekrit' } as never };
    expect(() => resolveOptions(misspelt, {})).toThrow(/got an object with rootPasword$/);
    expect(() => resolveOptions(misspelt, {})).not.toThrow(/sekrit/);
    const extra = { auth: { rootPassword: 'p', tokenTTL: 'sekrit' } as never };
    expect(() => resolveOptions(extra, {})).toThrow(
      /^auth\.tokenTTL must be left out \(not an option; allowed: rootPassword, tokenTtlSeconds\), got string$/,
    );
    expect(() =>
      resolveOptions({ tls: { certFile: 'c', keyFile: 'k', caFile: 'x' } as never }, {}),
    ).toThrow(/^tls\.caFile must be left out/);
  });
});
