/**
 * The harness's metrics through an OpenTelemetry meter, optional ({@linkcode meterHarness}):
 * the same numbers as `harness.metrics` and `GET /metrics`. Gauges and counters are observable
 * instruments read from one snapshot per collection, so they cost nothing between collections;
 * the two durations are histograms the harness records into where it records its own (one
 * `record` each, without attributes). A function, not a harness option, so that a bundle that
 * does not report to OpenTelemetry (an edge harness's) carries none of this.
 *
 * The SDK never imports `@opentelemetry/api` (an optional peer; the core bundles without it):
 * the user hands in a `Meter` (`otel.metrics.getMeter("bma-harness")`), and this module names
 * only the members it calls, structurally. The instruments are the metric catalogue's
 * (catalogue.ts), under their OpenTelemetry names, with its help texts and units.
 *
 * Portable: no runtime API.
 *
 * @module
 */
import type { Disposable } from "../../protocol/peer-types.ts";
import type { Harness } from "../../harness/harness.ts";
import { METRICS_DURATION_BUCKETS, METRICS_OF } from "../../harness/metrics.ts";
import { type LabelledCounter, METRIC_CATALOGUE, type ScalarMetric } from "./catalogue.ts";

/** What an instrument is made with. */
export interface OtelInstrumentOptions {
  /** What it measures. */
  description?: string;
  /** Its unit (UCUM: `s`, `{call}`). */
  unit?: string;
  /** Hints to the SDK (`explicitBucketBoundaries` of a histogram; API 1.7 and later). */
  advice?: { explicitBucketBoundaries?: number[] };
}

/** The members of an OpenTelemetry `BatchObservableResult` the SDK calls. */
export interface OtelBatchObservableResult {
  /** Reports `value` for `observable`, with `attributes`. */
  observe(observable: object, value: number, attributes?: Record<string, string>): void;
}

/** The members of an OpenTelemetry `Meter` the SDK calls (`@opentelemetry/api` 1.3 and later). */
export interface OtelMeter {
  /** An asynchronous gauge. */
  createObservableGauge(name: string, options?: OtelInstrumentOptions): object;
  /** An asynchronous monotonic counter. */
  createObservableCounter(name: string, options?: OtelInstrumentOptions): object;
  /** A histogram. */
  createHistogram(name: string, options?: OtelInstrumentOptions): { record(value: number): void };
  /** Calls `callback` on each collection, to observe `observables`. */
  addBatchObservableCallback(
    callback: (result: OtelBatchObservableResult) => void,
    observables: object[],
  ): void;
  /** Stops calling `callback`. */
  removeBatchObservableCallback(
    callback: (result: OtelBatchObservableResult) => void,
    observables: object[],
  ): void;
}

/** The attributes of each value of a label, made once: a collection allocates none. */
function attributesOf(metric: LabelledCounter): Record<string, Record<string, string>> {
  return Object.fromEntries(
    metric.values.map((value) => [value, Object.freeze({ [metric.label]: value })]),
  );
}

/**
 * Reports the metrics of `harness` through an OpenTelemetry `meter`
 * (`otel.metrics.getMeter("bma-harness")`): observable gauges `bma.executors.connected`,
 * `bma.executors.held`, `bma.sessions.live`, `bma.tool_calls.in_flight`; observable counters
 * `bma.tool_calls` (attribute `outcome`), `bma.session_events.stored`,
 * `bma.store.write.failures`; histograms `bma.tool_call.duration` and
 * `bma.store.write.duration` (seconds). `dispose` unregisters them; one meter at a time per
 * harness (a second one takes the histograms over). Throws `TypeError` for an object that is
 * no `Harness`.
 *
 * ```ts
 * import { metrics } from "@opentelemetry/api";
 * import { Harness, meterHarness } from "bma-executor-sdk/harness/node";
 *
 * const harness = new Harness({ insecureNoAuth: true });
 * const metered = meterHarness(harness, metrics.getMeter("bma-harness"));
 * // ... metered.dispose() when the harness is done.
 * ```
 */
export function meterHarness(harness: Harness, meter: OtelMeter): Disposable {
  const metrics = METRICS_OF.get(harness);
  if (!metrics) throw new TypeError("meterHarness needs a Harness");
  const advice = { explicitBucketBoundaries: [...METRICS_DURATION_BUCKETS] };
  /** Each observable instrument with how a collection observes it. */
  const observed: {
    instrument: object;
    metric: ScalarMetric | LabelledCounter;
    attributes?: Record<string, Record<string, string>>;
  }[] = [];
  for (const metric of METRIC_CATALOGUE) {
    const options = { description: metric.help, unit: metric.unit };
    if (metric.kind === "histogram") {
      metrics[metric.recorder] = meter.createHistogram(metric.otelName, { ...options, advice });
      continue;
    }
    const instrument = metric.kind === "gauge"
      ? meter.createObservableGauge(metric.otelName, options)
      : meter.createObservableCounter(metric.otelName, options);
    observed.push(
      metric.label === undefined
        ? { instrument, metric }
        : { instrument, metric, attributes: attributesOf(metric) },
    );
  }
  const observables = observed.map((entry) => entry.instrument);
  const observe = (result: OtelBatchObservableResult) => {
    const now = harness.metrics;
    for (const { instrument, metric, attributes } of observed) {
      if (metric.label === undefined) {
        result.observe(instrument, metric.read(now));
        continue;
      }
      const values = metric.read(now);
      for (const value of metric.values) {
        result.observe(instrument, values[value], attributes![value]);
      }
    }
  };
  meter.addBatchObservableCallback(observe, observables);
  let disposed = false;
  return {
    dispose: () => {
      if (disposed) return;
      disposed = true;
      meter.removeBatchObservableCallback(observe, observables);
      metrics.toolCallRecorder = undefined;
      metrics.storeWriteRecorder = undefined;
    },
  };
}
