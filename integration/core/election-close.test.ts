/**
 * Ending a client while its elections are busy: a waiting campaign rejects with its session's
 * error, `lead()` rejects with `ClientClosedError` (also while its work ignores its signal), and
 * the process then exits on its own.
 */
import {
  connect,
  isClientClosedError,
  isLeaseLostError,
  isSessionClosedError,
} from '@leasehold/core';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
/** How many candidates the election `e` under `prefix` has. */
async function candidates(prefix: string): Promise<number> {
  const admin = etcdClient(endpoints);
  try {
    return await admin.getAll().prefix(`${prefix}e/`).count();
  } finally {
    admin.close();
  }
}
const settle = (p: Promise<unknown>) =>
  p.then(
    () => ({ ok: true as const, error: undefined }),
    (error: unknown) => ({ ok: false as const, error }),
  );

describe('closing a client mid-election', () => {
  it('a waiting candidate whose session ends rejects with the session’s LeaseLostError', async () => {
    const electionPrefix = uniquePrefix('close-wait');
    await using a = await connect({ endpoints, electionPrefix });
    await using b = await connect({ endpoints, electionPrefix });
    const leadership = await a.campaign('e', 'a');
    const session = await b.session({ ttlSeconds: 10 });
    const waiting = settle(b.campaign('e', 'b', { session }));
    await waitFor(async () => (await candidates(electionPrefix)) === 2, {
      what: 'the candidate is queued',
    });
    await session.close();
    const outcome = await waitFor(() => waiting, { what: 'the campaign settles' });
    expect(isLeaseLostError(outcome.error) && isSessionClosedError(outcome.error)).toBe(true);
    await leadership.resign();
  });

  it('lead() rejects with ClientClosedError on close, waiting or leading with a work that ignores its signal', async () => {
    const electionPrefix = uniquePrefix('close-lead');
    const a = await connect({ endpoints, electionPrefix });
    const b = await connect({ endpoints, electionPrefix });
    const stuck = new Promise<void>(() => {});
    const leading = settle(a.lead('e', 'a', () => stuck, { drainTimeoutMs: 300 }));
    await waitFor(async () => (await b.leader('e'))?.value === 'a', { what: 'a leads' });
    const waiting = settle(b.lead('e', 'b', () => stuck));
    await waitFor(async () => (await candidates(electionPrefix)) === 2, {
      what: 'b is queued',
    });
    await b.close();
    expect(isClientClosedError((await waitFor(() => waiting, { what: 'b settles' })).error)).toBe(
      true,
    );
    await a.close();
    expect(isClientClosedError((await waitFor(() => leading, { what: 'a settles' })).error)).toBe(
      true,
    );
  });

  it('a process whose lead() work is stuck exits once it closes its client', async () => {
    const script = `
      import { connect } from '@leasehold/core';
      const client = await connect({ endpoints: ${JSON.stringify(endpoints)}, electionPrefix: ${JSON.stringify(uniquePrefix('close-exit'))} });
      let elected;
      const isElected = new Promise((resolve) => (elected = resolve));
      const leading = client.lead('e', 'x', () => (elected(), new Promise(() => {})), { drainTimeoutMs: 200 });
      await isElected;
      await client.close();
      await leading.catch((err) => console.log(err.code));
    `;
    const cwd = fileURLToPath(new URL('..', import.meta.url));
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const code = await waitFor(() => exited.then((c) => ({ c })), {
        timeoutMs: 20_000,
        what: 'the process exits by itself',
      });
      expect(code.c).toBe(0);
      expect(out.trim()).toBe('CLIENT_CLOSED');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
