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
import { endpointOf } from './endpoint.js';
import { errField, hex, silentLogger, type Logger } from './logger.js';
import { invalid } from './options.js';

/**
 * Where metrics and spans go, instead of the global providers: an OpenTelemetry SDK's
 * `MeterProvider` and `TracerProvider`. Typed by the one method used, so that a provider built
 * on another minor version of `@opentelemetry/api` than core's fits too.
 */
export interface TelemetryOptions {
  /** Default: the global one (`metrics.setGlobalMeterProvider`), a no-op until an SDK sets it. */
  meterProvider?: { getMeter(name: string, version?: string): object };
  /** Default: the global one (`trace.setGlobalTracerProvider`), a no-op until an SDK sets it. */
  tracerProvider?: { getTracer(name: string, version?: string): object };
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

export type AcquireKind = 'lock' | 'election';
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
  remainingMs(): number;
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

/** The SDK's logger, meter and tracer, one per client. */
export class Telemetry {
  readonly log: Logger;
  readonly meter: Meter;
  readonly #tracer: Tracer;
  readonly #clock: Clock;
  readonly #keepalive: Histogram;
  readonly #remaining: ObservableGauge;
  readonly #sessionsLost: Counter;
  readonly #acquisitions: Counter;
  readonly #wait: Histogram;
  readonly #handoffs: Counter;
  readonly #tokens: Counter;
  readonly #leadership: Counter;
  readonly #stalls: Counter;
  readonly #stallDuration: Histogram;

  constructor(log: Logger, options: TelemetryOptions = {}, clock: Clock = systemClock) {
    this.log = log;
    this.#clock = clock;
    const meters = (options.meterProvider as MeterProvider) ?? metrics.getMeterProvider();
    const tracers = (options.tracerProvider as TracerProvider) ?? trace.getTracerProvider();
    this.meter = orElse(() => meters.getMeter(SCOPE, VERSION), createNoopMeter, log);
    this.#tracer = orElse(
      () => tracers.getTracer(SCOPE, VERSION),
      () => new ProxyTracerProvider().getTracer(SCOPE),
      log,
    );
    // A provider whose instruments throw (or are missing) gets no-op ones: never a failed connect.
    const noop = createNoopMeter();
    const instrument = <T>(create: (meter: Meter) => T): T =>
      orElse(
        () => create(this.meter),
        () => create(noop),
        log,
      );
    const ms = { unit: 'ms', valueType: ValueType.DOUBLE };
    const count = (unit: string) => ({ unit, valueType: ValueType.INT });
    this.#keepalive = instrument((m) =>
      m.createHistogram(metricNames.keepalive, {
        description: 'Round trip of a lease keepalive: from its send to its answer',
        ...ms,
      }),
    );
    this.#remaining = instrument((m) =>
      m.createObservableGauge(metricNames.remaining, {
        description: "Time left before a live session's local lease deadline",
        ...ms,
      }),
    );
    this.#sessionsLost = instrument((m) =>
      m.createCounter(metricNames.sessionsLost, {
        description: 'Sessions lost, by reason (deadline, gone, cluster-changed)',
        ...count('{session}'),
      }),
    );
    this.#acquisitions = instrument((m) =>
      m.createCounter(metricNames.acquisitions, {
        description: 'Lock acquisitions and election campaigns, by kind and outcome',
        ...count('{acquisition}'),
      }),
    );
    this.#wait = instrument((m) =>
      m.createHistogram(metricNames.wait, {
        description: 'Time from joining a queue to being first in it (acquired or elected)',
        ...ms,
      }),
    );
    this.#handoffs = instrument((m) =>
      m.createCounter(metricNames.handoffs, {
        description: 'Acquisitions that waited behind another holder and then got the lock or term',
        ...count('{handoff}'),
      }),
    );
    this.#tokens = instrument((m) =>
      m.createCounter(metricNames.tokens, {
        description: 'Fencing tokens issued to this process (locks acquired, terms won)',
        ...count('{token}'),
      }),
    );
    this.#leadership = instrument((m) =>
      m.createCounter(metricNames.leadership, {
        description: 'Changes of leadership held by this process (elected, lost, resigned)',
        ...count('{change}'),
      }),
    );
    this.#stalls = instrument((m) =>
      m.createCounter(metricNames.stalls, {
        description: 'Event-loop stalls at or above stallThresholdMs while sessions were live',
        ...count('{stall}'),
      }),
    );
    this.#stallDuration = instrument((m) =>
      m.createHistogram(metricNames.stallDuration, {
        description: 'How long the event loop was stalled (at least)',
        ...ms,
      }),
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
          result.observe(Math.max(0, s.remainingMs()), { lease_id: hex(s.leaseId) });
        }
      } catch {
        // never break the provider's collection
      }
    };
    this.#safely(() => this.#remaining.addCallback(gauge));
    return () => this.#safely(() => this.#remaining.removeCallback(gauge));
  }

  keepalive(roundTripMs: number): void {
    this.#safely(() => this.#keepalive.record(roundTripMs));
  }

  /** A session ended: counted and logged if lost, logged if closed. */
  sessionEnded(error: LeaseLostError): void {
    const fields = { leaseId: hex(error.leaseId), reason: error.reason };
    if (error.reason === 'closed') return this.log.debug(fields, 'session closed');
    this.#safely(() => this.#sessionsLost.add(1, { reason: error.reason }));
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
      this.#stalls.add(1);
      this.#stallDuration.record(stalledMs);
    });
  }

  /** A leadership transition of this process. */
  leadership(transition: 'elected' | 'lost' | 'resigned'): void {
    this.#safely(() => this.#leadership.add(1, { transition }));
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
        this.#safely(() => this.#acquisitions.add(1, { kind, outcome }));
        throw err;
      }
      annotate({
        'leasehold.outcome': 'acquired',
        'leasehold.token': held.token.toString(),
        'leasehold.key': held.key,
        'leasehold.lease_id': hex(held.session.leaseId),
      });
      this.#safely(() => {
        this.#acquisitions.add(1, { kind, outcome: 'acquired' });
        this.#tokens.add(1, { kind });
        if (joinedAt !== undefined) this.#wait.record(this.#clock.now() - joinedAt, { kind });
        if (behind) this.#handoffs.add(1, { kind });
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
    attributes: Attributes,
    fn: (annotate: (attributes: Attributes) => void) => Promise<T>,
  ): Promise<T> {
    let span: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    this.#safely(() => {
      span = this.#tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes });
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

/** Telemetry for clients that were given none (test doubles): global providers, no logs. */
export const defaultTelemetry = new Telemetry(silentLogger);

/** The telemetry an etcd connection reports through. */
export const telemetryOf = (etcd: { options?: { telemetry?: Telemetry | undefined } }): Telemetry =>
  etcd?.options?.telemetry ?? defaultTelemetry;
