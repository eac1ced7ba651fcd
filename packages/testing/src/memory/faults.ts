/**
 * Faults a test plants in the in-memory etcd's unary calls (KV and lease calls; keepalives and
 * watches are streams and keep flowing): the next calls fail as if etcd were unreachable (the
 * request never arrives, so the SDK may retry), or hang until their deadline (with the request
 * applied or not: a write that landed whose answer was lost).
 */
import { invalid } from './invalid.js';

export type Fault = { kind: 'fail' } | { kind: 'hang'; applied: boolean };

/** The calls a fault can be aimed at. */
export type FaultTarget = 'any' | 'kv' | 'lease';

const TARGETS: readonly FaultTarget[] = ['any', 'kv', 'lease'];

/** Which calls `failNext` fails, and how many. */
export interface FailOptions {
  /** How many calls fail. Default 1. */
  count?: number;
  /** Which calls: KV (range, txn, put, delete), lease (grant, revoke, time-to-live), or any. */
  only?: FaultTarget;
}

/** Which calls `hangNext` never answers, how many, and whether etcd applies them. */
export interface HangOptions extends FailOptions {
  /** Whether etcd applies the request it never answers. Default false. */
  applied?: boolean;
}

interface Planted {
  fault: Fault;
  only: FaultTarget;
  left: number;
}

export class MemoryFaults {
  readonly #planted: Planted[] = [];

  /** The next `count` calls (of `only`) fail as unreachable; the request never reaches etcd. */
  failNext(options: FailOptions = {}): void {
    this.#plant({ kind: 'fail' }, options, 'failNext');
  }

  /** The next `count` calls (of `only`) get no answer until their deadline. */
  hangNext(options: HangOptions = {}): void {
    const applied = options.applied ?? false;
    if (typeof applied !== 'boolean') {
      throw invalid('hangNext options.applied', 'true or false', applied);
    }
    this.#plant({ kind: 'hang', applied }, options, 'hangNext');
  }

  /** Removes every fault not yet used. */
  clear(): void {
    this.#planted.length = 0;
  }

  /** The fault for a call to `target`, if one is planted (used up by this call). */
  take(target: Exclude<FaultTarget, 'any'>): Fault | undefined {
    const i = this.#planted.findIndex((p) => p.only === 'any' || p.only === target);
    if (i < 0) return undefined;
    const planted = this.#planted[i]!;
    if (--planted.left === 0) this.#planted.splice(i, 1);
    return planted.fault;
  }

  #plant(fault: Fault, options: FailOptions, what: string): void {
    const count = options.count ?? 1;
    if (!(Number.isInteger(count) && count >= 1)) {
      throw invalid(`${what} options.count`, 'a whole number of calls, 1 or more', count);
    }
    const only = options.only ?? 'any';
    if (!TARGETS.includes(only)) {
      throw invalid(`${what} options.only`, `one of ${TARGETS.join(', ')}`, only);
    }
    this.#planted.push({ fault, only, left: count });
  }
}
