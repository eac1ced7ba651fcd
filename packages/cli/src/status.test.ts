import { describe, expect, it } from 'vitest';
import { describeWait, StatusLine } from './status.js';

const holder = { value: 'web-3:4711', token: 812n };

describe('the status line while waiting', () => {
  it('says who holds the lock, their token, for how long, and our place', () => {
    const seen = { token: 812n, since: 0, before: false };
    expect(describeWait('lock', 'deploy', { holder, ahead: 2 }, seen, 12_400)).toBe(
      'waiting for lock "deploy": held by "web-3:4711" (token 812) for 12s; 2 ahead of us in the queue',
    );
  });

  it('says "at least" for a holder that held the lock before we looked, once it is a second', () => {
    const seen = { token: 812n, since: 0, before: true };
    expect(describeWait('lock', 'deploy', { holder, ahead: 1 }, seen, 400)).toBe(
      'waiting for lock "deploy": held by "web-3:4711" (token 812); 1 ahead of us in the queue',
    );
    expect(describeWait('lock', 'deploy', { holder, ahead: 1 }, seen, 65_000)).toBe(
      'waiting for lock "deploy": held by "web-3:4711" (token 812) for at least 1m05s; 1 ahead of us in the queue',
    );
  });

  it('does not time a holder it has not timed (a new token)', () => {
    const seen = { token: 700n, since: 0, before: false };
    expect(describeWait('lock', 'deploy', { holder, ahead: undefined }, seen, 5_000)).toBe(
      'waiting for lock "deploy": held by "web-3:4711" (token 812); joining the queue',
    );
  });

  it('shows etcdctl holders (no value) and elections', () => {
    expect(
      describeWait(
        'election',
        'sched',
        { holder: { value: '', token: 5n }, ahead: 3 },
        undefined,
        0,
      ),
    ).toBe('waiting to lead "sched": led by (no value) (token 5); 3 ahead of us in the queue');
    expect(describeWait('lock', 'deploy', { holder: undefined, ahead: 0 }, undefined, 0)).toBe(
      'waiting for lock "deploy": nobody holds it, taking it',
    );
  });

  it('names a semaphore with its limit', () => {
    const semaphore = { permits: 3 };
    expect(describeWait(semaphore, 'api', { holder, ahead: 4 }, undefined, 0)).toBe(
      'waiting for a permit of semaphore "api" (3 permits): held by "web-3:4711" (token 812); 4 ahead of us in the queue',
    );
    expect(describeWait(semaphore, 'api', { holder: undefined, ahead: 0 }, undefined, 0)).toBe(
      'waiting for a permit of semaphore "api" (3 permits): nobody holds one, taking it',
    );
  });

  it('cannot be steered by a holder value with escape sequences', () => {
    const evil = { value: '\x1b[2J\x1b[Hok', token: 1n };
    expect(describeWait('lock', 'x', { holder: evil, ahead: 1 }, undefined, 0)).not.toMatch(
      // eslint-disable-next-line no-control-regex
      /\x1b/,
    );
  });
});

describe('StatusLine', () => {
  it('redraws in place, fits the terminal width, and clears itself', () => {
    let written = '';
    const stream = { columns: 20, write: (s: string) => ((written += s), true) };
    const line = new StatusLine(stream as unknown as NodeJS.WriteStream);
    line.show('0123456789012345678901234');
    line.show('short');
    line.clear();
    line.clear();
    expect(written).toBe('\r\x1b[2K012345678901234567…\r\x1b[2Kshort\r\x1b[2K');
  });
});
