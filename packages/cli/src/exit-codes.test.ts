import { readFileSync } from 'node:fs';
import {
  AuthError,
  CampaignTimeoutError,
  ClusterChangedError,
  ConnectError,
  EtcdRequestError,
  EtcdUnavailableError,
  InvalidArgumentError,
  LeadershipLostError,
  LeaseLostError,
  LockLostError,
  LockTakenError,
  LockTimeoutError,
} from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { CliError, exitCodeFor, exitCodes, signalExitCode } from './exit-codes.js';

describe('exit codes', () => {
  it.each([
    [new InvalidArgumentError('x'), exitCodes.usage],
    [new ConnectError('x', []), exitCodes.unavailable],
    [new EtcdUnavailableError('x'), exitCodes.unavailable],
    [new ClusterChangedError(0n, 'x'), exitCodes.unavailable],
    [new LeaseLostError('deadline', 1n, 'x'), exitCodes.unavailable],
    [new AuthError('x'), exitCodes.refused],
    [new EtcdRequestError('x'), exitCodes.refused],
    [new LockTakenError('l', 'k', 1n), exitCodes.taken],
    [new LockTimeoutError('l', 1), exitCodes.timeout],
    [new CampaignTimeoutError('e', 1), exitCodes.timeout],
    [new LockLostError('deleted', 'k', 1n, 'x'), exitCodes.lost],
    [new LeadershipLostError('session', 'e', 'k', 1n, 'x'), exitCodes.lost],
    [new LockLostError('expired-in-queue', 'k', 1n, 'x'), exitCodes.unavailable],
    [new CliError('x', 83), 83],
    [new TypeError('bug'), exitCodes.internal],
    ['not even an error', exitCodes.internal],
  ])('%s → %i', (err, code) => expect(exitCodeFor(err)).toBe(code));

  it('are 128 + N for signals', () => {
    expect(signalExitCode('SIGINT')).toBe(130);
    expect(signalExitCode('SIGTERM')).toBe(143);
    expect(signalExitCode('SIGKILL')).toBe(137);
    expect(signalExitCode('SIGHUP')).toBe(129);
    expect(signalExitCode(9)).toBe(137);
  });

  it('refuses what is not a signal, naming it', () => {
    for (const bad of ['SIGBOGUS', 'TERM', '', 0, 128, 1.5, NaN]) {
      expect(() => signalExitCode(bad as NodeJS.Signals)).toThrow(
        /^signal must be a signal name such as "SIGTERM" or a number from 1 to 127, got /,
      );
    }
    expect(() => signalExitCode({} as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it('are all in the README table, and the table has no others', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('## Exit codes'));
    const documented = [...section.matchAll(/^\| `(\d+)` \|/gm)].map((m) => Number(m[1]));
    const own = [...new Set(Object.values(exitCodes))].filter((code) => code !== 0);
    expect(documented.sort((a, b) => a - b)).toEqual([0, ...own].sort((a, b) => a - b));
  });
});
