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
 * only the members it calls, structurally. Instrument names follow OpenTelemetry's style; a
 * Prometheus exporter turns them into the endpoint's names (`bma.tool_call.duration` in `s`
 * becomes `bma_tool_call_duration_seconds`).
 *
 * Portable: no runtime API.
 *
 * @module
 */
import type { Disposable } from "../../protocol/peer-types.ts";
import type { Harness } from "../../harness/harness.ts";
import {
  METRICS_DURATION_BUCKETS,
  METRICS_OF,
  TOOL_CALL_OUTCOMES,
  type ToolCallOutcomeLabel,
} from "../../harness/metrics.ts";

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

/** The attributes of each outcome, made once: a collection allocates none. */
const OUTCOME_ATTRIBUTES = Object.fromEntries(
  TOOL_CALL_OUTCOMES.map((outcome) => [outcome, Object.freeze({ outcome })]),
) as unknown as Record<ToolCallOutcomeLabel, Record<string, string>>;

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
  const snapshot = () => harness.metrics;
  const connected = meter.createObservableGauge("bma.executors.connected", {
    description: "Executors with a registered connection open now.",
    unit: "{executor}",
  });
  const held = meter.createObservableGauge("bma.executors.held", {
    description: "Executors held: connected, or disconnected within their lease.",
    unit: "{executor}",
  });
  const sessions = meter.createObservableGauge("bma.sessions.live", {
    description: "Live sessions.",
    unit: "{session}",
  });
  const inFlight = meter.createObservableGauge("bma.tool_calls.in_flight", {
    description: "Tool calls made and not settled yet.",
    unit: "{call}",
  });
  const calls = meter.createObservableCounter("bma.tool_calls", {
    description: "Tool calls settled, by how they ended.",
    unit: "{call}",
  });
  const events = meter.createObservableCounter("bma.session_events.stored", {
    description: "Durable session events accepted (stored before their ack).",
    unit: "{event}",
  });
  const failures = meter.createObservableCounter("bma.store.write.failures", {
    description: "Harness store writes that failed.",
    unit: "{write}",
  });
  const advice = { explicitBucketBoundaries: [...METRICS_DURATION_BUCKETS] };
  metrics.toolCallRecorder = meter.createHistogram("bma.tool_call.duration", {
    description: "Tool call duration, from callTool until settled.",
    unit: "s",
    advice,
  });
  metrics.storeWriteRecorder = meter.createHistogram("bma.store.write.duration", {
    description: "Harness store write duration, per batch.",
    unit: "s",
    advice,
  });
  const observables = [connected, held, sessions, inFlight, calls, events, failures];
  const observe = (result: OtelBatchObservableResult) => {
    const now = snapshot();
    result.observe(connected, now.executorsConnected);
    result.observe(held, now.executorsHeld);
    result.observe(sessions, now.sessionsLive);
    result.observe(inFlight, now.toolCallsInFlight);
    for (const outcome of TOOL_CALL_OUTCOMES) {
      result.observe(calls, now.toolCalls[outcome], OUTCOME_ATTRIBUTES[outcome]);
    }
    result.observe(events, now.sessionEventsStored);
    result.observe(failures, now.storeWriteFailures);
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
