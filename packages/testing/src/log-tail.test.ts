import { describe, expect, it } from 'vitest';
import { LogTail } from './log-tail.js';

describe('LogTail', () => {
  it('splits chunks into lines across chunk borders and keeps the last N', () => {
    const seen: string[] = [];
    const tail = new LogTail('etcd1', (line) => seen.push(line), 2);
    tail.push('a\nb');
    tail.push('c\r\n\nd');
    tail.flush();
    expect(seen).toEqual(['[etcd1] a', '[etcd1] bc', '[etcd1] d']);
    expect(tail.tail()).toEqual(['bc', 'd']);
    expect(tail.describe()).toContain('last output of etcd1');
  });

  it('survives a throwing log callback', () => {
    const tail = new LogTail('x', () => {
      throw new Error('boom');
    });
    expect(() => tail.push('line\n')).not.toThrow();
    expect(tail.tail()).toEqual(['line']);
  });
});
