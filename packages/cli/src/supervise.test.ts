import { LockLostError } from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { commandEnv, deadlineTickMs, lossReason, shellWords, silenceMs } from './supervise.js';

describe('the command environment', () => {
  it("adds the hold's variables and drops leasehold's IPC channel", () => {
    const env = commandEnv(
      { PATH: '/bin', NODE_CHANNEL_FD: '3', NODE_CHANNEL_SERIALIZATION_MODE: 'json' },
      { LEASEHOLD_TOKEN: '812' },
    );
    expect(env).toEqual({ PATH: '/bin', LEASEHOLD_TOKEN: '812' });
  });
});

describe('deadline updates to the keeper', () => {
  it('come several times per keepalive interval (TTL/3), within bounds', () => {
    expect(deadlineTickMs(2_000)).toBe(100);
    expect(deadlineTickMs(3_000)).toBe(150);
    expect(deadlineTickMs(10_000)).toBe(250);
    expect(deadlineTickMs(100)).toBe(50);
    for (const ttlMs of [2_000, 10_000, 60_000])
      expect(deadlineTickMs(ttlMs)).toBeLessThan(ttlMs / 3);
  });

  it('the keeper takes leasehold for frozen after three missed ticks, well within TTL/3', () => {
    expect(silenceMs(3_000)).toBe(450);
    for (const ttlMs of [2_000, 3_000, 10_000, 60_000])
      expect(silenceMs(ttlMs)).toBeLessThan(ttlMs / 3);
  });
});

describe('messages', () => {
  it("say why a hold was lost without the SDK's repetition of key and token", () => {
    const err = new LockLostError(
      'deleted',
      '/l/x/1',
      7n,
      'lock /l/x/1 (token 7) is lost: its key was deleted by someone else',
    );
    expect(lossReason(err)).toBe('its key was deleted by someone else');
    expect(lossReason(new Error('other'))).toBe('other');
    expect(lossReason(undefined)).toMatch(/deadline passed/);
  });

  it('quote a command line as a shell would read it', () => {
    expect(shellWords(['sh', '-c', "echo it's $HOME", './a.sh', '--x=1'])).toBe(
      `sh -c 'echo it'\\''s $HOME' ./a.sh --x=1`,
    );
  });
});
