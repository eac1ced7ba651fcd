import { describe, expect, it } from 'vitest';
import { flush, track } from './clock.fake.js';
import { CANDIDATE_KEY, fakeElections } from './election.fake.js';
import { campaign } from './election.js';
import {
  isCampaignTimeoutError,
  isInvalidArgumentError,
  isLeadershipLostError,
  isLeadershipResignedError,
} from './errors.js';

const KEY = CANDIDATE_KEY;
const setup = fakeElections;

describe('campaign', () => {
  it('writes the value on the candidate key and resolves when first, with the create revision as token', async () => {
    const { maker, store } = await setup();
    const leadership = await campaign(maker, 'e', 'alpha', {});
    expect(leadership.key).toBe(KEY);
    expect(store.get(KEY)?.value.toString()).toBe('alpha');
    expect(leadership.token).toBe(BigInt(store.get(KEY)!.create_revision));
    expect(leadership.value).toBe('alpha');
    expect(leadership.isLeader).toBe(true);
  });

  it('waits behind an earlier candidate and is elected when its key is deleted', async () => {
    const { maker, store, watch } = await setup();
    store.put('E/e/1', { lease: 1, value: 'other' });
    const elected = track(campaign(maker, 'e', 'alpha', {}));
    await flush();
    expect(elected.settled).toBe(false);
    watch.emit(store.delete('E/e/1'));
    await flush();
    expect(elected.value?.isLeader).toBe(true);
  });

  it('adopting a candidacy of the same lease keeps its token and proclaims the new value', async () => {
    const { maker, store, session } = await setup();
    store.put(KEY, { lease: session.leaseId, value: 'before restart' });
    const token = BigInt(store.get(KEY)!.create_revision);
    const leadership = await campaign(maker, 'e', 'after restart', {});
    expect(leadership.token).toBe(token);
    expect(store.get(KEY)?.value.toString()).toBe('after restart');
    expect(store.get(KEY)?.create_revision).toBe(token.toString());
  });

  it('proclaim is guarded: once the key was overwritten it rejects, writes nothing, and ends the term', async () => {
    const { maker, store } = await setup();
    const leadership = await campaign(maker, 'e', 'alpha', {});
    await leadership.proclaim('beta');
    expect(leadership.value).toBe('beta');
    store.delete(KEY);
    store.put(KEY, { lease: 999, value: 'newer' });
    const err = await leadership.proclaim('gamma').catch((e: unknown) => e);
    expect(isLeadershipLostError(err) && err.reason).toBe('overwritten');
    expect(store.get(KEY)?.value.toString()).toBe('newer');
    expect(leadership.isLeader).toBe(false);
    expect(leadership.value).toBe('beta');
  });

  it('resign aborts the signal with LeadershipResignedError and deletes only its own key', async () => {
    const { maker, store } = await setup();
    const leadership = await campaign(maker, 'e', 'alpha', {});
    await leadership.resign();
    expect(isLeadershipResignedError(leadership.signal.reason)).toBe(true);
    expect(store.has(KEY)).toBe(false);
    await expect(leadership.proclaim('x')).rejects.toSatisfy(isLeadershipResignedError);
  });

  it('timeoutMs rejects with CampaignTimeoutError and withdraws the key', async () => {
    const { maker, store, clock } = await setup();
    store.put('E/e/1', { lease: 1 });
    const elected = track(campaign(maker, 'e', 'alpha', { timeoutMs: 500 }));
    await flush();
    expect(store.has(KEY)).toBe(true);
    clock.advance(500);
    await flush();
    expect(isCampaignTimeoutError(elected.error)).toBe(true);
    expect(store.has(KEY)).toBe(false);
  });

  it.each<[string, () => [string, unknown, unknown]]>([
    ['an empty election', () => ['', 'v', {}]],
    ['a value that is not a string', () => ['e', 42, {}]],
    ['a value over 64 KiB', () => ['e', 'é'.repeat(32 * 1024 + 1), {}]],
    ['a bad timeoutMs', () => ['e', 'v', { timeoutMs: 0 }]],
    ['options that are not an object', () => ['e', 'v', null]],
  ])('rejects %s before any etcd call', async (_, args) => {
    const { maker, calls } = await setup();
    const before = calls.length;
    const [election, value, options] = args();
    const err = await campaign(maker, election, value as string, options as never).catch(
      (e: unknown) => e,
    );
    expect(isInvalidArgumentError(err)).toBe(true);
    expect(calls.length).toBe(before);
  });
});
