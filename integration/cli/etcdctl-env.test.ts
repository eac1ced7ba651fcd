/**
 * Where `leasehold` takes its connection from, against real etcd: flags before or after the
 * command's name, and the `ETCDCTL_*` variables etcdctl users already set, read as etcdctl reads
 * them (checked by running etcdctl itself with the same environment).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freePort, resolveEtcdProvider, startEtcd, type EtcdCluster } from '@leasehold/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTestCerts, type TestCerts } from '../setup/certs.js';
import { sharedEndpoints, uniquePrefix } from '../setup/etcd.js';
import { child, cleanUpAfter, Probe, runCli } from './harness.js';

const endpoints = sharedEndpoints();

/** leasehold's own variables, removed so that only what a test sets is read. */
const NONE_OF_OURS = {
  ETCD_ENDPOINTS: undefined,
  ETCD_CACERT: undefined,
  ETCD_CERT: undefined,
  ETCD_CERT_KEY: undefined,
  ETCD_USERNAME: undefined,
  ETCD_PASSWORD: undefined,
  ETCD_PASSWORD_FILE: undefined,
  ETCDCTL_ENDPOINTS: undefined,
  ETCDCTL_CACERT: undefined,
  ETCDCTL_CERT: undefined,
  ETCDCTL_KEY: undefined,
  ETCDCTL_USER: undefined,
  ETCDCTL_PASSWORD: undefined,
  ETCDCTL_DIAL_TIMEOUT: undefined,
};

/** A port nothing listens on: an endpoint that must not be the one used. */
const refused = async () => `http://127.0.0.1:${await freePort()}`;

describe('connection flags before the command name', () => {
  it('leasehold --endpoints E --lock-prefix P run …: the lock is taken there', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-flags-first'));
    await using probe = await Probe.start();
    const global = ['--endpoints', endpoints.join(','), '--lock-prefix', prefix];
    const run = runCli([...global, 'run', '--lock', 'job', '--', ...child()], {
      ...NONE_OF_OURS,
      ...probe.env('c'),
    });
    const c = await probe.started('c');
    expect(c.start.key!.startsWith(`${prefix}job/`)).toBe(true);
    const inspect = await runCli([...global, 'inspect', '--json'], NONE_OF_OURS);
    expect(inspect.code).toBe(0);
    const report = JSON.parse(inspect.stdout) as { locks: { holder: { token: string } }[] };
    expect(report.locks.map((l) => l.holder.token)).toEqual([c.token.toString()]);
    c.exit(0);
    expect((await run).code).toBe(0);
  });

  it('a flag wins over ETCD_ENDPOINTS, which wins over ETCDCTL_ENDPOINTS', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-flags-order'));
    const args = ['inspect', '--json', '--lock-prefix', prefix, '--dial-timeout', '2000'];
    const [a, b] = [await refused(), await refused()];
    const real = endpoints.join(',');
    for (const [where, extra, env] of [
      ['flag', ['--endpoints', real], { ETCD_ENDPOINTS: a, ETCDCTL_ENDPOINTS: b }],
      ['flag first', [], { ETCD_ENDPOINTS: a, ETCDCTL_ENDPOINTS: b }],
      ['ETCD_ENDPOINTS', [], { ETCD_ENDPOINTS: real, ETCDCTL_ENDPOINTS: b }],
      ['ETCDCTL_ENDPOINTS', [], { ETCDCTL_ENDPOINTS: real }],
    ] as const) {
      const argv = where === 'flag first' ? ['--endpoints', real, ...args] : [...args, ...extra];
      const result = await runCli(argv, { ...NONE_OF_OURS, ...env });
      expect({ where, code: result.code, stderr: result.stderr }).toEqual({
        where,
        code: 0,
        stderr: '',
      });
    }
  });

  it("ETCDCTL_DIAL_TIMEOUT, in etcdctl's format, bounds the dial", async () => {
    const port = await refused();
    const { code, stderr } = await runCli(['inspect'], {
      ...NONE_OF_OURS,
      ETCDCTL_ENDPOINTS: port,
      ETCDCTL_DIAL_TIMEOUT: '700ms',
    });
    expect(code).toBe(69);
    expect(stderr).toMatch(
      /^leasehold: could not reach etcd at .* within 700 ms \(--dial-timeout\)/,
    );
  });
});

const binarySkip = await resolveEtcdProvider({ provider: 'binary' }).then(
  () => undefined,
  (err: unknown) => (err instanceof Error ? err.message : String(err)),
);

describe.skipIf(binarySkip !== undefined)(
  "etcdctl's variables against etcd with mutual TLS and a password",
  () => {
    let certs: TestCerts;
    let cluster: EtcdCluster;
    beforeAll(async () => {
      certs = await makeTestCerts();
      cluster = await startEtcd({
        provider: 'binary',
        tls: {
          certFile: certs.server.certFile,
          keyFile: certs.server.keyFile,
          clientCaFile: certs.ca.certFile,
        },
        auth: { rootPassword: 'root-secret' },
      });
    });
    afterAll(async () => {
      await cluster?.[Symbol.asyncDispose]();
      await certs?.[Symbol.asyncDispose]();
    });

    /** As an etcdctl user has them: host:port endpoints, TLS files, user:password. */
    const etcdctlEnv = (user: Record<string, string>) => ({
      ...NONE_OF_OURS,
      ETCDCTL_API: '3',
      ETCDCTL_ENDPOINTS: cluster.endpoints.map((e) => e.replace(/^https:\/\//, '')).join(','),
      ETCDCTL_CACERT: certs.ca.certFile,
      ETCDCTL_CERT: certs.client.certFile,
      ETCDCTL_KEY: certs.client.keyFile,
      ...user,
    });

    it.each([
      ['ETCDCTL_USER=root:password', { ETCDCTL_USER: 'root:root-secret' }],
      [
        'ETCDCTL_USER=root, ETCDCTL_PASSWORD',
        { ETCDCTL_USER: 'root', ETCDCTL_PASSWORD: 'root-secret' },
      ],
    ])('%s: etcdctl and leasehold both reach it', async (_, user) => {
      const prefix = uniquePrefix('cli-etcdctl-env');
      const env = etcdctlEnv(user);
      // etcdctl itself takes this environment (the control: these are etcdctl's semantics).
      const etcdctl = await promisify(execFile)('etcdctl', ['put', `${prefix}probe`, 'x'], {
        env: { PATH: process.env.PATH, ...env },
        timeout: 20_000,
      });
      expect(etcdctl.stdout.trim()).toBe('OK');
      const { code, stdout, stderr } = await runCli(
        [
          'run',
          '--lock-prefix',
          prefix,
          '--lock',
          'job',
          '--',
          'sh',
          '-c',
          'echo "token $LEASEHOLD_TOKEN"',
        ],
        env,
      );
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
      expect(stdout).toMatch(/^token \d+\n$/);
    });

    it('a wrong ETCDCTL_PASSWORD is refused by etcd: exit 77', async () => {
      const env = etcdctlEnv({ ETCDCTL_USER: 'root', ETCDCTL_PASSWORD: 'wrong' });
      const { code, stderr } = await runCli(['inspect'], env);
      expect(code).toBe(77);
      expect(stderr).toMatch(/^leasehold: /);
    });
  },
);
