/**
 * W3C trace context, read and written (protocol/trace-context.ts): what counts as a valid
 * `traceparent`, the bounds of `tracestate`, and the `_meta` member a request carries them in.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  boundedTracestate,
  formatTraceparent,
  MAX_TRACESTATE_CHARS,
  METHOD_SPECS,
  parseTraceparent,
  traceContext,
  traceContextOf,
  traceEnvironment,
  traceIdOf,
  withTraceContext,
} from "../../protocol/mod.ts";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const VALID = `00-${TRACE_ID}-${PARENT_ID}-01`;

describe("parseTraceparent", () => {
  it("reads a version 00 traceparent", () => {
    assert.deepEqual(parseTraceparent(VALID), { traceId: TRACE_ID, parentId: PARENT_ID, flags: 1 });
    assert.deepEqual(parseTraceparent(`00-${TRACE_ID}-${PARENT_ID}-00`)?.flags, 0);
    assert.equal(traceIdOf(VALID), TRACE_ID);
  });

  it("ignores what is not one (never throws)", () => {
    const invalid: unknown[] = [
      undefined,
      null,
      42,
      {},
      "",
      "garbage",
      `00-${"0".repeat(32)}-${PARENT_ID}-01`, // all-zero trace id
      `00-${TRACE_ID}-${"0".repeat(16)}-01`, // all-zero parent id
      `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`, // upper case
      `00-${TRACE_ID}-${PARENT_ID}-1`, // short flags
      `00-${TRACE_ID}-${PARENT_ID}-0g`, // not hex
      `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`, // short trace id
      `00-${TRACE_ID}-${PARENT_ID}-01-extra`, // version 00 has no more fields
      `ff-${TRACE_ID}-${PARENT_ID}-01`, // version ff is invalid
      ` ${VALID}`,
      `${VALID} `,
    ];
    for (const value of invalid) {
      assert.equal(parseTraceparent(value), undefined, String(value));
      assert.equal(traceContext({ traceparent: value }), undefined, String(value));
    }
  });

  it("reads a later version's known fields, and writes version 00", () => {
    const later = `01-${TRACE_ID}-${PARENT_ID}-03-whatever-comes`;
    assert.deepEqual(parseTraceparent(later), { traceId: TRACE_ID, parentId: PARENT_ID, flags: 3 });
    assert.equal(parseTraceparent(`01-${TRACE_ID}-${PARENT_ID}-03x`), undefined);
    assert.deepEqual(traceContext({ traceparent: later }), {
      traceparent: `00-${TRACE_ID}-${PARENT_ID}-03`,
    });
  });

  it("formats the parts", () => {
    assert.equal(formatTraceparent(TRACE_ID, PARENT_ID, 1), VALID);
    assert.equal(formatTraceparent(TRACE_ID, PARENT_ID, 0), `00-${TRACE_ID}-${PARENT_ID}-00`);
  });
});

describe("tracestate", () => {
  it("keeps a tracestate within bounds", () => {
    assert.equal(boundedTracestate("congo=t61rcWkgMzE"), "congo=t61rcWkgMzE");
    assert.equal(
      boundedTracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"),
      "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE",
    );
    assert.equal(boundedTracestate("tenant@vendor=x,,b=2"), "tenant@vendor=x,,b=2");
    const members32 = Array.from({ length: 32 }, (_, i) => `k${i}=v`).join(",");
    assert.equal(boundedTracestate(members32), members32);
  });

  it("drops one beyond its bounds or malformed, keeping the traceparent", () => {
    const members33 = Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",");
    const long = `a=${"x".repeat(MAX_TRACESTATE_CHARS)}`;
    for (const value of [members33, long, "Upper=1", "novalue", "a=1,=2", "a=b=c", 7, ""]) {
      assert.equal(boundedTracestate(value), undefined, String(value));
      assert.deepEqual(traceContext({ traceparent: VALID, tracestate: value }), {
        traceparent: VALID,
      });
    }
  });
});

describe("_meta", () => {
  it("reads the context from params._meta and ignores anything else", () => {
    assert.deepEqual(
      traceContextOf({ session_id: "s", _meta: { traceparent: VALID, tracestate: "a=1" } }),
      { traceparent: VALID, tracestate: "a=1" },
    );
    for (const params of [undefined, null, {}, { _meta: null }, { _meta: "x" }, { _meta: {} }]) {
      assert.equal(traceContextOf(params), undefined);
    }
  });

  it("writes it into a copy, keeping other _meta members and dropping a stale tracestate", () => {
    const params = { session_id: "s", _meta: { progressToken: 7, tracestate: "old=1" } };
    const out = withTraceContext(params, { traceparent: VALID });
    assert.deepEqual(out, { session_id: "s", _meta: { progressToken: 7, traceparent: VALID } });
    assert.deepEqual(params._meta, { progressToken: 7, tracestate: "old=1" });
    assert.deepEqual(withTraceContext({ a: 1 }, { traceparent: VALID, tracestate: "x=y" }), {
      a: 1,
      _meta: { traceparent: VALID, tracestate: "x=y" },
    });
  });

  it("hands a context to a child as TRACEPARENT and TRACESTATE", () => {
    assert.equal(traceEnvironment(undefined), undefined);
    assert.deepEqual(traceEnvironment({ traceparent: VALID }), { TRACEPARENT: VALID });
    assert.deepEqual(traceEnvironment({ traceparent: VALID, tracestate: "a=1" }), {
      TRACEPARENT: VALID,
      TRACESTATE: "a=1",
    });
  });
});

describe("the contract passes _meta by", () => {
  const meta = { traceparent: VALID, tracestate: "a=1" };
  const requests: Record<string, Record<string, unknown>> = {
    "tool.call": { session_id: "s", tool_call_id: "c", tool: "bash", input: { command: "ls" } },
    "session.assign": { session_id: "s", metadata: { source: "harness" } },
    "turn.start": { session_id: "s", turn_id: "t", input: [{ type: "text", text: "hi" }] },
    "process.start": { session_id: "s", argv: ["ls"] },
    "terminal.open": { session_id: "s" },
  };
  for (const [method, params] of Object.entries(requests)) {
    it(`${method}: both checks accept it and keep it`, () => {
      const spec = METHOD_SPECS.get(method)!;
      const traced = { ...params, _meta: meta };
      // The fast predicate (when it decides) and zod both accept the params with _meta.
      if (spec.acceptsParams(params)) assert.equal(spec.acceptsParams(traced), true);
      const parsed = spec.params.safeParse(traced);
      assert.equal(parsed.success, true);
      assert.deepEqual((parsed.data as { _meta?: unknown })._meta, meta);
      assert.deepEqual(traceContextOf(parsed.data), meta);
    });
  }
});
