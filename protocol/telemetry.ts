/**
 * OpenTelemetry spans, optional: a harness or an executor given `telemetry` (the
 * `@opentelemetry/api` module, or it with a `TracerProvider` of its own) opens spans for its
 * sessions, tool calls, turns and store writes; without it nothing of this runs. The SDK never
 * imports `@opentelemetry/api` itself (the package is an optional peer, and the core bundles
 * without it): the user hands the API object in, and this module names only the few members it
 * calls, structurally.
 *
 * Parents are passed explicitly (`startSpan(name, options, context)`), not through the active
 * context: a context manager is the application's choice, and a span must be parented right
 * without one. The active context is read only as the default parent of a span whose caller
 * gave no trace context.
 *
 * Portable: no runtime API.
 *
 * @module
 */
import type { Logger } from "./logger.ts";
import {
  formatTraceparent,
  parseTraceparent,
  type TraceContext,
  traceContext,
} from "./trace-context.ts";

/** An OpenTelemetry `Context`, as the SDK passes it on (never looks into it). */
export type OtelContext = object;

/** The members of an OpenTelemetry `SpanContext` the SDK reads. */
export interface OtelSpanContext {
  /** 32 lower-case hex digits. */
  readonly traceId: string;
  /** 16 lower-case hex digits. */
  readonly spanId: string;
  /** The trace flags (bit 0: sampled). */
  readonly traceFlags: number;
  /** Whether it came from another process. */
  readonly isRemote?: boolean;
  /** Vendor entries. */
  readonly traceState?: { serialize(): string };
}

/** The members of an OpenTelemetry `Span` the SDK calls. */
export interface OtelSpan {
  /** The span's context. */
  spanContext(): OtelSpanContext;
  /** Sets an attribute. */
  setAttribute(key: string, value: string | number | boolean): unknown;
  /** Sets the status (`code` 2: error). */
  setStatus(status: { code: number; message?: string }): unknown;
  /** Records an exception as an event of the span. */
  recordException(exception: Error | string): void;
  /** Ends the span. */
  end(): void;
}

/** The members of an OpenTelemetry `Tracer` the SDK calls. */
export interface OtelTracer {
  /** Starts a span under `context`'s span. */
  startSpan(
    name: string,
    options?: { kind?: number; attributes?: Record<string, string | number | boolean> },
    context?: OtelContext,
  ): OtelSpan;
}

/** The members of an OpenTelemetry `TracerProvider` the SDK calls. */
export interface OtelTracerProvider {
  /** A tracer of the instrumentation `name`. */
  getTracer(name: string, version?: string): OtelTracer;
}

/** The members of the `@opentelemetry/api` module the SDK calls. */
export interface OtelApi {
  /** The trace API. */
  readonly trace: {
    /** The global provider (used when no `tracerProvider` is given). */
    getTracerProvider(): OtelTracerProvider;
    /** `context` with a remote parent. */
    setSpanContext(context: OtelContext, spanContext: OtelSpanContext): OtelContext;
    /** `context` with `span` as its current span. */
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
  };
  /** The context API. */
  readonly context: {
    /** The active context (the root one without a context manager). */
    active(): OtelContext;
  };
  /** Parses a `tracestate` (`@opentelemetry/api` 1.1 and later). */
  createTraceState?(rawTraceState?: string): { serialize(): string };
}

/**
 * What `telemetry` of a harness or an executor takes: the `@opentelemetry/api` module
 * (`import * as otel from "@opentelemetry/api"`: spans go to its global tracer provider), or
 * `{ api, tracerProvider }` to give this instance a provider of its own.
 */
export type TelemetryOption = OtelApi | {
  /** The `@opentelemetry/api` module. */
  readonly api: OtelApi;
  /** Where this instance's spans go. Default: the API's global provider. */
  readonly tracerProvider?: OtelTracerProvider;
};

/** A span's kind, as the SDK opens them. */
export type SpanRole = "client" | "server" | "internal";

/** OpenTelemetry's `SpanKind` values. */
const KIND: Readonly<Record<SpanRole, number>> = { internal: 0, server: 1, client: 2 };
/** OpenTelemetry's `SpanStatusCode.ERROR`. */
const STATUS_ERROR = 2;

/**
 * A tracer, exporter or span processor with a bug may throw from any of its calls (the
 * OpenTelemetry SDK runs span processors inside `span.end()`): the span is lost, never the call,
 * session or event it stands for. The first such failure is logged once per instance.
 */
type SpanFailure = (error: unknown) => void;

/** What a span whose tracer failed to start it stands on: records nothing. */
const NO_SPAN: OtelSpan = {
  spanContext: () => ({ traceId: "0".repeat(32), spanId: "0".repeat(16), traceFlags: 0 }),
  setAttribute: () => undefined,
  setStatus: () => undefined,
  recordException: () => undefined,
  end: () => undefined,
};

/** One span the SDK opened, and the trace context it hands on. */
export class TracedSpan {
  /**
   * The span's own context, for the wire and children (`traceparent` names this span);
   * `undefined` for a span of no tracer (a no-op provider's) without a parent.
   */
  readonly trace: TraceContext | undefined;
  /** The trace id; `undefined` with no {@linkcode TracedSpan.trace}. */
  readonly traceId: string | undefined;
  /** An OpenTelemetry context with this span current (the parent of spans under it). */
  readonly context: OtelContext;
  readonly #span: OtelSpan;
  readonly #failed: SpanFailure;
  #ended = false;

  /** Made by {@linkcode Telemetry.start}. */
  constructor(
    span: OtelSpan,
    trace: TraceContext | undefined,
    traceId: string | undefined,
    context: OtelContext,
    failed: SpanFailure = () => {},
  ) {
    this.#span = span;
    this.trace = trace;
    this.traceId = traceId;
    this.context = context;
    this.#failed = failed;
  }

  /** Sets an attribute. */
  set(key: string, value: string | number | boolean): void {
    try {
      this.#span.setAttribute(key, value);
    } catch (error) {
      this.#failed(error);
    }
  }

  /** Ends the span (once); with `error`, its status is an error and the error is recorded. */
  end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    try {
      if (error !== undefined) {
        const message = error instanceof Error ? error.message : String(error);
        this.#span.recordException(error instanceof Error ? error : message);
        this.#span.setStatus({ code: STATUS_ERROR, message });
      }
      this.#span.end();
    } catch (failure) {
      this.#failed(failure);
    }
  }

  /** Ends the span with a tool call's outcome: an error status unless it completed. */
  endWithOutcome(result: {
    readonly outcome: string;
    readonly is_error?: boolean;
    readonly error?: { readonly message: string };
  }): void {
    this.set("bma.tool.outcome", result.outcome);
    if (result.is_error) this.set("bma.tool.is_error", true);
    this.end(result.outcome === "completed" ? undefined : result.error?.message ?? result.outcome);
  }
}

/**
 * What `run` returns (or its promise), `span` ended once that is known: with the error when
 * `run` throws or its promise rejects. Without a span, `run()` itself.
 */
export function spanning<T>(
  span: TracedSpan | undefined,
  run: () => T | Promise<T>,
): T | Promise<T> {
  if (!span) return run();
  let value: T | Promise<T>;
  try {
    value = run();
  } catch (error) {
    span.end(error);
    throw error;
  }
  if (!(value instanceof Promise)) {
    span.end();
    return value;
  }
  return value.then((result) => {
    span.end();
    return result;
  }, (error) => {
    span.end(error);
    throw error;
  });
}

/** One instance's OpenTelemetry: its tracer, and the parent a new span takes. */
export class Telemetry {
  readonly #api: OtelApi;
  readonly #tracer: OtelTracer;
  /** The span current while {@linkcode Telemetry.within} runs (parent of store writes). */
  #current: OtelContext | undefined;
  readonly #failed: SpanFailure;

  /**
   * A tracer named `name` of `option`'s provider; a tracer's failure is logged to `logger` (once:
   * a broken exporter fails every span).
   */
  constructor(option: TelemetryOption, name: string, version?: string, logger?: Logger) {
    const api = "api" in option ? option.api : option;
    const provider = ("api" in option ? option.tracerProvider : undefined) ??
      api.trace.getTracerProvider();
    this.#api = api;
    this.#tracer = provider.getTracer(name, version);
    let told = false;
    this.#failed = (error) => {
      if (told) return;
      told = true;
      logger?.warn("telemetry: the tracer failed; spans may be lost, nothing else is", {
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      });
    };
  }

  /**
   * Opens a span. Its parent: `parent` (a trace context received or given), else the span
   * current in {@linkcode Telemetry.within}, else the active context. The span's own context is
   * what goes on: in `_meta` of the request it stands for, or to the handler and its children.
   */
  start(
    name: string,
    role: SpanRole,
    attributes: Record<string, string | number | boolean>,
    parent: TraceContext | undefined,
  ): TracedSpan {
    try {
      return this.#start(name, role, attributes, parent);
    } catch (error) {
      this.#failed(error);
      const remote = parent && parseTraceparent(parent.traceparent);
      let context: OtelContext = {};
      try {
        context = this.#current ?? this.#api.context.active();
      } catch {
        // The API itself failed: its children are started on an empty context (and fail alike).
      }
      const traceId = remote ? remote.traceId : undefined;
      return new TracedSpan(NO_SPAN, parent, traceId, context, this.#failed);
    }
  }

  #start(
    name: string,
    role: SpanRole,
    attributes: Record<string, string | number | boolean>,
    parent: TraceContext | undefined,
  ): TracedSpan {
    const api = this.#api;
    const base = this.#current ?? api.context.active();
    let under = base;
    const remote = parent && parseTraceparent(parent.traceparent);
    if (remote) {
      const state = parent.tracestate !== undefined && api.createTraceState
        ? api.createTraceState(parent.tracestate)
        : undefined;
      under = api.trace.setSpanContext(base, {
        traceId: remote.traceId,
        spanId: remote.parentId,
        traceFlags: remote.flags,
        isRemote: true,
        ...(state ? { traceState: state } : {}),
      });
    }
    const span = this.#tracer.startSpan(name, { kind: KIND[role], attributes }, under);
    const own = span.spanContext();
    const tracestate = own.traceState?.serialize() || parent?.tracestate;
    // A span of no tracer (a no-op provider's, with no parent) has an invalid context: what goes
    // on then is the parent's context as it came, or none.
    const mine = traceContext({
      traceparent: formatTraceparent(own.traceId, own.spanId, own.traceFlags),
      tracestate,
    });
    const trace = mine ?? parent;
    const traceId = mine ? own.traceId : remote ? remote.traceId : undefined;
    return new TracedSpan(span, trace, traceId, api.trace.setSpan(base, span), this.#failed);
  }

  /**
   * Runs `fn` with `span` current for the spans opened synchronously inside it (a store write
   * of a tool call's record parents to the call).
   */
  within<T>(span: TracedSpan | undefined, fn: () => T): T {
    if (!span) return fn();
    const before = this.#current;
    this.#current = span.context;
    try {
      return fn();
    } finally {
      this.#current = before;
    }
  }
}

/** A {@linkcode Telemetry} of `option`, or `undefined` without one. */
export function telemetryOf(
  option: TelemetryOption | undefined,
  name: string,
  logger?: Logger,
): Telemetry | undefined {
  return option === undefined ? undefined : new Telemetry(option, name, undefined, logger);
}
