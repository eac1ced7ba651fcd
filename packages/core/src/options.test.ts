import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError } from './errors.js';
import { prefixEnd } from './keys.js';
import {
  checkOptions,
  defaultSafetyMarginMs,
  encodeName,
  validateAuth,
  validateDurationMs,
  validateEndpoints,
  validateSafetyMarginMs,
  validateTls,
  validateTtlSeconds,
} from './options.js';

function rejects(fn: () => unknown, pattern: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(isInvalidArgumentError(thrown), String(thrown)).toBe(true);
  expect((thrown as Error).message).toMatch(pattern);
}

describe('options objects', () => {
  it('refuses a key that is not an option, naming it and what is allowed', () => {
    const options = { timeOutMs: 5 } as { timeoutMs?: number; signal?: AbortSignal };
    expect(() => checkOptions(options, ['timeoutMs', 'signal'])).toThrow(
      /^options\.timeOutMs must be left out \(not an option; allowed: timeoutMs, signal\), got number$/,
    );
  });

  it("names only the type of an unknown key's value, so a misspelt secret stays out of the message", () => {
    const auth = { username: 'u', pasword: 'hunter2' } as { username?: string; password?: string };
    expect(() => checkOptions(auth, ['username', 'password'], { name: 'auth' })).toThrow(
      /^auth\.pasword must be left out \(not an option; allowed: username, password\), got string$/,
    );
    for (const [value, type] of [
      [undefined, 'undefined'],
      [null, 'null'],
      [[1], 'an array'],
      [{}, 'object'],
      [1n, 'bigint'],
    ] as const) {
      expect(() => checkOptions({ x: value }, [])).toThrow(new RegExp(`got ${type}$`));
    }
  });

  it('accepts hidden keys without listing them as allowed', () => {
    const options = { clock: 1, timeOutMs: 5 } as { timeoutMs?: number; clock?: number };
    const hidden: { timeoutMs?: number; clock?: number } = { clock: 1 };
    expect(checkOptions(hidden, ['timeoutMs'], { hidden: ['clock'] })).toBe(hidden);
    expect(() => checkOptions(options, ['timeoutMs'], { hidden: ['clock'] })).toThrow(
      /^options\.timeOutMs must be left out \(not an option; allowed: timeoutMs\), got number$/,
    );
  });

  it('throws the class it is given, in the same wording', () => {
    class Theirs extends Error {}
    const err = (() => {
      try {
        checkOptions({ ttl: 'x' } as { ttlSeconds?: number }, ['ttlSeconds'], {
          name: 'task',
          as: Theirs,
        });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(Theirs);
    expect((err as Error).message).toBe(
      'task.ttl must be left out (not an option; allowed: ttlSeconds), got string',
    );
    expect(() => checkOptions(7 as never, [], { what: 'an object { a? }', as: Theirs })).toThrow(
      new Theirs('options must be an object { a? }, got 7'),
    );
  });

  it('accepts known keys, also with undefined values', () => {
    const options = { timeoutMs: undefined, signal: undefined };
    expect(checkOptions(options, ['timeoutMs', 'signal'])).toBe(options);
  });

  it.each([null, 42, 'x', []])('refuses %j, which is not an options object', (options) => {
    let err: unknown;
    try {
      checkOptions(options as object, [], { name: 'session' });
    } catch (e) {
      err = e;
    }
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toMatch(/^session must be an object/);
  });
});

describe('ttlSeconds', () => {
  it.each([0, -1, 1, 1.5, Number.NaN, Infinity, '10', 9_000_000_001, null])('rejects %s', (v) =>
    rejects(
      () => validateTtlSeconds(v),
      /ttlSeconds must be a whole number of seconds from 2 .* to 9000000000/,
    ),
  );
  it('accepts the bounds', () => {
    expect(validateTtlSeconds(2)).toBe(2);
    expect(validateTtlSeconds(9_000_000_000)).toBe(9_000_000_000);
  });
  it('names the value it got', () => rejects(() => validateTtlSeconds('10'), /got "10"/));
});

describe('safetyMarginMs', () => {
  it.each([-1, 2_000, 5_000, Number.NaN, '1'])('rejects %s for a 2 s TTL', (v) =>
    rejects(() => validateSafetyMarginMs(v, 2), /safetyMarginMs must be .* in \[0, 2000\)/),
  );
  it('accepts 0 and just under the TTL', () => {
    expect(validateSafetyMarginMs(0, 2)).toBe(0);
    expect(validateSafetyMarginMs(1_999, 2)).toBe(1_999);
  });
  it('defaults to 10% of the TTL, at most 1 s', () => {
    expect(defaultSafetyMarginMs(2)).toBe(200);
    expect(defaultSafetyMarginMs(60)).toBe(1_000);
  });
});

describe('durations', () => {
  it.each([0, -5, Number.NaN, Infinity, '100'])('rejects timeoutMs %s', (v) =>
    rejects(
      () => validateDurationMs('timeoutMs', v),
      /timeoutMs must be a positive, finite number/,
    ),
  );
});

describe('endpoints', () => {
  it('normalises host:port and full URLs', () => {
    expect(validateEndpoints('127.0.0.1:2379')).toEqual(['http://127.0.0.1:2379']);
    expect(validateEndpoints(['http://a:1', 'http://b:2'])).toEqual(['http://a:1', 'http://b:2']);
    expect(validateEndpoints('http://a:1,http://b:2')).toEqual(['http://a:1', 'http://b:2']);
  });
  it.each<[unknown, RegExp]>([
    [[], /non-empty/],
    ['', /endpoint must be/],
    [undefined, /non-empty/],
    ['http://:2379', /no host|not a valid URL/],
    ['http://host', /needs a port/],
    ['http://host:0', /needs a port/],
    ['http://host:70000', /needs a port/],
    ['http://host:2379/v3', /path, query or fragment/],
    ['http://host:2379?x=1', /path, query or fragment/],
    ['ftp://host:21', /only http and https/],
    ['http://user:pw@host:2379', /credentials/],
    [['http://a:1', 'a:1'], /twice/],
    [['http://a:1', 'https://b:2'], /mix http and https/],
  ])('rejects %j', (v, pattern) => rejects(() => validateEndpoints(v), pattern));

  it.each([
    'http://root:hunter2@host:2379',
    'root:hunter2@host:2379',
    'https://hunter2@host:1',
    ' http://root:hunter2@host:2379 ',
    '\thttps://root:hunter2@host:1',
    'HTTP://root:hunter2@host:1',
    'http://a@b:hunter2@host:1',
    'http://root:pa/hunter2@host:1',
    'http://root:hunter2#x@host:1',
    'http://root:hunter2?x@host:1',
    '1http://root:hunter2@host:1',
    'http:///root:hunter2@host:1',
    '//root:hunter2@host:1',
  ])('refuses credentials in %j without repeating them', (endpoint) => {
    rejects(() => validateEndpoints(endpoint), /^endpoint ".*\*\*\*@.*" carries credentials/);
    expect(() => validateEndpoints(endpoint)).not.toThrow(/hunter2/);
  });

  it.each([
    'http://a:2379, http://root:hunter2@b:2379',
    ['http://a:2379', ' https://root:hunter2@b:2379'],
    'http://host:1?user=root&password=hunter2',
    'http://host:1/#hunter2',
  ])('never repeats a credential of %j in any message', (endpoints) => {
    rejects(() => validateEndpoints(endpoints), /^endpoint /);
    expect(() => validateEndpoints(endpoints)).not.toThrow(/hunter2/);
  });
});

describe('names', () => {
  it('leaves plain names as they are (interoperable with etcdctl lock)', () => {
    expect(encodeName('jobs')).toBe('jobs');
  });
  it('escapes "/" and "%" so that "jobs" and "jobs/a" never share a range', () => {
    expect(encodeName('jobs/a')).toBe('jobs%2Fa');
    expect(encodeName('50%')).toBe('50%25');
    expect(`${encodeName('jobs/a')}/`.startsWith(`${encodeName('jobs')}/`)).toBe(false);
  });
  it.each(['', 42, null, 'a\0b', 'x'.repeat(1025), 'job-\uD800', 'job-\uDFFF', '\uDC00\uD800'])(
    'rejects %j',
    (v) =>
      rejects(() => encodeName(v), /name must be a non-empty string of at most 1024 characters/),
  );
  it('rejects ill-formed UTF-16: two lone surrogates would otherwise share one key', () => {
    expect(Buffer.from('job-\uD800').equals(Buffer.from('job-\uDFFF'))).toBe(true);
    rejects(() => encodeName('job-\uD800'), /unpaired surrogates/);
    expect(encodeName('job-\uD83D\uDE00')).toBe('job-\uD83D\uDE00'); // a well-formed pair is fine
  });
  it('computes the end of a prefix range', () => {
    expect(prefixEnd('a/').toString()).toBe('a0');
    expect(prefixEnd('a\u00ff').equals(Buffer.from([0x61, 0xc3, 0xc0]))).toBe(true);
  });
});

describe('tls and auth', () => {
  it('needs a CA, and client cert and key together', () => {
    const https = ['https://a:1'];
    const caCert = '-----BEGIN CERTIFICATE-----\n...';
    expect(validateTls({ caCert }, https)).toEqual({ caCert });
    rejects(() => validateTls({}, https), /tls must be an object with caCert/);
    rejects(
      () => validateTls({ caCert, clientKey: 'k' }, https),
      /together .* got only tls\.clientKey$/,
    );
    rejects(() => validateTls({ caCert, clientCert: 'c' }, https), /got only tls\.clientCert$/);
    rejects(() => validateTls({ caCert }, ['http://a:1']), /https/);
  });
  it('rejects material that is not PEM, naming the field', () => {
    const https = ['https://a:1'];
    rejects(() => validateTls({ caCert: 'not a certificate' }, https), /^tls\.caCert must be PEM/);
    const caCert = '-----BEGIN CERTIFICATE-----\n...';
    rejects(
      () => validateTls({ caCert, clientCert: 'c', clientKey: 'k' }, https),
      /^tls\.clientCert and tls\.clientKey must be a PEM certificate and its own private key/,
    );
  });
  it('needs a user name and a password string', () => {
    expect(validateAuth(undefined)).toBeUndefined();
    expect(validateAuth({ username: 'u', password: '' })).toEqual({ username: 'u', password: '' });
    rejects(() => validateAuth({ username: '', password: 'p' }), /auth must be/);
    rejects(() => validateAuth({ username: 'u' }), /auth must be/);
  });
  it('never puts a credential or a private key in a message', () => {
    const https = ['https://a:1'];
    const caCert = '-----BEGIN CERTIFICATE-----\n...';
    const key = '-----BEGIN PRIVATE KEY-----\nSECRET';
    const cases: [() => unknown, RegExp][] = [
      [() => validateAuth('user:SECRET'), /^auth must be an object .*, got string$/],
      [() => validateAuth({ username: 'u', pasword: 'SECRET' }), /got object$/],
      [
        () => validateAuth({ username: 'u', password: 'p', pasword: 'SECRET' }),
        /^auth\.pasword must be left out .*, got string$/,
      ],
      [() => validateAuth({ username: '', password: 'SECRET' }), /got object$/],
      [() => validateTls(key, https), /^tls must be an object with caCert .*, got string$/],
      [
        () => validateTls({ caCert, clientCert: null, clientKey: key }, https),
        /got null and string$/,
      ],
      [() => validateTls({ caCert, clientKy: key }, https), /^tls\.clientKy must be left out/],
    ];
    for (const [call, message] of cases) {
      rejects(call, message);
      expect(call).not.toThrow(/SECRET/);
    }
  });
});
