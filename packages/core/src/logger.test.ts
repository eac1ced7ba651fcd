import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError, LockLostError } from './errors.js';
import { errField, silentLogger, toLogger } from './logger.js';

/** A pino-shaped logger whose methods need `this` (as pino's do). */
class Recorder {
  readonly lines: { level: string; fields: object; message?: string }[] = [];
  #push(level: string, fields: object, message?: string) {
    this.lines.push({ level, fields, ...(message === undefined ? {} : { message }) });
  }
  debug(fields: object, message?: string) {
    this.#push('debug', fields, message);
  }
  info(fields: object, message?: string) {
    this.#push('info', fields, message);
  }
  warn(fields: object, message?: string) {
    this.#push('warn', fields, message);
  }
  error(fields: object, message?: string) {
    this.#push('error', fields, message);
  }
}

describe('toLogger', () => {
  it('is silent when no logger is given', () => {
    expect(toLogger(undefined)).toBe(silentLogger);
    expect(() => silentLogger.error({ a: 1 }, 'nothing happens')).not.toThrow();
  });

  it('calls each method on the logger itself, so a pino instance works as it is', () => {
    const recorder = new Recorder();
    const log = toLogger(recorder);
    log.warn({ endpoint: 'http://a:1' }, 'member failed');
    log.debug({ n: 1 });
    expect(recorder.lines).toEqual([
      { level: 'warn', fields: { endpoint: 'http://a:1' }, message: 'member failed' },
      { level: 'debug', fields: { n: 1 } },
    ]);
  });

  it('rejects what is not a logger with InvalidArgumentError naming the missing methods', () => {
    for (const bad of [null, 'console', 42, { info: () => {} }, { ...console, error: 'x' }]) {
      const err = (() => {
        try {
          toLogger(bad);
        } catch (e) {
          return e;
        }
      })();
      expect(isInvalidArgumentError(err)).toBe(true);
      expect((err as Error).message).toMatch(/^logger must be an object with debug, info, warn/);
    }
    expect(() => toLogger({ info: () => {} })).toThrow(/missing: debug, warn, error/);
  });

  it('swallows a throwing logger: the SDK operation it reports on goes on', () => {
    const boom = () => {
      throw new Error('transport down');
    };
    const log = toLogger({ debug: boom, info: boom, warn: boom, error: boom });
    expect(() => log.error({}, 'x')).not.toThrow();
    expect(() => log.info({}, 'x')).not.toThrow();
  });
});

describe('errField', () => {
  it("passes an error as it is (for pino's serialiser), anything else as a message", () => {
    const err = new LockLostError('deleted', '/k/1', 7n, 'lock /k/1 is lost');
    expect(errField(err)).toBe(err);
    expect(errField('plain')).toEqual({ message: 'plain' });
  });
});
