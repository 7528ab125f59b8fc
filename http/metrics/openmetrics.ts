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
import type { HarnessMetricsSnapshot, HistogramSnapshot } from "../../harness/metrics.ts";
import { CATALOGUE_LABELS, METRIC_CATALOGUE, openMetricsUnit } from "./catalogue.ts";

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

/**
 * The label pairs of `labels`, each `name="value"` with the value escaped, joined by commas
 * (`""` for none); throws {@linkcode MetricsLabelError} for a name that cannot be a label's.
 * Checked once (when an endpoint is configured), then given to {@linkcode openMetricsText}.
 */
export function labelPairs(labels: Readonly<Record<string, string>> | undefined): string {
  if (!labels) return "";
  const pairs: string[] = [];
  for (const [name, value] of Object.entries(labels)) {
    if (!LABEL_NAME.test(name) || name.startsWith("__") || CATALOGUE_LABELS.has(name)) {
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

/**
 * {@linkcode openMetricsText} with its constant labels already written as pairs: each metric of
 * the catalogue (catalogue.ts), in its order.
 */
export function renderOpenMetrics(snapshot: HarnessMetricsSnapshot, constant: string): string {
  // The harness's own label pairs follow the constant ones; a sample without them has only those.
  const before = constant ? `${constant},` : "";
  const only = constant ? `{${constant}}` : "";
  let out = "";
  for (const metric of METRIC_CATALOGUE) {
    const name = metric.name;
    const unit = openMetricsUnit(metric.unit);
    out += `# TYPE ${name} ${metric.kind}\n`;
    if (unit) out += `# UNIT ${name} ${unit}\n`;
    out += `# HELP ${name} ${metric.help}\n`;
    if (metric.kind === "histogram") {
      out += histogram(name, metric.read(snapshot), before, only);
    } else if (metric.label !== undefined) {
      const values = metric.read(snapshot);
      for (const value of metric.values) {
        out += `${name}_total{${before}${metric.label}="${value}"} ${number(values[value])}\n`;
      }
    } else {
      const suffix = metric.kind === "counter" ? "_total" : "";
      out += `${name}${suffix}${only} ${number(metric.read(snapshot))}\n`;
    }
  }
  return `${out}# EOF\n`;
}

/** A histogram's samples: cumulative buckets, then `_sum` and `_count`. */
function histogram(name: string, h: HistogramSnapshot, before: string, only: string): string {
  let out = "";
  for (let i = 0; i < h.bounds.length; i++) {
    out += `${name}_bucket{${before}le="${bound(h.bounds[i])}"} ${number(h.buckets[i])}\n`;
  }
  return out + `${name}_bucket{${before}le="+Inf"} ${number(h.count)}\n` +
    `${name}_sum${only} ${number(h.sum)}\n${name}_count${only} ${number(h.count)}\n`;
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
