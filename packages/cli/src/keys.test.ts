import { describe, expect, it } from 'vitest';
import { encodeName } from '@leasehold/core/internal';
import { decodeName, leaseHex, parseQueueKey, queueRange } from './keys.js';

describe('names in keys (core encodes them; the CLI decodes them)', () => {
  it.each([
    ['jobs', 'jobs'],
    ['jobs/a', 'jobs%2Fa'],
    ['100%', '100%25'],
    ['a%2Fb', 'a%252Fb'],
    ['ünïcode ✓', 'ünïcode ✓'],
  ])('%s ↔ %s', (name, segment) => {
    expect(encodeName(name)).toBe(segment);
    expect(decodeName(segment)).toBe(name);
  });

  it('keeps the range of "jobs" apart from the range of "jobs/a"', () => {
    const jobs = queueRange('/l/', 'jobs');
    expect(jobs).toBe('/l/jobs/');
    expect(queueRange('/l/', 'jobs/a').startsWith(jobs)).toBe(false);
  });

  it('parses queue keys and rejects others', () => {
    expect(parseQueueKey('/l/', '/l/jobs%2Fa/694d5765fc71500b')).toEqual({
      name: 'jobs/a',
      leaseHex: '694d5765fc71500b',
    });
    expect(parseQueueKey('/l/', '/l/jobs/0')).toEqual({ name: 'jobs', leaseHex: '0' });
    expect(parseQueueKey('/l/', '/l/jobs')).toBeUndefined(); // no lease part
    expect(parseQueueKey('/l/', '/l/jobs/XYZ')).toBeUndefined(); // not hex
    expect(parseQueueKey('/l/', '/l//abc')).toBeUndefined(); // empty name
    expect(parseQueueKey('/l/', '/other/jobs/abc')).toBeUndefined();
  });

  it('writes lease ids as keys do', () => {
    // As in the root README: lease 7587899264603905671 owns key .../694da22dc229de87.
    expect(leaseHex('7587899264603905671')).toBe('694da22dc229de87');
    expect(leaseHex(255n)).toBe('ff');
  });
});
