/**
 * Trace context and spans, harness side: what a request that carries a trace context goes out
 * with (`params._meta`: the caller's context, or with `telemetry` the context of the client
 * span opened for it, whose parent is the caller's context or the active one), and the store
 * whose writes are spans (`store.write`). Without `telemetry` and without a trace context given,
 * none of this runs: the callers test for both first.
 */
import type { Telemetry, TracedSpan } from "../protocol/telemetry.ts";
import { type TraceContext, traceContext, withTraceContext } from "../protocol/trace-context.ts";
import { type HarnessStore, watchedStore } from "./store/store.ts";

/** What a traced request goes out with. */
export interface Outgoing {
  /** Its client span, with telemetry. */
  readonly span: TracedSpan | undefined;
  /** The context on the wire: the span's, or the one given. */
  readonly trace: TraceContext | undefined;
}

/**
 * The span and wire context of a request: with `telemetry` a client span `name` under `given`
 * (else the active context); without, `given` as it goes on the wire (an invalid one ignored).
 */
export function outgoing(
  telemetry: Telemetry | undefined,
  name: string,
  attributes: Record<string, string | number | boolean>,
  given: TraceContext | undefined,
): Outgoing {
  const trace = given === undefined ? undefined : traceContext(given);
  if (!telemetry) return { span: undefined, trace };
  const span = telemetry.start(name, "client", attributes, trace);
  return { span, trace: span.trace };
}

/** `params` with `trace` in `_meta`, or `params` itself without one. */
export function traced<P extends object>(params: P, trace: TraceContext | undefined): P {
  return trace ? withTraceContext(params, trace) : params;
}

/**
 * `store` whose writes are `store.write` spans (the batch's size in `bma.store.ops`), under the
 * span current when the write is made (a tool call's, a session assignment's).
 */
export function tracedStore(store: HarnessStore, telemetry: Telemetry): HarnessStore {
  return watchedStore<TracedSpan>(store, {
    start: (batch) =>
      telemetry.start("store.write", "internal", { "bma.store.ops": batch.length }, undefined),
    end: (span, failed, error) => failed ? span.end(error) : span.end(),
  });
}
