/**
 * Holder.valueBytes: it is etcd3's Buffer for the value, a view into a shared
 * ArrayBuffer (Node's pool slab or the whole decoded answer). `valueBytes.buffer` then holds
 * other keys' values (here: another candidate's), and the observer's own copy of the candidate
 * is the same memory, so a caller's write to it changes the observer's view.
 */
import { connect, type Leasehold } from '@leasehold/core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const base = uniquePrefix('value-bytes');
let a: Leasehold;
let b: Leasehold;
beforeAll(async () => {
  const open = () =>
    connect({ endpoints, lockPrefix: `${base}lock/`, electionPrefix: `${base}election/` });
  [a, b] = await Promise.all([open(), open()]);
});
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
});

it("an observed leader's valueBytes is its value alone: no other key's bytes behind it", async () => {
  const leadership = await a.campaign('e', 'leader-value');
  const secret = `second-candidate-${Math.random()}`;
  const waiting = b.campaign('e', secret).catch(() => undefined);
  const admin = etcdClient(endpoints);
  // The observer's first read then includes both candidates with their values.
  await waitFor(
    async () => (await admin.getAll().prefix(`${base}election/e/`).keys()).length === 2,
    { what: 'both candidates in the queue' },
  );
  admin.close();
  const states = a.observe('e');
  try {
    const state = await states.next();
    const bytes = state.done ? undefined : state.value.leader?.valueBytes;
    expect(Buffer.from(bytes!).toString()).toBe('leader-value');
    expect(Buffer.from(bytes!.buffer).includes(secret)).toBe(false);
  } finally {
    await states.return?.();
    await leadership.resign();
    await (await waiting)?.resign();
  }
});
