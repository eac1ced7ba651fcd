import type { MeterProvider, ObservableCallback, TracerProvider } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { fakeClock } from './clock.fake.js';
import {
  EtcdUnavailableError,
  isInvalidArgumentError,
  LeaseLostError,
  LockTakenError,
  LockTimeoutError,
  SessionClosedError,
} from './errors.js';
import { recordingLogger } from './logger.fake.js';
import { metricNames, SCOPE, Telemetry, validateTelemetry, VERSION } from './telemetry.js';

interface Point {
  name: string;
  value: number;
  attributes: Record<string, unknown>;
}

interface FakeSpan {
  name: string;
  attributes: Record<string, unknown>;
  status?: { code: number; message?: string };
  exceptions: unknown[];
  ended: boolean;
}

/** Providers that record what the SDK reports, in the shape of OpenTelemetry's API. */
function recording() {
  const points: Point[] = [];
  const spans: FakeSpan[] = [];
  const callbacks = new Set<ObservableCallback>();
  const scopes: string[] = [];
  const instrument = (name: string) => {
    const push = (value: number, attributes: Record<string, unknown> = {}) =>
      void points.push({ name, value, attributes });
    return { add: push, record: push };
  };
  const meter = {
    createCounter: instrument,
    createHistogram: instrument,
    createObservableGauge: () => ({
      addCallback: (cb: ObservableCallback) => void callbacks.add(cb),
      removeCallback: (cb: ObservableCallback) => void callbacks.delete(cb),
    }),
  };
  const meterProvider = {
    getMeter: (name: string, version: string) => (scopes.push(`${name}@${version}`), meter),
  } as unknown as MeterProvider;
  const tracer = {
    startSpan: (name: string, options: { attributes?: Record<string, unknown> }) => {
      const span: FakeSpan = {
        name,
        attributes: { ...options.attributes },
        exceptions: [],
        ended: false,
      };
      spans.push(span);
      return {
        setAttributes: (a: Record<string, unknown>) => Object.assign(span.attributes, a),
        setAttribute: (k: string, v: unknown) => void (span.attributes[k] = v),
        setStatus: (s: FakeSpan['status']) => void (span.status = s),
        recordException: (e: unknown) => void span.exceptions.push(e),
        end: () => void (span.ended = true),
        spanContext: () => ({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 }),
        isRecording: () => true,
      };
    },
  };
  const tracerProvider = { getTracer: () => tracer } as unknown as TracerProvider;
  /** Runs the gauge callbacks as a collection would. */
  const collect = () => {
    const observed: Point[] = [];
    for (const cb of callbacks) {
      void cb({
        observe: (value: number, attributes: Record<string, unknown> = {}) =>
          void observed.push({ name: metricNames.remaining, value, attributes }),
      });
    }
    return observed;
  };
  const sum = (name: string, attributes: Record<string, unknown> = {}) =>
    points
      .filter((p) => p.name === name)
      .filter((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))
      .reduce((total, p) => total + p.value, 0);
  return { points, spans, callbacks, scopes, meterProvider, tracerProvider, collect, sum };
}

function setup() {
  const clock = fakeClock();
  const rec = recording();
  const { lines, logger } = recordingLogger();
  const telemetry = new Telemetry(logger, rec, clock);
  return { clock, rec, lines, telemetry };
}

const held = (token: bigint, lost: (() => void)[] = []) => ({
  token,
  key: `/l/jobs/${token}`,
  session: { leaseId: 0x1an },
  onLost: (listener: () => void) => (lost.push(listener), { [Symbol.dispose]: () => {} }),
});

describe('Telemetry', () => {
  it('names its meter and tracer @leasehold/core with the package version', () => {
    const { rec } = setup();
    expect(rec.scopes).toEqual([`${SCOPE}@${VERSION}`]);
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('an acquisition that waited behind a holder: counted, timed from join to first, a handoff, a token, a span with the token', async () => {
    const { clock, rec, telemetry } = setup();
    const lock = await telemetry.acquisition(
      'lock',
      'leasehold.lock.acquire',
      'jobs',
      {},
      async (joined) => {
        clock.advance(40); // session grant and join txn: not part of the wait
        joined({ holder: { key: 'someone' } });
        clock.advance(250);
        return held(42n);
      },
    );
    expect(lock.token).toBe(42n);
    expect(rec.sum(metricNames.acquisitions, { kind: 'lock', outcome: 'acquired' })).toBe(1);
    expect(rec.points.filter((p) => p.name === metricNames.wait)).toEqual([
      { name: metricNames.wait, value: 250, attributes: { kind: 'lock' } },
    ]);
    expect(rec.sum(metricNames.handoffs, { kind: 'lock' })).toBe(1);
    expect(rec.sum(metricNames.tokens, { kind: 'lock' })).toBe(1);
    expect(rec.sum(metricNames.leadership)).toBe(0);
    expect(rec.spans).toEqual([
      {
        name: 'leasehold.lock.acquire',
        attributes: {
          'leasehold.kind': 'lock',
          'leasehold.name': 'jobs',
          'leasehold.outcome': 'acquired',
          'leasehold.token': '42',
          'leasehold.key': '/l/jobs/42',
          'leasehold.lease_id': '1a',
        },
        exceptions: [],
        ended: true,
      },
    ]);
  });

  it('an uncontended election: no handoff; elected, then lost, are leadership changes', async () => {
    const { rec, telemetry } = setup();
    const lost: (() => void)[] = [];
    await telemetry.acquisition(
      'election',
      'leasehold.election.campaign',
      'e',
      {},
      async (joined) => {
        joined({});
        return held(7n, lost);
      },
    );
    expect(rec.sum(metricNames.handoffs)).toBe(0);
    expect(rec.sum(metricNames.leadership, { transition: 'elected' })).toBe(1);
    lost.forEach((listener) => listener());
    expect(rec.sum(metricNames.leadership, { transition: 'lost' })).toBe(1);
    expect(rec.sum(metricNames.acquisitions, { kind: 'election', outcome: 'acquired' })).toBe(1);
  });

  it('counts failures by outcome and records them on the span, rethrowing the same error', async () => {
    const { rec, telemetry } = setup();
    const controller = new AbortController();
    const aborted = new Error('caller gave up');
    controller.abort(aborted);
    const cases: [unknown, unknown, string][] = [
      [new LockTakenError('jobs', '/l/jobs/1', 1n), {}, 'taken'],
      [new LockTimeoutError('jobs', 10), {}, 'timeout'],
      [new LeaseLostError('deadline', 1n, 'lost'), {}, 'lost'],
      [new SessionClosedError(1n), {}, 'lost'],
      [aborted, { signal: controller.signal }, 'aborted'],
      [new EtcdUnavailableError('down'), {}, 'error'],
      [new Error('other'), null, 'error'],
    ];
    for (const [err, options, outcome] of cases) {
      const failed = telemetry.acquisition('lock', 'leasehold.lock.acquire', 'jobs', options, () =>
        Promise.reject(err as Error),
      );
      await expect(failed).rejects.toBe(err);
      expect(rec.spans.at(-1)).toMatchObject({
        attributes: { 'leasehold.outcome': outcome },
        status: { code: 2 }, // SpanStatusCode.ERROR
        exceptions: [err],
        ended: true,
      });
    }
    for (const outcome of ['taken', 'timeout', 'aborted']) {
      expect(rec.sum(metricNames.acquisitions, { outcome })).toBe(1);
    }
    expect(rec.sum(metricNames.acquisitions, { outcome: 'lost' })).toBe(2);
    expect(rec.sum(metricNames.acquisitions, { outcome: 'error' })).toBe(2);
    expect(rec.sum(metricNames.tokens)).toBe(0);
  });

  it('a session loss is counted by reason and logged with its lease in hex; a close is not a loss', () => {
    const { rec, lines, telemetry } = setup();
    telemetry.sessionEnded(new LeaseLostError('gone', 0xabcn, 'etcd says lease abc is gone'));
    telemetry.sessionEnded(new SessionClosedError(0xdefn));
    expect(rec.sum(metricNames.sessionsLost, { reason: 'gone' })).toBe(1);
    expect(rec.sum(metricNames.sessionsLost)).toBe(1);
    expect(lines.map((l) => [l.level, l.fields.leaseId, l.fields.reason])).toEqual([
      ['warn', 'abc', 'gone'],
      ['debug', 'def', 'closed'],
    ]);
  });

  it('the remaining-lease gauge reports each live session by lease id, never below 0, until closed', () => {
    const { rec, telemetry } = setup();
    const sessions = [
      { leaseId: 0x10n, timeLeftMs: () => 4_000 },
      { leaseId: 0x11n, timeLeftMs: () => -5 },
    ];
    const stop = telemetry.observeSessions(() => sessions);
    expect(rec.collect()).toEqual([
      { name: metricNames.remaining, value: 4_000, attributes: { lease_id: '10' } },
      { name: metricNames.remaining, value: 0, attributes: { lease_id: '11' } },
    ]);
    stop();
    expect(rec.collect()).toEqual([]);
  });

  it('stalls, keepalives: one data point each', () => {
    const { rec, telemetry } = setup();
    telemetry.stalled(1_600);
    telemetry.keepalive(3);
    expect(rec.sum(metricNames.stalls)).toBe(1);
    expect(rec.sum(metricNames.stallDuration)).toBe(1_600);
    expect(rec.sum(metricNames.keepalive)).toBe(3);
  });

  it('a provider that throws never breaks the operation it reports on', async () => {
    const { logger, lines } = recordingLogger();
    const throwing = new Proxy(
      {},
      {
        get: () => () => {
          throw new Error('exporter bug');
        },
      },
    );
    const broken = new Telemetry(logger, {
      meterProvider: throwing as MeterProvider,
      tracerProvider: throwing as TracerProvider,
    });
    expect(lines.filter((l) => l.level === 'warn')).toHaveLength(2); // meter and tracer off
    const lock = await broken.acquisition('lock', 'leasehold.lock.acquire', 'x', {}, async () =>
      held(1n),
    );
    expect(lock.token).toBe(1n);

    // Instruments that throw when used.
    const boom = () => {
      throw new Error('exporter bug');
    };
    const meter = {
      createCounter: () => ({ add: boom }),
      createHistogram: () => ({ record: boom }),
      createObservableGauge: () => ({ addCallback: boom, removeCallback: boom }),
    };
    const partly = new Telemetry(logger, {
      meterProvider: { getMeter: () => meter } as unknown as MeterProvider,
      tracerProvider: recording().tracerProvider,
    });
    await expect(
      partly.acquisition('lock', 'leasehold.lock.acquire', 'x', {}, async (joined) => {
        joined({ holder: {} });
        return held(2n);
      }),
    ).resolves.toMatchObject({ token: 2n });
    expect(() => partly.observeSessions(() => [])).not.toThrow();
    expect(() => partly.stalled(1)).not.toThrow();
    expect(() => partly.sessionEnded(new LeaseLostError('gone', 1n, 'x'))).not.toThrow();
  });

  it('span() records the failure and ends the span', async () => {
    const { rec, telemetry } = setup();
    const err = new Error('refused');
    await expect(
      telemetry.span('leasehold.fenced_write', { 'leasehold.key': 'k' }, async (annotate) => {
        annotate({ 'leasehold.ops': 1 });
        throw err;
      }),
    ).rejects.toBe(err);
    expect(rec.spans[0]).toMatchObject({
      name: 'leasehold.fenced_write',
      attributes: { 'leasehold.key': 'k', 'leasehold.ops': 1 },
      status: { code: 2, message: 'refused' },
      ended: true,
    });
  });
});

describe('validateTelemetry', () => {
  it('accepts nothing, or providers with getMeter / getTracer', () => {
    expect(validateTelemetry(undefined)).toEqual({});
    const rec = recording();
    const given = { meterProvider: rec.meterProvider, tracerProvider: rec.tracerProvider };
    expect(validateTelemetry(given)).toBe(given);
  });

  it('rejects anything else with InvalidArgumentError', () => {
    for (const bad of [
      null,
      'otel',
      { meterProvider: {} },
      { tracerProvider: { getMeter() {} } },
    ]) {
      let err: unknown;
      try {
        validateTelemetry(bad);
      } catch (e) {
        err = e;
      }
      expect(isInvalidArgumentError(err)).toBe(true);
      expect((err as Error).message).toMatch(/^telemetry(\.tracerProvider)? must be/);
    }
  });
});
