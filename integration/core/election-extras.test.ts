/**
 * What users of other election tools look for, on a real etcd: the candidates in their order
 * (Curator's getParticipants), a new-leader callback in lead() (client-go's OnNewLeader), and
 * campaigning again after the work returns (Curator's autoRequeue).
 */
import { connect, type Leasehold } from '@leasehold/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const base = uniquePrefix('election-extras');
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

describe('elections: candidates, onNewLeader, requeue', () => {
  it('candidates() lists every candidate in the order they will lead', async () => {
    const first = await a.campaign('order', 'first');
    const second = b.campaign('order', 'second');
    await waitFor(async () => (await a.candidates('order')).length === 2, {
      what: 'two candidates',
    });
    const list = await b.candidates('order');
    expect(list.map((c) => c.value)).toEqual(['first', 'second']);
    expect(list[0]).toMatchObject({ key: first.key, token: first.token });
    await first.resign();
    const next = await second;
    expect((await a.candidates('order')).map((c) => c.key)).toEqual([next.key]);
    await next.resign();
    expect(await a.candidates('order')).toEqual([]);
  });

  it("onNewLeader hears the other process's term and then its own", async () => {
    const other = await a.campaign('watched', 'a');
    const stop = new AbortController();
    const leaders: (string | undefined)[] = [];
    const leading = b.lead(
      'watched',
      'b',
      ({ signal }) => new Promise((r) => (signal.onabort = r)),
      {
        signal: stop.signal,
        onNewLeader: (leader) => leaders.push(leader?.value),
      },
    );
    await waitFor(() => leaders.includes('a'), { what: 'a seen leading' });
    await other.resign();
    await waitFor(() => leaders.at(-1) === 'b', { what: 'b seen leading' });
    stop.abort();
    await leading;
    expect(leaders.filter((v) => v !== undefined)).toEqual(['a', 'b']);
  });

  it('requeue: work that returns is followed by a new term with a higher token', async () => {
    const stop = new AbortController();
    const tokens: bigint[] = [];
    await a.lead(
      'requeue',
      'a',
      ({ token }) => {
        tokens.push(token);
        if (tokens.length === 3) stop.abort();
      },
      { signal: stop.signal, requeue: true },
    );
    expect(tokens).toHaveLength(3);
    expect(tokens[0]! < tokens[1]! && tokens[1]! < tokens[2]!).toBe(true);
    expect(await a.candidates('requeue')).toEqual([]);
  });
});
