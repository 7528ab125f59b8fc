/**
 * The harness's metric catalogue: every metric once, with its names, kind, help text, unit and
 * label, and where its number is in a snapshot. Both expositions are made from it — the
 * OpenMetrics text of `GET /metrics` (openmetrics.ts) and the OpenTelemetry instruments of
 * `meterHarness` (otel.ts) — so a metric added here shows in both, with the same words.
 *
 * Names: `name` is the OpenMetrics family (a counter's samples add `_total`); `otelName` follows
 * OpenTelemetry's style, which a Prometheus exporter turns into `name` (`bma.tool_call.duration`
 * in `s` becomes `bma_tool_call_duration_seconds`).
 *
 * Portable: data only.
 *
 * @module
 */
import {
  type HarnessMetricsSnapshot,
  type HistogramSnapshot,
  TOOL_CALL_OUTCOMES,
  type ToolCallOutcomeLabel,
} from "../../harness/metrics.ts";

/** What every metric of the catalogue says of itself. */
interface MetricBase {
  /** The OpenMetrics family name (`bma_executors_connected`). */
  readonly name: string;
  /** The OpenTelemetry instrument name (`bma.executors.connected`). */
  readonly otelName: string;
  /** What it measures: the `# HELP` text and the instrument's description. */
  readonly help: string;
  /** Its UCUM unit (`s`, `{call}`); an annotation in braces has no OpenMetrics `# UNIT`. */
  readonly unit: string;
}

/** A gauge or a counter without labels: one number. */
export interface ScalarMetric extends MetricBase {
  readonly kind: "gauge" | "counter";
  readonly label?: undefined;
  /** Its number in `snapshot`. */
  read(snapshot: HarnessMetricsSnapshot): number;
}

/** A counter with one label (`outcome`), one number per value. */
export interface LabelledCounter extends MetricBase {
  readonly kind: "counter";
  /** The label's name. */
  readonly label: string;
  /** The label's values, in the order the text shows them. */
  readonly values: readonly ToolCallOutcomeLabel[];
  /** Its number for each value in `snapshot`. */
  read(snapshot: HarnessMetricsSnapshot): Readonly<Record<ToolCallOutcomeLabel, number>>;
}

/** A histogram of durations in seconds, recorded where the harness records its own. */
export interface HistogramMetric extends MetricBase {
  readonly kind: "histogram";
  readonly label?: undefined;
  /** Its buckets in `snapshot`. */
  read(snapshot: HarnessMetricsSnapshot): HistogramSnapshot;
  /** The slot of the harness's counters that an OpenTelemetry histogram is also told through. */
  readonly recorder: "toolCallRecorder" | "storeWriteRecorder";
}

/** One metric of the catalogue. */
export type MetricSpec = ScalarMetric | LabelledCounter | HistogramMetric;

/** Every metric the harness reports, in the order the OpenMetrics text shows them. */
export const METRIC_CATALOGUE: readonly MetricSpec[] = Object.freeze(
  [
    {
      kind: "gauge",
      name: "bma_executors_connected",
      otelName: "bma.executors.connected",
      help: "Executors with a registered connection open now.",
      unit: "{executor}",
      read: (s) => s.executorsConnected,
    },
    {
      kind: "gauge",
      name: "bma_executors_held",
      otelName: "bma.executors.held",
      help: "Executors held: connected, or disconnected within their lease.",
      unit: "{executor}",
      read: (s) => s.executorsHeld,
    },
    {
      kind: "gauge",
      name: "bma_sessions_live",
      otelName: "bma.sessions.live",
      help: "Live sessions.",
      unit: "{session}",
      read: (s) => s.sessionsLive,
    },
    {
      kind: "gauge",
      name: "bma_tool_calls_in_flight",
      otelName: "bma.tool_calls.in_flight",
      help: "Tool calls made and not settled yet.",
      unit: "{call}",
      read: (s) => s.toolCallsInFlight,
    },
    {
      kind: "counter",
      name: "bma_tool_calls",
      otelName: "bma.tool_calls",
      help: "Tool calls settled, by how they ended.",
      unit: "{call}",
      label: "outcome",
      values: TOOL_CALL_OUTCOMES,
      read: (s) => s.toolCalls,
    },
    {
      kind: "histogram",
      name: "bma_tool_call_duration_seconds",
      otelName: "bma.tool_call.duration",
      help: "Tool call duration, from callTool until settled.",
      unit: "s",
      read: (s) => s.toolCallDuration,
      recorder: "toolCallRecorder",
    },
    {
      kind: "counter",
      name: "bma_session_events_stored",
      otelName: "bma.session_events.stored",
      help: "Durable session events accepted (stored before their ack).",
      unit: "{event}",
      read: (s) => s.sessionEventsStored,
    },
    {
      kind: "histogram",
      name: "bma_store_write_duration_seconds",
      otelName: "bma.store.write.duration",
      help: "Harness store write duration, per batch.",
      unit: "s",
      read: (s) => s.storeWriteDuration,
      recorder: "storeWriteRecorder",
    },
    {
      kind: "counter",
      name: "bma_store_write_failures",
      otelName: "bma.store.write.failures",
      help: "Harness store writes that failed.",
      unit: "{write}",
      read: (s) => s.storeWriteFailures,
    },
  ] satisfies MetricSpec[],
);

/** The label names the catalogue's own samples use (`le` of histogram buckets included). */
export const CATALOGUE_LABELS: ReadonlySet<string> = new Set([
  "le",
  ...METRIC_CATALOGUE.flatMap((metric) => metric.label === undefined ? [] : [metric.label]),
]);

/** The OpenMetrics `# UNIT` of a UCUM unit: `seconds` for `s`, none for an annotation. */
export function openMetricsUnit(unit: string): string | undefined {
  return unit === "s" ? "seconds" : undefined;
}
