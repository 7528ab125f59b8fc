/**
 * W3C Trace Context (`traceparent`, `tracestate`) as the SDK carries it: read, checked and
 * written, without any tracing library. On the wire it travels in a request's
 * `params._meta.traceparent` / `params._meta.tracestate`, as MCP's SEP-414 carries it: the
 * contract's params are open objects, so a peer that does not know `_meta` passes it by.
 *
 * A value that is not a valid trace context is ignored, never an error, as the W3C
 * recommendation says of a received header: an invalid `traceparent` counts as none, and a
 * `tracestate` beyond its bounds (or malformed) is dropped while its `traceparent` stays.
 *
 * Portable: no runtime API.
 *
 * @module
 */

/** A W3C trace context: what a call carries to the executor and into the commands it runs. */
export interface TraceContext {
  /** `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower-case. */
  traceparent: string;
  /** Vendor entries (`key=value,...`), at most 32 members and 512 characters. */
  tracestate?: string;
}

/** The parts of a valid `traceparent`. */
export interface Traceparent {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string;
  /** The caller's span id: 16 lower-case hex digits, not all zero. */
  readonly parentId: string;
  /** The trace flags (bit 0: sampled). */
  readonly flags: number;
}

/** Most list members a `tracestate` may have; one with more is dropped. */
export const MAX_TRACESTATE_MEMBERS = 32;
/** Most characters a `tracestate` may have; a longer one is dropped. */
export const MAX_TRACESTATE_CHARS = 512;

/** Version 00's fields; a later version may add `-`-separated fields after them. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE_ID = "00000000000000000000000000000000";
const ZERO_PARENT_ID = "0000000000000000";
/** A list member: `key=value`, the key with an optional `tenant@system` form. */
const TRACESTATE_MEMBER =
  /^[ \t]*(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e][ \t]*$/;

/**
 * The parts of a `traceparent`, or `undefined` when it is not a valid one: version 00 exactly
 * (55 characters), or a later version whose first fields read as 00's (version `ff` is
 * invalid); the trace id and the parent id not all zeros.
 */
export function parseTraceparent(value: unknown): Traceparent | undefined {
  if (typeof value !== "string" || value.length < 55 || value.length > 512) return undefined;
  const match = TRACEPARENT.exec(value);
  if (!match) return undefined;
  const [, version, traceId, parentId, flags, rest] = match;
  if (version === "ff") return undefined;
  if (version === "00" && rest !== undefined) return undefined;
  if (traceId === ZERO_TRACE_ID || parentId === ZERO_PARENT_ID) return undefined;
  return { traceId: traceId!, parentId: parentId!, flags: parseInt(flags!, 16) };
}

/**
 * A version 00 `traceparent` of the parts (ids of the lengths {@linkcode parseTraceparent}
 * accepts: it does not check them).
 */
export function formatTraceparent(traceId: string, parentId: string, flags: number): string {
  return `00-${traceId}-${parentId}-${(flags & 0xff).toString(16).padStart(2, "0")}`;
}

/**
 * `value` when it is a `tracestate` within bounds (at most {@linkcode MAX_TRACESTATE_MEMBERS}
 * members and {@linkcode MAX_TRACESTATE_CHARS} characters, each member `key=value`); else
 * `undefined` (dropped).
 */
export function boundedTracestate(value: unknown): string | undefined {
  if (typeof value !== "string" || value.length > MAX_TRACESTATE_CHARS) return undefined;
  let members = 0;
  for (const member of value.split(",")) {
    // Empty members (`a=1,,b=2`) are allowed and do not count.
    if (member.trim() === "") continue;
    if (++members > MAX_TRACESTATE_MEMBERS || !TRACESTATE_MEMBER.test(member)) return undefined;
  }
  return members === 0 ? undefined : value;
}

/**
 * A trace context as the SDK sends it: `value`'s `traceparent` in version 00 form and its
 * `tracestate` if within bounds; `undefined` when `value` has no valid `traceparent`.
 */
export function traceContext(value: unknown): TraceContext | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const given = value as { traceparent?: unknown; tracestate?: unknown };
  const parent = parseTraceparent(given.traceparent);
  if (!parent) return undefined;
  const out: TraceContext = {
    traceparent: formatTraceparent(parent.traceId, parent.parentId, parent.flags),
  };
  const state = boundedTracestate(given.tracestate);
  if (state !== undefined) out.tracestate = state;
  return out;
}

/** The trace id of a valid `traceparent`; `undefined` for another value. */
export function traceIdOf(traceparent: unknown): string | undefined {
  return parseTraceparent(traceparent)?.traceId;
}

/** The trace context a request's params carry (`_meta`), if a valid one. */
export function traceContextOf(params: unknown): TraceContext | undefined {
  if (typeof params !== "object" || params === null) return undefined;
  return traceContext((params as { _meta?: unknown })._meta);
}

/**
 * A copy of `params` carrying `trace` in `_meta` (other `_meta` members kept; a `tracestate` of
 * another trace is not). `params` itself is not changed.
 */
export function withTraceContext<P extends object>(params: P, trace: TraceContext): P {
  const before = (params as { _meta?: unknown })._meta;
  const meta: Record<string, unknown> = typeof before === "object" && before !== null &&
      !Array.isArray(before)
    ? { ...before as Record<string, unknown> }
    : {};
  meta.traceparent = trace.traceparent;
  if (trace.tracestate !== undefined) meta.tracestate = trace.tracestate;
  else delete meta.tracestate;
  return { ...params, _meta: meta };
}

/**
 * The environment variables that hand a trace context to a child process (`TRACEPARENT`, and
 * `TRACESTATE` when there is one), as OpenTelemetry's environment carrier names them;
 * `undefined` without a context.
 */
export function traceEnvironment(
  trace: TraceContext | undefined,
): Record<string, string> | undefined {
  if (!trace) return undefined;
  return trace.tracestate === undefined
    ? { TRACEPARENT: trace.traceparent }
    : { TRACEPARENT: trace.traceparent, TRACESTATE: trace.tracestate };
}
