import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';

type Attributes = Record<string, unknown>;

const matches = (attributes: Attributes, wanted: Attributes) =>
  Object.entries(wanted).every(([k, v]) => attributes[k] === v);

/**
 * OpenTelemetry's SDK with in-memory exporters, handed to `connect({ telemetry })`. Metrics are
 * cumulative and read on demand (`collect()`); spans are kept as they end.
 */
export function inMemoryTelemetry() {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exports only when collected: the interval is far longer than any test.
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spanExporter)],
  });

  /** Every metric of the latest collection, by name. */
  async function collect(): Promise<Map<string, MetricData & { scope: string }>> {
    metricExporter.reset();
    await reader.forceFlush();
    const out = new Map<string, MetricData & { scope: string }>();
    for (const resource of metricExporter.getMetrics()) {
      for (const scope of resource.scopeMetrics) {
        for (const metric of scope.metrics) {
          const named = `${scope.scope.name}@${scope.scope.version ?? ''}`;
          out.set(metric.descriptor.name, { ...metric, scope: named });
        }
      }
    }
    return out;
  }

  /** The data points of metric `name` whose attributes include `wanted`. */
  async function points<T = number>(
    name: string,
    wanted: Attributes = {},
  ): Promise<DataPoint<T>[]> {
    const metric = (await collect()).get(name);
    const all = (metric?.dataPoints ?? []) as DataPoint<T>[];
    return all.filter((p) => matches(p.attributes, wanted));
  }

  /** The sum of a counter's points whose attributes include `wanted` (0 if none). */
  async function count(name: string, wanted: Attributes = {}): Promise<number> {
    return (await points(name, wanted)).reduce((total, p) => total + p.value, 0);
  }

  /** A histogram's merged count, sum, min and max over points whose attributes include `wanted`. */
  async function histogram(name: string, wanted: Attributes = {}) {
    const found = await points<Histogram>(name, wanted);
    return {
      count: found.reduce((n, p) => n + p.value.count, 0),
      sum: found.reduce((n, p) => n + (p.value.sum ?? 0), 0),
      min: Math.min(...found.map((p) => p.value.min ?? Infinity)),
      max: Math.max(...found.map((p) => p.value.max ?? -Infinity)),
    };
  }

  /** Ended spans named `name` whose attributes include `wanted`. */
  function spans(name: string, wanted: Attributes = {}): ReadableSpan[] {
    return spanExporter
      .getFinishedSpans()
      .filter((s) => s.name === name && matches(s.attributes, wanted));
  }

  async function shutdown(): Promise<void> {
    await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
  }

  return {
    telemetry: { meterProvider, tracerProvider },
    collect,
    points,
    count,
    histogram,
    spans,
    shutdown,
  };
}
