/**
 * The harness's own numbers (internal, with the public snapshot types): counters and
 * fixed-bucket histograms written where the harness does the work, gauges read from its state
 * when someone asks. {@linkcode HarnessMetrics.snapshot} is what `harness.metrics` returns and
 * what the OpenMetrics text and an OpenTelemetry meter show (http/metrics/, from its catalogue).
 *
 * Cheap on the hot path by construction: a settled tool call costs two reads of the clock, a
 * bucket index found by a short scan of fixed bounds, and a few number increments — no label
 * map, no object. Gauges cost nothing until read: they are counted from the harness's tables.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */
import { type Clock, systemClock } from "../protocol/clock.ts";

/**
 * Upper bounds, in seconds, of the buckets of the duration histograms (tool calls, store
 * writes): from half a millisecond (an in-process call, a synchronous SQLite write) to ten
 * seconds; slower ones fall in the last, unbounded bucket.
 */
export const METRICS_DURATION_BUCKETS: readonly number[] = Object.freeze([
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
]);

/**
 * How a tool call ended, as `bma_tool_calls_total` labels it: the executor's `outcome` when a
 * `tool.result` came; `refused` when the executor answered `tool.call` with an error (the tool
 * never ran); `unknown` when no result will come (`ToolOutcomeUnknownError`: lease expired,
 * executor closed, session ended, harness closed).
 */
export type ToolCallOutcomeLabel =
  | "completed"
  | "failed"
  | "canceled"
  | "timed_out"
  | "refused"
  | "unknown";

/** Every {@linkcode ToolCallOutcomeLabel}, in the order the text shows them. */
export const TOOL_CALL_OUTCOMES: readonly ToolCallOutcomeLabel[] = Object.freeze([
  "completed",
  "failed",
  "canceled",
  "timed_out",
  "refused",
  "unknown",
]);

/** A histogram as a snapshot shows it. */
export interface HistogramSnapshot {
  /** The buckets' upper bounds, seconds, ascending; the last bucket (`+Inf`) is implied. */
  readonly bounds: readonly number[];
  /**
   * Cumulative counts: `buckets[i]` observations were at most `bounds[i]`; the last one
   * (`bounds.length`) counts every observation (`+Inf`) and equals `count`.
   */
  readonly buckets: readonly number[];
  /** The sum of the observations, seconds. */
  readonly sum: number;
  /** How many observations. */
  readonly count: number;
}

/**
 * The harness's metrics at one moment (`harness.metrics`). Counters and histograms
 * count from the harness's construction: a harness made again (a restart, an edge harness's
 * wake-up) starts them from zero, which scrapers read as a counter reset.
 */
export interface HarnessMetricsSnapshot {
  /** Executors with a registered connection open now. */
  readonly executorsConnected: number;
  /** Executors held: connected, or disconnected and still within their lease. */
  readonly executorsHeld: number;
  /** Live sessions. */
  readonly sessionsLive: number;
  /** Tool calls made and not settled yet (queued, sent, or running on their executor). */
  readonly toolCallsInFlight: number;
  /** Tool calls settled, by how they ended. */
  readonly toolCalls: Readonly<Record<ToolCallOutcomeLabel, number>>;
  /**
   * How long tool calls took, from `callTool` (the store write included) until settled. Calls
   * a previous run of the harness made and this one settled (read back from the store) are
   * counted in `toolCalls` only: their start is not known here.
   */
  readonly toolCallDuration: HistogramSnapshot;
  /** Durable session events accepted (handed to the sink and the store before their ack). */
  readonly sessionEventsStored: number;
  /** How long the harness's store writes took (each batch once; failed ones included). */
  readonly storeWriteDuration: HistogramSnapshot;
  /** Store writes that threw or rejected. */
  readonly storeWriteFailures: number;
}

/** What the gauges are read from: the harness's tables, counted when a snapshot is taken. */
export interface MetricsGauges {
  readonly executorsConnected: number;
  readonly executorsHeld: number;
  readonly sessionsLive: number;
  readonly toolCallsInFlight: number;
}

/** A histogram of durations over fixed bounds: one count per bucket, not cumulative. */
class DurationHistogram {
  readonly #bounds: readonly number[];
  /** `#counts[i]` for bucket i; the last slot is the unbounded bucket. */
  readonly #counts: Float64Array;
  #sum = 0;
  #count = 0;

  constructor(bounds: readonly number[]) {
    this.#bounds = bounds;
    this.#counts = new Float64Array(bounds.length + 1);
  }

  /** One observation of `seconds` (a negative one, a clock stepping back, counts as 0). */
  observe(seconds: number): void {
    const value = seconds > 0 ? seconds : 0;
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    this.#counts[i]++;
    this.#sum += value;
    this.#count++;
  }

  snapshot(): HistogramSnapshot {
    const buckets: number[] = [];
    let running = 0;
    for (const n of this.#counts) buckets.push(running += n);
    return { bounds: this.#bounds, buckets, sum: this.#sum, count: this.#count };
  }
}

/** Something that records one number (an OpenTelemetry histogram). */
export interface MetricsRecorder {
  record(value: number): void;
}

/**
 * The harness's counters and histograms (internal). `now` reads milliseconds for durations:
 * `performance.now()` on the system clock (sub-millisecond, and no step when the wall clock is
 * set), else the injected clock's `now()`, so a test's `ManualClock` decides durations too.
 */
export class HarnessMetrics {
  readonly now: () => number;
  /** Also told each tool call's duration, seconds (an OpenTelemetry histogram). */
  toolCallRecorder: MetricsRecorder | undefined = undefined;
  /** Also told each store write's duration, seconds. */
  storeWriteRecorder: MetricsRecorder | undefined = undefined;
  readonly #toolCallDuration = new DurationHistogram(METRICS_DURATION_BUCKETS);
  readonly #storeWriteDuration = new DurationHistogram(METRICS_DURATION_BUCKETS);
  /** Settled calls by outcome, in the order of {@linkcode TOOL_CALL_OUTCOMES}. */
  readonly #toolCalls = new Float64Array(TOOL_CALL_OUTCOMES.length);
  #eventsStored = 0;
  #storeWriteFailures = 0;

  constructor(clock: Clock = systemClock) {
    this.now = clock === systemClock && typeof performance !== "undefined"
      ? () => performance.now()
      : () => clock.now();
  }

  /**
   * A tool call settled: `startedAt` is what {@linkcode HarnessMetrics.now} read when it was
   * made (`NaN` when this harness did not see it start: only its outcome is counted).
   */
  toolCallSettled(startedAt: number, outcome: string): void {
    this.#toolCalls[outcomeIndex(outcome)]++;
    if (startedAt !== startedAt) return; // NaN: started before this harness
    const seconds = (this.now() - startedAt) / 1000;
    this.#toolCallDuration.observe(seconds);
    this.toolCallRecorder?.record(seconds > 0 ? seconds : 0);
  }

  /** A store write begun at `startedAt` (a reading of {@linkcode HarnessMetrics.now}) ended. */
  storeWritten(startedAt: number, failed: boolean): void {
    if (failed) this.#storeWriteFailures++;
    const seconds = (this.now() - startedAt) / 1000;
    this.#storeWriteDuration.observe(seconds);
    this.storeWriteRecorder?.record(seconds > 0 ? seconds : 0);
  }

  /** A durable session event was accepted. */
  eventStored(): void {
    this.#eventsStored++;
  }

  /** The numbers now, with the gauges read from the harness's tables. */
  snapshot(gauges: MetricsGauges): HarnessMetricsSnapshot {
    const { executorsConnected, executorsHeld, sessionsLive, toolCallsInFlight } = gauges;
    const calls = this.#toolCalls;
    const toolCalls = {} as Record<ToolCallOutcomeLabel, number>;
    TOOL_CALL_OUTCOMES.forEach((outcome, i) => toolCalls[outcome] = calls[i]);
    return {
      executorsConnected,
      executorsHeld,
      sessionsLive,
      toolCallsInFlight,
      toolCalls,
      toolCallDuration: this.#toolCallDuration.snapshot(),
      sessionEventsStored: this.#eventsStored,
      storeWriteDuration: this.#storeWriteDuration.snapshot(),
      storeWriteFailures: this.#storeWriteFailures,
    };
  }
}

/**
 * The counters of each harness, by its `Harness` object (internal): how `meterHarness` reaches
 * them from outside the class, without the class importing it.
 */
export const METRICS_OF: WeakMap<object, HarnessMetrics> = new WeakMap();

/** The slot of an outcome in {@linkcode TOOL_CALL_OUTCOMES} (a string switch: no lookup table). */
function outcomeIndex(outcome: string): number {
  switch (outcome) {
    case "completed":
      return 0;
    case "failed":
      return 1;
    case "canceled":
      return 2;
    case "timed_out":
      return 3;
    case "refused":
      return 4;
    default:
      return 5;
  }
}
