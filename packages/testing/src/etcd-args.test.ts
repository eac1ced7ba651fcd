import { describe, expect, it } from 'vitest';
import {
  buildEtcdArgs,
  buildRestoreArgs,
  clientUrlOf,
  controlUrlOf,
  memberName,
  type MemberSpec,
} from './etcd-args.js';

function flags(args: string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) map.set(args[i]!, args[i + 1]!);
  return map;
}

describe('buildEtcdArgs', () => {
  const specs: MemberSpec[] = [0, 1, 2].map((i) => ({
    name: memberName(i),
    clientPort: 40000 + i,
    peerPort: 41000 + i,
    dataDir: `/d/${memberName(i)}`,
  }));

  it('puts every URL on loopback with the harness-chosen ports', () => {
    const f = flags(buildEtcdArgs(specs[1]!, specs, 'tok'));
    expect(f.get('--name')).toBe('etcd2');
    expect(f.get('--data-dir')).toBe('/d/etcd2');
    expect(f.get('--listen-client-urls')).toBe('http://127.0.0.1:40001');
    expect(f.get('--advertise-client-urls')).toBe('http://127.0.0.1:40001');
    expect(f.get('--listen-peer-urls')).toBe('http://127.0.0.1:41001');
    expect(f.get('--initial-advertise-peer-urls')).toBe('http://127.0.0.1:41001');
    expect(clientUrlOf(specs[1]!)).toBe('http://127.0.0.1:40001');
  });

  it('lists all peers in --initial-cluster and uses etcd default timings', () => {
    const f = flags(buildEtcdArgs(specs[0]!, specs, 'tok'));
    expect(f.get('--initial-cluster')).toBe(
      'etcd1=http://127.0.0.1:41000,etcd2=http://127.0.0.1:41001,etcd3=http://127.0.0.1:41002',
    );
    expect(f.get('--initial-cluster-state')).toBe('new');
    expect(f.get('--initial-cluster-token')).toBe('tok');
    expect(f.get('--heartbeat-interval')).toBe('100');
    expect(f.get('--election-timeout')).toBe('1000');
  });

  it('has an even number of args (flag, value pairs only)', () => {
    expect(buildEtcdArgs(specs[0]!, [specs[0]!], 't').length % 2).toBe(0);
  });
});

describe('buildEtcdArgs with TLS and auth', () => {
  const spec: MemberSpec = { name: 'etcd1', clientPort: 40000, peerPort: 41000, dataDir: '/d' };
  const tlsSpec: MemberSpec = { ...spec, controlPort: 42000 };

  it('serves clients over https and the harness over a plaintext control port', () => {
    expect(clientUrlOf(tlsSpec)).toBe('https://127.0.0.1:40000');
    expect(controlUrlOf(tlsSpec)).toBe('http://127.0.0.1:42000');
    expect(controlUrlOf(spec)).toBe('http://127.0.0.1:40000');
    const args = buildEtcdArgs(tlsSpec, [tlsSpec], 't', {
      tls: { certFile: '/c/server.crt', keyFile: '/c/server.key' },
    });
    const f = flags(args);
    expect(f.get('--listen-client-urls')).toBe('https://127.0.0.1:40000,http://127.0.0.1:42000');
    expect(f.get('--advertise-client-urls')).toBe('https://127.0.0.1:40000');
    expect(f.get('--cert-file')).toBe('/c/server.crt');
    expect(f.get('--key-file')).toBe('/c/server.key');
    expect(args).not.toContain('--client-cert-auth=true');
    // Peers stay plaintext: only client traffic is under test.
    expect(f.get('--listen-peer-urls')).toBe('http://127.0.0.1:41000');
  });

  it('requires client certificates from the given CA for mutual TLS', () => {
    const args = buildEtcdArgs(tlsSpec, [tlsSpec], 't', {
      tls: { certFile: 'c', keyFile: 'k', clientCaFile: '/c/ca.crt' },
    });
    // Go's flag syntax: a boolean flag's value joined with `=`, never a separate argument.
    expect(args).toContain('--client-cert-auth=true');
    const rest = args.filter((a) => a !== '--client-cert-auth=true');
    expect(flags(rest).get('--trusted-ca-file')).toBe('/c/ca.crt');
  });

  it('sets the simple token TTL only when asked', () => {
    expect(buildEtcdArgs(spec, [spec], 't', { auth: {} })).not.toContain('--auth-token-ttl');
    const f = flags(buildEtcdArgs(spec, [spec], 't', { auth: { tokenTtlSeconds: 2 } }));
    expect(f.get('--auth-token')).toBe('simple');
    expect(f.get('--auth-token-ttl')).toBe('2');
  });
});

describe('buildRestoreArgs', () => {
  const specs: MemberSpec[] = [0, 1, 2].map((i) => ({
    name: memberName(i),
    clientPort: 40000 + i,
    peerPort: 41000 + i,
    dataDir: `/d/${memberName(i)}`,
  }));

  it('restores with exactly the settings the member was started with', () => {
    const args = buildRestoreArgs('/s/snap.db', specs[2]!, specs, 'tok', '/d/etcd3.restore');
    expect(args.slice(0, 3)).toEqual(['snapshot', 'restore', '/s/snap.db']);
    const restore = flags(args.slice(3));
    const start = flags(buildEtcdArgs(specs[2]!, specs, 'tok'));
    for (const flag of [
      '--name',
      '--initial-cluster',
      '--initial-cluster-token',
      '--initial-advertise-peer-urls',
    ]) {
      expect(restore.get(flag), flag).toBe(start.get(flag));
    }
    expect(restore.get('--data-dir')).toBe('/d/etcd3.restore');
    expect(restore.size).toBe(5);
  });
});
