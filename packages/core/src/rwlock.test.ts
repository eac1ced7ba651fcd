import { describe, expect, it } from 'vitest';
import { modeOf } from './rwlock.js';

describe('read/write lock keys', () => {
  it('say read or write in their names; keys of other shapes have no mode (they count as writers)', () => {
    expect(modeOf('/l/db%rw/r.694d.0')).toBe('read');
    expect(modeOf('/l/db%rw/w.694d.12')).toBe('write');
    for (const key of ['/l/db%rw/694d', '/l/db%rw/x.694d.0', '/l/db%rw/r.694d', '/l/db%rw/r.XY.0'])
      expect(modeOf(key)).toBeUndefined();
  });
});
