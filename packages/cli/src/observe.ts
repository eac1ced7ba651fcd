/** `leasehold observe NAME`: who leads an election, and every change, one line each. */
import type { LeaderState } from '@leasehold/core';
import { connectWith, type ConnectionFlags } from './connection.js';
import { quotedValue, toJson } from './format.js';
import { leaseHex } from './keys.js';
import { Signals } from './signals.js';

export interface ObserveFlags extends ConnectionFlags {
  json?: boolean;
}

/** One state as a line of text. */
export function observeLine(state: LeaderState, at: Date): string {
  const { leader, revision } = state;
  const who = leader
    ? `${quotedValue(leader.value, 80)} leads (token ${leader.token}, lease ${leaseHex(leader.leaseId)})`
    : 'no leader';
  return `${at.toISOString()}  revision ${revision}  ${who}`;
}

/** One state as a JSON line: tokens and revisions as decimal strings, lease ids in hex. */
export function observeJson(election: string, state: LeaderState, at: Date): string {
  const { leader, revision } = state;
  return toJson({
    time: at.toISOString(),
    election,
    revision,
    leader: leader
      ? {
          value: leader.value,
          token: leader.token,
          key: leader.key,
          leaseId: leaseHex(leader.leaseId),
        }
      : null,
  });
}

export async function observe(
  name: string,
  flags: ObserveFlags,
  write: (line: string) => Promise<void>,
): Promise<number> {
  using signals = new Signals({ ignoreStop: false, quietStop: true });
  const client = await connectWith(flags, { signal: signals.interrupted });
  try {
    for await (const state of client.observe(name, { signal: signals.interrupted })) {
      const now = new Date();
      await write(flags.json ? observeJson(name, state, now) : observeLine(state, now));
    }
    signals.interrupted.throwIfAborted();
    return 0;
  } finally {
    await client.close();
  }
}
