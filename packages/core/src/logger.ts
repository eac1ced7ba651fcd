/**
 * The SDK's log lines. The interface is pino's (an object of fields first, then a message), so a
 * pino logger (or a child of one) can be passed as it is; any object with the four methods works.
 *
 * Fields are JSON-safe (no bigint): lease ids in lowercase hex (as in keys and messages), tokens
 * and revisions as decimal strings, errors as `err` (the Error itself, as pino expects). Every
 * line about a call or a stream names the etcd `endpoint` it went to when one is known.
 */
import { invalid } from './options.js';

/** One log method: an object of fields first, then the message (pino's order). */
export type LogFn = (fields: object, message?: string) => void;

/** What the SDK logs to: pino's interface (`logger.warn({ endpoint }, 'message')`). */
export interface Logger {
  /** Retries, failovers and other details of normal operation. */
  debug: LogFn;
  /** Connects, closes, elections won and other changes of state. */
  info: LogFn;
  /** Something lost or at risk: a session, a hold, a stall, a clean-up that failed. */
  warn: LogFn;
  /** Failures the caller must act on: a connect that failed, an etcd cluster that changed. */
  error: LogFn;
}

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;

const ignore: LogFn = () => {};

/** Logs nothing: the default. */
export const silentLogger: Logger = { debug: ignore, info: ignore, warn: ignore, error: ignore };

/**
 * Validates `value` as a logger and returns one that never throws: a logger that fails (a broken
 * transport, a serialiser that chokes) must not break the lock or lease operation it reports on.
 * Methods are called on the original object, so pino's `this` stays bound.
 */
export function toLogger(value: unknown): Logger {
  if (value === undefined) return silentLogger;
  const target = value as Record<string, unknown> | null;
  const missing =
    typeof target === 'object' && target !== null
      ? LEVELS.filter((level) => typeof target[level] !== 'function')
      : LEVELS;
  if (missing.length > 0) {
    throw invalid(
      'logger',
      `an object with debug, info, warn and error methods (a pino logger works; missing: ${missing.join(', ')})`,
      value,
    );
  }
  const call =
    (level: (typeof LEVELS)[number]): LogFn =>
    (fields, message) => {
      try {
        (target![level] as LogFn).call(target, fields, message);
      } catch {
        // A throwing logger loses its line, never the SDK's work.
      }
    };
  return { debug: call('debug'), info: call('info'), warn: call('warn'), error: call('error') };
}

/**
 * An error as the `err` field: the error itself, which pino's serialiser turns into `type`
 * (its class), `message`, `stack`, `code` and its causes; anything else thrown, as a message.
 */
export function errField(err: unknown): Error | { message: string } {
  return err instanceof Error ? err : { message: String(err) };
}

/** A lease id as it appears in keys and messages. */
export const hex = (leaseId: bigint): string => leaseId.toString(16);
