import { describe, expect, it } from 'vitest';
import {
  buildEtcdArgs,
  buildRestoreArgs,
  clientUrlOf,
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
