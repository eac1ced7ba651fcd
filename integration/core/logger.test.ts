import { connect, type LeaseLostError } from '@leasehold/core';
import { freePort, TcpFaultProxy } from '@leasehold/testing';
import { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { recordingLogger } from '../setup/logger.js';

const endpoints = sharedEndpoints();
const admin = new Etcd3({ hosts: endpoints });
afterAll(() => admin.close());

describe('logging on a real etcd', () => {
  it('a reset member: member failure, keepalive stream and retries logged naming the endpoint; recovery; then a session lost to a revoke, with its lease and reason', async () => {
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    const log = recordingLogger();
    await using client = await connect({
      endpoints: [proxy.url],
      lockPrefix: uniquePrefix('log-reset'),
      callTimeoutMs: 1_000,
      logger: log.logger,
    });
    onCleanup(client, () => {}); // clean-up failures while reset are expected
    expect(log.find('connected to etcd')?.fields).toMatchObject({ endpoints: [proxy.url] });
    const session = await client.session({ ttlSeconds: 5 });
    const lock = await client.acquire('job', { session });

    proxy.setMode('reset');
    await expect(client.holder('job')).rejects.toThrow();
    const failed = log.find(/^etcd member did not answer/, { endpoint: proxy.url });
    expect(failed?.level).toBe('warn');
    const retry = log.find('retrying etcd lock first', { endpoint: proxy.url, attempt: 2 });
    expect(retry?.level).toBe('warn');
    expect(retry?.fields.delayMs).toEqual(expect.any(Number));
    expect((retry?.fields.err as { message?: string } | undefined)?.message).toEqual(
      expect.any(String),
    );
    await waitFor(
      () => log.find(/^keepalive stream (broke|open failed)/, { endpoint: proxy.url }),
      {
        what: 'the keepalive stream failure logged with its endpoint',
      },
    );

    proxy.setMode('pass');
    await waitFor(async () => (await client.holder('job'))?.token === lock.token, {
      what: 'etcd answering again through the proxy',
    });
    expect(log.find('etcd member answers again', { endpoint: proxy.url })?.level).toBe('info');

    const lost = new Promise<LeaseLostError>((resolve) => session.onLost(resolve));
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    await waitFor(() => lost, { timeoutMs: 5_000, what: 'the session lost after the revoke' });
    const line = log.find('session lost (gone)');
    expect(line?.level).toBe('warn');
    expect(line?.fields).toMatchObject({ leaseId: session.leaseId.toString(16), reason: 'gone' });
    expect((line?.fields.err as Error).name).toBe('LeaseLostError');
    // No field but the error is a bigint: lease ids and tokens are strings.
    const fields = log.lines.flatMap((l) => Object.entries(l.fields));
    expect(fields.filter(([k, v]) => k !== 'err' && typeof v === 'bigint')).toEqual([]);
  });

  it('a second, unreachable endpoint: calls that went there fail over, and the log names it', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const log = recordingLogger();
    await using client = await connect({
      endpoints: [dead, endpoints[0]!],
      lockPrefix: uniquePrefix('log-dead'),
      logger: log.logger,
    });
    // etcd3 picks a member at random per call: read until one went to the dead member.
    await waitFor(
      async () => {
        await client.holder('x');
        return log.find(/^etcd member did not answer/, { endpoint: dead });
      },
      { timeoutMs: 20_000, intervalMs: 10, what: 'a call to the unreachable member logged' },
    );
    const retried = await waitFor(
      async () => {
        await client.holder('x');
        return log.find(/^retrying etcd/, { endpoint: dead });
      },
      { timeoutMs: 20_000, intervalMs: 10, what: 'a retry after the unreachable member logged' },
    );
    expect(retried.level).toBe('warn');
    expect(log.lines.some((l) => l.fields.endpoint === endpoints[0] && l.level === 'warn')).toBe(
      false,
    );
  });

  it('connect: each retry of the dial and the final failure are logged with the endpoint', async () => {
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    proxy.setMode('reset');
    const log = recordingLogger();
    await expect(
      connect({ endpoints: [proxy.url], dialTimeoutMs: 1_500, logger: log.logger }),
    ).rejects.toMatchObject({ name: 'ConnectError' });
    const retries = log.lines.filter((l) => l.message === 'retrying etcd connect');
    expect(retries.length).toBeGreaterThan(0);
    expect(retries[0]!.fields).toMatchObject({ what: 'connect', attempt: 2, endpoint: proxy.url });
    expect(log.find('could not connect to etcd')?.fields).toMatchObject({
      endpoints: [proxy.url],
    });
  });

  it('takes a pino logger as it is: JSON lines with the fields, at pino levels', async () => {
    const lines: Record<string, unknown>[] = [];
    const destination = {
      write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>),
    };
    const logger = pino({ level: 'debug' }, destination).child({ service: 'billing' });
    await using client = await connect({ endpoints, lockPrefix: uniquePrefix('log-pino'), logger });
    const session = await client.session({ ttlSeconds: 3 });
    const lost = new Promise<boolean>((resolve) => session.onLost(() => resolve(true)));
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    await waitFor(() => lost, { timeoutMs: 5_000, what: 'the session lost after the revoke' });
    expect(lines.find((l) => l.msg === 'connected to etcd')).toMatchObject({
      level: 30, // info
      service: 'billing',
      endpoints,
      clusterId: client.clusterId,
    });
    expect(lines.find((l) => l.msg === 'keepalive stream opened')).toMatchObject({
      level: 20, // debug
      leaseId: session.leaseId.toString(16),
      // With several endpoints the stream goes to any of them.
      endpoint: expect.toSatisfy((e: unknown) => endpoints.includes(e as string)) as unknown,
    });
    expect(lines.find((l) => l.msg === 'session lost (gone)')).toMatchObject({
      level: 40, // warn
      leaseId: session.leaseId.toString(16),
      reason: 'gone',
      err: { type: 'LeaseLostError', code: 'LEASE_LOST' },
    });
  });

  it('a logger that throws on every line never breaks locking', async () => {
    const boom = () => {
      throw new Error('log transport down');
    };
    await using client = await connect({
      endpoints,
      lockPrefix: uniquePrefix('log-throws'),
      logger: { debug: boom, info: boom, warn: boom, error: boom },
    });
    const session = await client.session({ ttlSeconds: 3 });
    const lock = await client.acquire('job', { session });
    await lock.put(`${client.lockPrefix}data`, 'ok');
    await lock.release();
    const lost = new Promise<boolean>((resolve) => session.onLost(() => resolve(true)));
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    await waitFor(() => lost, {
      timeoutMs: 5_000,
      what: 'the session lost (logged by a throwing logger)',
    });
    expect(session.isLost).toBe(true);
  });
});
