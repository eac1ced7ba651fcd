import type { Leasehold, Session } from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { jobKeys } from './claims.js';
import { Claimer } from './claimer.js';

/** A client whose every call fails loudly: the tests below must not reach etcd. */
const unreachable = new Proxy(
  {},
  {
    get() {
      throw new Error('etcd was called');
    },
  },
) as unknown as Leasehold;
const session = { leaseId: 1n } as Session;
const FIRE = Date.parse('2025-03-10T12:00:00.000Z');

describe('Claimer.claim: the record must outlive the claim', () => {
  const claimAt = (nowMs: number, retentionSeconds = 60, maxClockSkewMs = 9_500) =>
    new Claimer(unreachable, 'r', () => new Date(nowMs), maxClockSkewMs).claim({
      job: 'j',
      keys: jobKeys('/p/', 'j'),
      fireMs: FIRE,
      attempt: 'catch-up',
      overlap: 'skip',
      retentionSeconds,
      session,
    });

  it("does not send a claim that could land after another replica's record of the fire expired", async () => {
    // A record made when the fire came by a clock 9.5 s ahead lives 60 s from then: by this
    // clock it may be gone 50.5 s after the fire. However long the process stalled between
    // planning and claiming, the claim is not sent then.
    await expect(claimAt(FIRE + 50_500)).resolves.toEqual({
      result: { kind: 'too-late', lateMs: 50_500 },
    });
    await expect(claimAt(FIRE + 3_600_000)).resolves.toMatchObject({
      result: { kind: 'too-late' },
    });
  });

  it('sends it while there is time left (here: the client is called)', async () => {
    await expect(claimAt(FIRE + 50_499)).rejects.toThrow('etcd was called');
    await expect(claimAt(FIRE + 59_999, 60, 0)).rejects.toThrow('etcd was called');
    await expect(claimAt(FIRE + 60_000, 60, 0)).resolves.toMatchObject({
      result: { kind: 'too-late' },
    });
  });
});
