/**
 * OpenTelemetry metrics and spans, through `@opentelemetry/api` only: without an SDK every
 * instrument is a no-op. The meter and tracer are named `@leasehold/core` with the package's
 * version and come from the global providers unless `connect({ telemetry })` names others.
 *
 * Typed events (`onLost`, `onStall`, ...) stay the primary hooks; this is additive, and neither a
 * provider nor a logger that throws can break the operation it reports on.
 */
import { createRequire } from 'node:module';
import {
  context,
  createNoopMeter,
  INVALID_SPAN_CONTEXT,
  ProxyTracerProvider,
  metrics,
  SpanKind,
  SpanStatusCode,
  trace,
  ValueType,
  type Attributes,
  type Counter,
  type Histogram,
  type Meter,
  type MeterProvider,
  type ObservableCallback,
  type ObservableGauge,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import { systemClock, type Clock } from './clock.js';
import { isLeaseholdError, type LeaseLostError } from './errors.js';
import { endpointOf } from './transport/members.js';
import { errField, hex, type Logger } from './logger.js';
import { invalid } from './options.js';

/**
 * Where metrics and spans go, instead of the global providers: an OpenTelemetry SDK's
 * `MeterProvider` and `TracerProvider`. Typed by the one method used, so that a provider built
 * on another minor version of `@opentelemetry/api` than core's fits too.
 */
export interface TelemetryOptions {
  /** Default: the global one (`metrics.setGlobalMeterProvider`), a no-op until an SDK sets it. */
  meterProvider?: {
    /** Returns the meter of the instrumentation scope `name` (`@leasehold/core`). */
    getMeter(name: string, version?: string): object;
  };
  /** Default: the global one (`trace.setGlobalTracerProvider`), a no-op until an SDK sets it. */
  tracerProvider?: {
    /** Returns the tracer of the instrumentation scope `name` (`@leasehold/core`). */
    getTracer(name: string, version?: string): object;
  };
}

export const SCOPE = '@leasehold/core';
export const VERSION = (createRequire(import.meta.url)('../package.json') as { version: string })
  .version;

/** Every metric the SDK records, by name; units are UCUM. */
export const metricNames = {
  keepalive: 'leasehold.keepalive.duration',
  remaining: 'leasehold.lease.remaining',
  sessionsLost: 'leasehold.sessions.lost',
  acquisitions: 'leasehold.acquisitions',
  wait: 'leasehold.acquire.wait',
  handoffs: 'leasehold.handoffs',
  tokens: 'leasehold.tokens.issued',
  leadership: 'leasehold.leadership.changes',
  stalls: 'leasehold.stalls',
  stallDuration: 'leasehold.stall.duration',
  cronRuns: 'leasehold.cron.runs',
} as const;

export type AcquireKind = 'lock' | 'election' | 'semaphore' | 'rwlock';
/** How an acquisition (`acquire`, `tryAcquire`, `campaign`) ended. */
export type AcquireOutcome = 'acquired' | 'taken' | 'timeout' | 'aborted' | 'lost' | 'error';

/** What the acquisition metrics need of a held lock or leadership. */
interface Held {
  readonly token: bigint;
  readonly key: string;
  readonly session: { readonly leaseId: bigint };
  onLost(listener: () => void): Disposable;
}

/** What a session gauge reads. */
interface Live {
  readonly leaseId: bigint;
  timeLeftMs(): number;
}

export function validateTelemetry(value: unknown): TelemetryOptions {
  if (value === undefined) return {};
  const t = value as Record<string, unknown> | null;
  const has = (name: string, method: string) => {
    const provider = t?.[name] as Record<string, unknown> | undefined;
    return provider === undefined || typeof provider?.[method] === 'function';
  };
  if (typeof t !== 'object' || t === null || !has('meterProvider', 'getMeter')) {
    throw invalid(
      'telemetry',
      '{ meterProvider?: MeterProvider, tracerProvider?: TracerProvider }',
      value,
    );
  }
  if (!has('tracerProvider', 'getTracer')) {
    throw invalid('telemetry.tracerProvider', 'an OpenTelemetry TracerProvider', t.tracerProvider);
  }
  return t;
}

/**
 * Every instrument the SDK records, with its metric name, kind, description and unit (UCUM):
 * the one table they are made from.
 */
const INSTRUMENTS = {
  keepalive: {
    kind: 'histogram',
    description: 'Round trip of a lease keepalive: from its send to its answer',
    unit: 'ms',
  },
  remaining: {
    kind: 'gauge',
    description: "Time left before a live session's local lease deadline",
    unit: 'ms',
  },
  sessionsLost: {
    kind: 'counter',
    description: 'Sessions lost, by reason (deadline, gone, cluster-changed)',
    unit: '{session}',
  },
  acquisitions: {
    kind: 'counter',
    description: 'Lock acquisitions and election campaigns, by kind and outcome',
    unit: '{acquisition}',
  },
  wait: {
    kind: 'histogram',
    description: 'Time from joining a queue to being first in it (acquired or elected)',
    unit: 'ms',
  },
  handoffs: {
    kind: 'counter',
    description: 'Acquisitions that waited behind another holder and then got the lock or term',
    unit: '{handoff}',
  },
  tokens: {
    kind: 'counter',
    description: 'Fencing tokens issued to this process (locks acquired, terms won)',
    unit: '{token}',
  },
  leadership: {
    kind: 'counter',
    description: 'Changes of leadership held by this process (elected, lost, resigned)',
    unit: '{change}',
  },
  stalls: {
    kind: 'counter',
    description: 'Event-loop stalls at or above stallThresholdMs while sessions were live',
    unit: '{stall}',
  },
  stallDuration: {
    kind: 'histogram',
    description: 'How long the event loop was stalled (at least)',
    unit: 'ms',
  },
} as const satisfies Record<
  Exclude<keyof typeof metricNames, 'cronRuns'>,
  { kind: 'counter' | 'histogram' | 'gauge'; description: string; unit: string }
>;

type Instruments = {
  [K in keyof typeof INSTRUMENTS]: {
    counter: Counter;
    histogram: Histogram;
    gauge: ObservableGauge;
  }[(typeof INSTRUMENTS)[K]['kind']];
};

/** Makes every instrument of the table on `meter`. */
function instruments(meter: Meter): Instruments {
  const made: Record<string, unknown> = {};
  for (const [key, { kind, description, unit }] of Object.entries(INSTRUMENTS)) {
    const name = metricNames[key as keyof typeof INSTRUMENTS];
    const valueType = unit === 'ms' ? ValueType.DOUBLE : ValueType.INT;
    const options = { description, unit, valueType };
    made[key] =
      kind === 'counter'
        ? meter.createCounter(name, options)
        : kind === 'histogram'
          ? meter.createHistogram(name, options)
          : meter.createObservableGauge(name, options);
  }
  return made as Instruments;
}

/**
 * Whether anyone listens: a provider was given, or an OpenTelemetry SDK registered a global one
 * (before `connect()`). Without listeners every span, attribute map and counter call is skipped:
 * `@opentelemetry/api`'s no-op objects still cost allocations on every operation.
 */
function listening(options: TelemetryOptions): { tracing: boolean; metering: boolean } {
  const noopTracers = new ProxyTracerProvider().getDelegate();
  const global = trace.getTracerProvider() as { getDelegate?: () => unknown };
  const tracing =
    options.tracerProvider !== undefined ||
    typeof global.getDelegate !== 'function' ||
    global.getDelegate() !== noopTracers;
  const metering =
    options.meterProvider !== undefined ||
    metrics.getMeterProvider().getMeter(SCOPE).constructor !== createNoopMeter().constructor;
  return { tracing, metering };
}

/** The SDK's logger, meter and tracer, one per client. */
export class Telemetry {
  readonly log: Logger;
  readonly meter: Meter;
  readonly #tracer: Tracer;
  readonly #clock: Clock;
  readonly #i: Instruments;
  /** Spans are made (a tracer provider listens). */
  readonly #tracing: boolean;
  /** Counters and histograms are recorded (a meter provider listens). */
  readonly #metering: boolean;

  constructor(log: Logger, options: TelemetryOptions = {}, clock: Clock = systemClock) {
    this.log = log;
    this.#clock = clock;
    ({ tracing: this.#tracing, metering: this.#metering } = listening(options));
    const meters = (options.meterProvider as MeterProvider) ?? metrics.getMeterProvider();
    const tracers = (options.tracerProvider as TracerProvider) ?? trace.getTracerProvider();
    this.meter = orElse(() => meters.getMeter(SCOPE, VERSION), createNoopMeter, log);
    this.#tracer = orElse(
      () => tracers.getTracer(SCOPE, VERSION),
      () => new ProxyTracerProvider().getTracer(SCOPE),
      log,
    );
    // A provider whose instruments throw (or are missing) gets no-op ones: never a failed connect.
    this.#i = orElse(
      () => instruments(this.meter),
      () => instruments(createNoopMeter()),
      log,
    );
  }

  /**
   * Reports each live session's time left through the remaining-lease gauge until the returned
   * function is called.
   */
  observeSessions(sessions: () => Iterable<Live>): () => void {
    const gauge: ObservableCallback = (result) => {
      try {
        for (const s of sessions()) {
          result.observe(Math.max(0, s.timeLeftMs()), { lease_id: hex(s.leaseId) });
        }
      } catch {
        // never break the provider's collection
      }
    };
    this.#safely(() => this.#i.remaining.addCallback(gauge));
    return () => this.#safely(() => this.#i.remaining.removeCallback(gauge));
  }

  keepalive(roundTripMs: number): void {
    if (this.#metering) this.#safely(() => this.#i.keepalive.record(roundTripMs));
  }

  /** A session ended: counted and logged if lost, logged if closed. */
  sessionEnded(error: LeaseLostError): void {
    const fields = { leaseId: hex(error.leaseId), reason: error.reason };
    if (error.reason === 'closed') return this.log.debug(fields, 'session closed');
    this.#safely(() => this.#i.sessionsLost.add(1, { reason: error.reason }));
    this.log.warn({ ...fields, err: errField(error) }, `session lost (${error.reason})`);
  }

  /**
   * A session's keepalive stream changed: `opened` (on `endpoint`), `open-failed` and `broken`
   * (reopened in `delayMs`), `stuck` (a keepalive unanswered for `answerTimeoutMs`: reopened at
   * once, on whichever member answers).
   */
  keepaliveStream(
    event: 'opened' | 'open-failed' | 'broken' | 'stuck',
    leaseId: bigint,
    details: {
      endpoint?: string | undefined;
      err?: unknown;
      delayMs?: number;
      answerTimeoutMs?: number;
    },
  ): void {
    const { endpoint, err, ...rest } = details;
    const fields = {
      leaseId: hex(leaseId),
      ...(endpoint === undefined ? {} : { endpoint }),
      ...rest,
      ...(err === undefined ? {} : { err: errField(err) }),
    };
    if (event === 'opened') return this.log.debug(fields, 'keepalive stream opened');
    if (event === 'stuck') {
      return this.log.warn(fields, 'keepalive unanswered; reopening the keepalive stream');
    }
    const what = event === 'broken' ? 'keepalive stream broke' : 'keepalive stream open failed';
    this.log.warn({ what: 'keepalive stream', ...fields }, `${what}; retrying`);
  }

  stalled(stalledMs: number): void {
    this.#safely(() => {
      this.#i.stalls.add(1);
      this.#i.stallDuration.record(stalledMs);
    });
  }

  /** A leadership transition of this process. */
  leadership(transition: 'elected' | 'lost' | 'resigned'): void {
    this.#safely(() => this.#i.leadership.add(1, { transition }));
  }

  /**
   * Runs one acquisition (`run` calls `joined(entry)` once its key is in the queue) inside a span
   * from the call to the lock or term held, or to the failure; counts it by outcome, and on
   * success records the wait, the handoff (waited behind a holder), the token and, for an
   * election, the leadership change.
   */
  async acquisition<H extends Held>(
    kind: AcquireKind,
    spanName: string,
    name: string,
    options: unknown,
    run: (joined: (entry: { holder?: unknown }) => void) => Promise<H>,
  ): Promise<H> {
    if (!this.#tracing && !this.#metering) return run(ignore);
    let joinedAt: number | undefined;
    let behind = false;
    const joined = (entry: { holder?: unknown }) => {
      joinedAt = this.#clock.now();
      behind = entry.holder !== undefined;
    };
    const attributes = {
      'leasehold.kind': kind,
      'leasehold.name': typeof name === 'string' ? name : typeof name,
    };
    return this.span(spanName, attributes, async (annotate) => {
      let held: H;
      try {
        held = await run(joined);
      } catch (err) {
        const outcome = outcomeOf(err, options);
        annotate({ 'leasehold.outcome': outcome });
        this.#safely(() => this.#i.acquisitions.add(1, { kind, outcome }));
        throw err;
      }
      annotate({
        'leasehold.outcome': 'acquired',
        'leasehold.token': held.token.toString(),
        'leasehold.key': held.key,
        'leasehold.lease_id': hex(held.session.leaseId),
      });
      this.#safely(() => {
        this.#i.acquisitions.add(1, { kind, outcome: 'acquired' });
        this.#i.tokens.add(1, { kind });
        if (joinedAt !== undefined) this.#i.wait.record(this.#clock.now() - joinedAt, { kind });
        if (behind) this.#i.handoffs.add(1, { kind });
      });
      if (kind === 'election') {
        this.leadership('elected');
        held.onLost(() => this.leadership('lost'));
      }
      return held;
    });
  }

  /**
   * Runs `fn` in a span named `name` (`annotate` adds attributes to it): errors are recorded on
   * it (status ERROR, with the endpoint the failed call went to when known) and rethrown. A
   * provider that throws costs the span, never the operation.
   */
  async span<T>(
    name: string,
    attributes: Attributes | (() => Attributes),
    fn: (annotate: (attributes: Attributes) => void) => Promise<T>,
  ): Promise<T> {
    if (!this.#tracing) return fn(ignore);
    let span: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    this.#safely(() => {
      span = this.#tracer.startSpan(name, {
        kind: SpanKind.INTERNAL,
        attributes: typeof attributes === 'function' ? attributes() : attributes,
      });
    });
    const annotate = (more: Attributes) => this.#safely(() => span.setAttributes(more));
    try {
      return await context.with(trace.setSpan(context.active(), span), () => fn(annotate));
    } catch (err) {
      const endpoint = endpointOf(err);
      this.#safely(() => {
        span.recordException(err instanceof Error ? err : String(err));
        if (endpoint !== undefined) span.setAttribute('leasehold.endpoint', endpoint);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      });
      throw err;
    } finally {
      this.#safely(() => span.end());
    }
  }

  #safely(fn: () => void): void {
    try {
      fn();
    } catch {
      // a broken provider loses a data point, never the SDK's work
    }
  }
}

const ignore = () => {};

/** `make()`, or the no-op `fallback()` if the user's provider throws. */
function orElse<T>(make: () => T, fallback: () => T, log: Logger): T {
  try {
    return make();
  } catch (err) {
    log.warn({ err: errField(err) }, 'telemetry provider failed; its metrics or spans are off');
    return fallback();
  }
}

function outcomeOf(err: unknown, options: unknown): AcquireOutcome {
  const signal = (options as { signal?: unknown } | null | undefined)?.signal;
  if (signal instanceof AbortSignal && signal.aborted && signal.reason === err) return 'aborted';
  if (!isLeaseholdError(err)) return 'error';
  switch (err.code) {
    case 'LOCK_TAKEN':
      return 'taken';
    case 'LOCK_TIMEOUT':
    case 'CAMPAIGN_TIMEOUT':
      return 'timeout';
    case 'LEASE_LOST':
    case 'SESSION_CLOSED':
    case 'CLUSTER_CHANGED':
    case 'LOCK_LOST':
    case 'LEADERSHIP_LOST':
      return 'lost';
    default:
      return 'error';
  }
}
