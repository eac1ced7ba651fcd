import { checkOptions } from '@leasehold/core/internal';
import { describe, expect, it } from 'vitest';
import { unknownKey } from './known-keys.js';

const coreMessage = (value: object, allowed: string[]): string => {
  try {
    checkOptions(value, allowed as never, { name: 'options' });
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('unknownKey', () => {
  it.each<[object, string[]]>([
    [{ membrs: 3 }, ['members', 'signal']],
    [{ members: 3, auth: null }, ['members']],
    [{ x: [1] }, ['members']],
    [{ x: 'a password' }, ['members']],
    [{ x: undefined }, ['members']],
    [{ x: () => 1 }, []],
  ])('words %j as core does, naming only the type', (value, allowed) => {
    expect(unknownKey('options', value, allowed)).toBe(coreMessage(value, allowed));
    expect(unknownKey('options', value, allowed)).not.toMatch(/password/);
  });

  it('accepts listed keys, also with undefined values', () => {
    expect(unknownKey('options', { members: undefined, signal: 1 }, ['members', 'signal'])).toBe(
      undefined,
    );
  });
});
