import { describe, expect, it, vi } from 'vitest';
import { deferred, flush, track } from './clock.fake.js';
import { CANDIDATE_KEY, fakeElections } from './election.fake.js';
import { isInvalidArgumentError, isLeadershipLostError } from './errors.js';
import { lead, type LeaderContext } from './lead.js';

const KEY = CANDIDATE_KEY;

async function setup() {
  const terms: LeaderContext[] = [];
  return { ...(await fakeElections()), terms };
}

describe('lead', () => {
  it('runs the work per term, aborts it on loss, and campaigns again for a new term with a higher token', async () => {
    const { maker, terms, store, watch } = await setup();
    const stop = new AbortController();
    const running = track(
      lead(
        maker,
        'e',
        'me',
        async (context) => {
          terms.push(context);
          await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
        },
        { signal: stop.signal },
      ),
    );
    await flush();
    expect(terms).toHaveLength(1);
    watch.emit(store.delete(KEY)); // an operator deleted the leader's key
    await flush();
    expect(isLeadershipLostError(terms[0]!.signal.reason)).toBe(true);
    expect(terms).toHaveLength(2);
    expect(terms[1]!.token).toBeGreaterThan(terms[0]!.token);
    stop.abort();
    await flush();
    expect(running).toEqual({ settled: true, value: undefined });
    expect(store.has(KEY)).toBe(false); // resigned
  });

  it('a shutdown between the election and the start of the work: the work never runs, lead() resigns and resolves', async () => {
    const { maker, store } = await setup();
    const stop = new AbortController();
    const work = vi.fn();
    const running = track(
      lead(maker, 'e', 'me', work, {
        signal: stop.signal,
        onElected: () => stop.abort(new Error('shutting down')),
      }),
    );
    await flush();
    expect(work).not.toHaveBeenCalled();
    expect(running).toEqual({ settled: true, value: undefined });
    expect(store.has(KEY)).toBe(false); // resigned
  });

  it('onNewLeader hears every leader change while lead() runs, its own term included', async () => {
    const { maker, store, watch } = await setup();
    const stop = new AbortController();
    const leaders: (string | undefined)[] = [];
    const running = track(
      lead(maker, 'e', 'me', ({ signal }) => new Promise((r) => (signal.onabort = r)), {
        signal: stop.signal,
        onNewLeader: (leader) => leaders.push(leader?.value),
      }),
    );
    await flush();
    // The fake watch delivers what the test emits: the candidacy's put, then one behind it.
    watch.emit(...store.log.filter((e) => e.kv.key.toString() === KEY));
    watch.emit(store.put('E/e/0', { lease: 7, value: 'other' })); // behind: no change
    await flush();
    stop.abort();
    await flush();
    expect(running.settled).toBe(true);
    expect(leaders.at(-1)).toBe('me'); // its own term
    expect(leaders).not.toContain('other');
  });

  it('requeue: after the work returns, it resigns and campaigns again for a new term', async () => {
    const { maker } = await setup();
    const stop = new AbortController();
    const tokens: bigint[] = [];
    const running = track(
      lead(
        maker,
        'e',
        'me',
        ({ token }) => {
          tokens.push(token);
          if (tokens.length === 3) stop.abort();
        },
        { signal: stop.signal, requeue: true },
      ),
    );
    for (let i = 0; i < 10 && !running.settled; i++) await flush();
    expect(running).toEqual({ settled: true, value: undefined });
    expect(tokens).toHaveLength(3);
    expect(tokens[1]! > tokens[0]! && tokens[2]! > tokens[1]!).toBe(true);
  });

  it('with recampaign false, rejects with the loss', async () => {
    const { maker, store, watch } = await setup();
    const running = track(
      lead(maker, 'e', 'me', ({ signal }) => new Promise((r) => (signal.onabort = r)), {
        recampaign: false,
      }),
    );
    await flush();
    watch.emit(store.delete(KEY));
    await flush();
    expect(isLeadershipLostError(running.error) && running.error.reason).toBe('deleted');
  });

  it('on shutdown aborts the work with the shutdown reason, lets it drain, then resigns', async () => {
    const { maker, store } = await setup();
    const stop = new AbortController();
    const drained = deferred();
    let reason: unknown;
    const running = track(
      lead(
        maker,
        'e',
        'me',
        async ({ signal }) => {
          await new Promise((resolve) => signal.addEventListener('abort', resolve));
          reason = signal.reason;
          await drained.promise; // finishing the unit in hand
        },
        { signal: stop.signal },
      ),
    );
    await flush();
    stop.abort(new Error('SIGTERM'));
    await flush();
    expect(String(reason)).toMatch(/SIGTERM/);
    expect(store.has(KEY)).toBe(true); // still draining: not resigned yet
    drained.resolve();
    await flush();
    expect(running).toEqual({ settled: true, value: undefined });
    expect(store.has(KEY)).toBe(false);
  });

  it('resigns after drainTimeoutMs when the work ignores its signal, and warns', async () => {
    const { maker, store, clock } = await setup();
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const stop = new AbortController();
    const running = track(
      lead(maker, 'e', 'me', () => new Promise(() => {}), {
        signal: stop.signal,
        drainTimeoutMs: 500,
      }),
    );
    await flush();
    stop.abort();
    await flush();
    expect(store.has(KEY)).toBe(true);
    clock.advance(500);
    await flush();
    expect(running.settled).toBe(true);
    expect(store.has(KEY)).toBe(false);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/drainTimeoutMs/), expect.anything());
    warn.mockRestore();
  });

  it('work that returns resigns and resolves; work that throws resigns and rejects with it', async () => {
    const { maker, store } = await setup();
    await lead(maker, 'e', 'me', () => 'done', {});
    expect(store.has(KEY)).toBe(false);
    const boom = new Error('boom');
    await expect(
      lead(
        maker,
        'e',
        'me',
        () => {
          throw boom;
        },
        {},
      ),
    ).rejects.toBe(boom);
    await flush();
    expect(store.has(KEY)).toBe(false);
  });

  it.each<[string, Record<string, unknown>]>([
    ['recampaign', { recampaign: 'yes' }],
    ['drainTimeoutMs', { drainTimeoutMs: -1 }],
    ['onElected', { onElected: 1 }],
    ['signal', { signal: {} }],
  ])('rejects a bad %s before any etcd call', async (name, options) => {
    const { maker, calls } = await setup();
    const before = calls.length;
    const err = await lead(maker, 'e', 'me', () => {}, options).catch((e: unknown) => e);
    expect(isInvalidArgumentError(err) && err.message).toMatch(new RegExp(`^${name}`));
    expect(calls.length).toBe(before);
  });
});

describe('lead and a work that ignores its signal', () => {
  it('after a loss, starts no new term in this process until the last work returned', async () => {
    const { maker, store, watch, clock } = await setup();
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const stop = new AbortController();
    const stuck = deferred();
    const starts: bigint[] = [];
    const running = track(
      lead(
        maker,
        'e',
        'me',
        async ({ token }) => {
          starts.push(token);
          if (starts.length === 1)
            await stuck.promise; // ignores its signal
          else await new Promise(() => {});
        },
        { signal: stop.signal, drainTimeoutMs: 500 },
      ),
    );
    await flush();
    watch.emit(store.delete(KEY));
    await flush();
    clock.advance(5_000);
    await flush();
    expect(starts).toHaveLength(1);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/waiting for it/), expect.anything());
    stuck.resolve();
    await flush();
    expect(starts).toHaveLength(2);
    stop.abort();
    await flush();
    clock.advance(500);
    await flush();
    expect(running.settled).toBe(true);
    warn.mockRestore();
  });
});
