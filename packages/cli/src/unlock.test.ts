import { describe, expect, it } from 'vitest';
import { CliError, exitCodes } from './exit-codes.js';
import { placeOf, resolveKey } from './unlock.js';

describe('unlock --key', () => {
  it('takes a full key of the lock, or its lease id alone', () => {
    expect(resolveKey('/l/', 'deploy', '/l/deploy/694d5765fc71500b')).toBe(
      '/l/deploy/694d5765fc71500b',
    );
    expect(resolveKey('/l/', 'deploy', '694d5765fc71500b')).toBe('/l/deploy/694d5765fc71500b');
    expect(resolveKey('/l/', 'a/b', 'ff')).toBe('/l/a%2Fb/ff');
  });

  it.each([
    ['/l/other/694d', 'a key of another lock'],
    ['/l/deploy/sub/694d', 'a key below the queue'],
    ['/l/deploy/', 'the range itself'],
    ['zz', 'not hex'],
  ])('refuses %s (%s)', (key) => {
    let thrown: unknown;
    try {
      resolveKey('/l/', 'deploy', key);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CliError);
    expect((thrown as CliError).exitCode).toBe(exitCodes.usage);
    expect((thrown as Error).message).toMatch(
      /is not a key of lock "deploy": expected \/l\/deploy\/<lease id in hex>/,
    );
  });

  it('says whether the key holds the lock or waits', () => {
    const e = (key: string, token: bigint) => ({ key, token, value: '', leaseId: 1n });
    const queue = [e('b', 9n), e('a', 4n), e('c', 12n)];
    expect(placeOf(e('a', 4n), queue)).toBe('the holder');
    expect(placeOf(e('b', 9n), queue)).toBe('waiter #1');
    expect(placeOf(e('c', 12n), queue)).toBe('waiter #2');
  });
});
