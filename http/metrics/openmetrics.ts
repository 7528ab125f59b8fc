/**
 * The harness's metrics as OpenMetrics 1.0 text, what Prometheus (and any scraper that reads
 * its format) takes from `GET /metrics`: each family's `# TYPE`, `# UNIT` and `# HELP`, its
 * samples, histograms as cumulative `_bucket{le="..."}` with `_sum` and `_count`, and the final
 * `# EOF`.
 *
 * Portable: string building only.
 *
 * @module
 */
import { LocalError } from "../../protocol/errors.ts";
import {
  type HarnessMetricsSnapshot,
  type HistogramSnapshot,
  TOOL_CALL_OUTCOMES,
} from "../../harness/metrics.ts";

/** The content type of the text {@linkcode openMetricsText} writes. */
export const OPENMETRICS_CONTENT_TYPE =
  "application/openmetrics-text; version=1.0.0; charset=utf-8";

/** Options of {@linkcode openMetricsText}. */
export interface OpenMetricsOptions {
  /**
   * Labels put on every sample (`{ harness: "eu-1" }`), for scrapers that gather several
   * harnesses without target labels of their own. Names are Prometheus label names, none of
   * them `le` or `outcome` (the harness's own); values are escaped.
   */
  labels?: Readonly<Record<string, string>>;
}

/** A label given to {@linkcode openMetricsText} cannot be one: its name is not a label name. */
export class MetricsLabelError extends LocalError {
  /** The refused label name. */
  readonly label: string;
  /** Names the refused label. */
  constructor(label: string) {
    super(
      `metrics label ${JSON.stringify(label)} is not a label name ` +
        "([a-zA-Z_][a-zA-Z0-9_]*, not __-prefixed, not le or outcome)",
    );
    this.name = "MetricsLabelError";
    this.label = label;
  }
}

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** The label names the harness's own samples use. */
const OWN_LABELS = new Set(["le", "outcome"]);

/**
 * The label pairs of `labels`, each `name="value"` with the value escaped, joined by commas
 * (`""` for none); throws {@linkcode MetricsLabelError} for a name that cannot be a label's.
 * Checked once (when an endpoint is configured), then given to {@linkcode openMetricsText}.
 */
export function labelPairs(labels: Readonly<Record<string, string>> | undefined): string {
  if (!labels) return "";
  const pairs: string[] = [];
  for (const [name, value] of Object.entries(labels)) {
    if (!LABEL_NAME.test(name) || name.startsWith("__") || OWN_LABELS.has(name)) {
      throw new MetricsLabelError(name);
    }
    pairs.push(`${name}="${escapeText(String(value))}"`);
  }
  return pairs.join(",");
}

/**
 * The metrics of `snapshot` as OpenMetrics text (serve it as
 * {@linkcode OPENMETRICS_CONTENT_TYPE}). Throws {@linkcode MetricsLabelError} for a label
 * name in `options.labels` that cannot be one.
 */
export function openMetricsText(
  snapshot: HarnessMetricsSnapshot,
  options: OpenMetricsOptions = {},
): string {
  return renderOpenMetrics(snapshot, labelPairs(options.labels));
}

/** {@linkcode openMetricsText} with its constant labels already written as pairs. */
export function renderOpenMetrics(snapshot: HarnessMetricsSnapshot, constant: string): string {
  // The harness's own label pairs follow the constant ones; a sample without them has only those.
  const before = constant ? `${constant},` : "";
  const only = constant ? `{${constant}}` : "";
  let out = "";
  const head = (name: string, type: string, help: string, unit?: string) => {
    out += `# TYPE ${name} ${type}\n`;
    if (unit) out += `# UNIT ${name} ${unit}\n`;
    out += `# HELP ${name} ${help}\n`;
  };
  const sample = (name: string, type: string, help: string, value: number) => {
    head(name, type, help);
    out += `${name}${type === "counter" ? "_total" : ""}${only} ${number(value)}\n`;
  };
  const histogram = (name: string, help: string, h: HistogramSnapshot) => {
    head(name, "histogram", help, "seconds");
    for (let i = 0; i < h.bounds.length; i++) {
      out += `${name}_bucket{${before}le="${bound(h.bounds[i])}"} ${number(h.buckets[i])}\n`;
    }
    out += `${name}_bucket{${before}le="+Inf"} ${number(h.count)}\n` +
      `${name}_sum${only} ${number(h.sum)}\n${name}_count${only} ${number(h.count)}\n`;
  };
  const s = snapshot;
  sample(
    "bma_executors_connected",
    "gauge",
    "Executors with a registered connection open now.",
    s.executorsConnected,
  );
  sample(
    "bma_executors_held",
    "gauge",
    "Executors held: connected, or disconnected within their lease.",
    s.executorsHeld,
  );
  sample("bma_sessions_live", "gauge", "Live sessions.", s.sessionsLive);
  sample(
    "bma_tool_calls_in_flight",
    "gauge",
    "Tool calls made and not settled yet.",
    s.toolCallsInFlight,
  );
  head("bma_tool_calls", "counter", "Tool calls settled, by how they ended.");
  for (const outcome of TOOL_CALL_OUTCOMES) {
    out += `bma_tool_calls_total{${before}outcome="${outcome}"} ${number(s.toolCalls[outcome])}\n`;
  }
  histogram(
    "bma_tool_call_duration_seconds",
    "Tool call duration, from callTool until settled.",
    s.toolCallDuration,
  );
  sample(
    "bma_session_events_stored",
    "counter",
    "Durable session events accepted (stored before their ack).",
    s.sessionEventsStored,
  );
  histogram(
    "bma_store_write_duration_seconds",
    "Harness store write duration, per batch.",
    s.storeWriteDuration,
  );
  sample(
    "bma_store_write_failures",
    "counter",
    "Harness store writes that failed.",
    s.storeWriteFailures,
  );
  return `${out}# EOF\n`;
}

/** A label value escaped as OpenMetrics asks: backslash, double quote, line feed. */
function escapeText(text: string): string {
  return text.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`));
}

/** A sample value: integers as they are, `+Inf`/`-Inf`/`NaN` spelt as the format spells them. */
function number(value: number): string {
  if (Number.isFinite(value)) return String(value);
  if (Number.isNaN(value)) return "NaN";
  return value > 0 ? "+Inf" : "-Inf";
}

/** A bucket bound as a float (`1.0`, not `1`), the canonical form of `le` values. */
function bound(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}
