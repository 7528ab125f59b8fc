/**
 * W3C trace context end to end (issue 26), harness and executor both from this SDK over a real
 * WebSocket on 127.0.0.1 with the token endpoint: a call made with a `traceparent` shows the
 * same trace id in the executor's handler, in `TRACEPARENT` of a bash call (and of a process and
 * an agent turn), in the harness's record of the call and the inspector's view of it; with an
 * in-memory OpenTelemetry exporter on each end (a provider of each end's own), the spans of both
 * ends are parented as the context travelled. An invalid `traceparent` is ignored.
 *
 * bash runs without start-up files (`--norc`), with a HOME of the test's own.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as z from "zod";
import * as otel from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { serveMachine } from "../../executor/machine/serve.node.ts";
import type { ExecutorClientOptions, TraceContext } from "../../executor/node.ts";
import { brainApi, type HarnessOptions, MemoryHarnessStore } from "../../harness/node.ts";
import { InspectorModel } from "../../http/inspector/model.ts";
import { DEFAULT_INSPECTOR_LIMITS } from "../../http/inspector/views.ts";
import { systemClock } from "../../protocol/clock.ts";
import type { Turn } from "../../agent/mod.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { AgentFixtures } from "../helpers/agent-fixture.ts";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const TRACE: TraceContext = { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, tracestate: "vnd=1" };
const OTHER: TraceContext = {
  traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
};
const ECHO = `printf '%s|%s' "\${TRACEPARENT-unset}" "\${TRACESTATE-unset}"`;

/** An OpenTelemetry provider of one end's own, with the spans it ended kept in memory. */
function tracing() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return {
    telemetry: { api: otel, tracerProvider: provider },
    async spans(): Promise<ReadableSpan[]> {
      await provider.forceFlush();
      return exporter.getFinishedSpans();
    },
    shutdown: () => provider.shutdown(),
  };
}

function named(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((span) => span.name === name);
  assert.equal(found.length, 1, `one span ${name} in ${spans.map((s) => s.name).join(", ")}`);
  return found[0]!;
}

function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

function contextOf(span: ReadableSpan, tracestate?: string): string {
  const { traceId, spanId, traceFlags } = span.spanContext();
  assert.equal(traceFlags, 1);
  const traceparent = `00-${traceId}-${spanId}-01`;
  return tracestate === undefined ? traceparent : `${traceparent}|${tracestate}`;
}

describe("trace context: Harness and ExecutorClient", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  /** A harness (with a store) and a machine executor with a `probe` tool that keeps its context. */
  async function world(
    options: { harness?: HarnessOptions; client?: Partial<ExecutorClientOptions> } = {},
  ) {
    const root = mkdtempSync(join(tmpdir(), "bma-trace-"));
    fx.defer(() => rmSync(root, { recursive: true, force: true }));
    const workdir = join(root, "work");
    const home = join(root, "home");
    mkdirSync(workdir);
    mkdirSync(home);
    const { harness, server } = await fx.harness({
      store: new MemoryHarnessStore(),
      ...options.harness,
    });
    const { client } = fx.client(server, options.client);
    const seen: (TraceContext | undefined)[] = [];
    client.tool(
      "probe",
      { description: "keeps its call's trace context", input: z.object({}) },
      (_input, ctx) => {
        seen.push(ctx.trace);
        return "ok";
      },
    );
    const served = serveMachine(client, {
      workdir,
      cgroups: false,
      environment: { set: { HOME: home } },
    });
    fx.defer(() => served.dispose());
    await client.start();
    const executor = await harness.waitExecutor();
    const model = new InspectorModel(harness, DEFAULT_INSPECTOR_LIMITS, systemClock);
    fx.defer(() => model.close());
    return { harness, executor, seen, model };
  }

  it("carries a call's traceparent to the handler, into bash and into the inspector", async () => {
    const { harness, executor, seen, model } = await world();
    const session = await executor.assignSession({ session_id: "ses_trace" }, { trace: TRACE });
    await session.callTool({ tool: "probe", input: {} }, { trace: TRACE });
    assert.deepEqual(seen, [TRACE]);

    // Concurrent calls: each command sees its own call's context, none another's.
    const [mine, other, none, typed] = await Promise.all([
      session.callTool({ tool: "bash", input: { command: ECHO }, tool_call_id: "call_a" }, {
        trace: TRACE,
      }),
      session.callTool({ tool: "bash", input: { command: ECHO } }, { trace: OTHER }),
      session.callTool({ tool: "bash", input: { command: ECHO } }),
      session.tools.bash.call({ command: ECHO }, { trace: OTHER }),
    ]);
    assert.equal(mine.structured_content?.stdout, `${TRACE.traceparent}|vnd=1`);
    assert.equal(other.structured_content?.stdout, `${OTHER.traceparent}|unset`);
    assert.equal(none.structured_content?.stdout, "unset|unset");
    assert.equal(typed.structured_content?.stdout, `${OTHER.traceparent}|unset`);

    // The call's own env still wins over the context.
    const own = await session.callTool({
      tool: "bash",
      input: { command: ECHO, env: { TRACESTATE: "mine=2" } },
    }, { trace: TRACE });
    assert.equal(own.structured_content?.stdout, `${TRACE.traceparent}|mine=2`);

    // The harness records the call's trace id, and the inspector's call view shows it.
    assert.equal((await harness.toolCall("call_a"))?.trace_id, TRACE_ID);
    assert.equal(model.call("call_a")?.traceId, TRACE_ID);
    const listed = model.snapshot().calls.find((call) => call.id === "call_a");
    assert.equal(JSON.parse(JSON.stringify(listed)).traceId, TRACE_ID);
    const untraced = model.snapshot().calls.find((call) => call.id === none.tool_call_id);
    assert.equal(untraced?.traceId, undefined);
  });

  it("takes it from the brain API's traceparent and tracestate headers", async () => {
    const { harness, executor } = await world();
    const api = brainApi(harness, { authorize: () => true });
    const headers = {
      "content-type": "application/json",
      traceparent: TRACE.traceparent,
      tracestate: "vnd=1",
    };
    const assigned = await api.fetch(
      new Request("http://brain.test/sessions", {
        method: "POST",
        headers,
        body: JSON.stringify({ executor_id: executor.id, session_id: "ses_brain" }),
      }),
    );
    assert.equal(assigned.status, 201);
    const answered = await api.fetch(
      new Request("http://brain.test/sessions/ses_brain/tool-calls?wait_ms=30000", {
        method: "POST",
        headers,
        body: JSON.stringify({ tool: "bash", input: { command: ECHO }, tool_call_id: "call_b" }),
      }),
    );
    assert.equal(answered.status, 200);
    const body = await answered.json();
    assert.equal(body.result.structured_content.stdout, `${TRACE.traceparent}|vnd=1`);
    assert.equal((await harness.toolCall("call_b"))?.trace_id, TRACE_ID);
  });

  it("carries it into a process started with it", async () => {
    const { executor } = await world();
    await executor.assignSession({ session_id: "ses_proc" });
    const started = await executor.request("process.start", {
      session_id: "ses_proc",
      argv: ["/bin/sh", "-c", ECHO],
    }, { trace: TRACE });
    const ids = { session_id: "ses_proc", process_id: started.process_id };
    const waited = await executor.request("process.wait", { ...ids, timeout_ms: 30_000 });
    assert.equal(waited.exit_code, 0);
    const read = await executor.request("process.read", { ...ids, stream: "stdout" });
    assert.equal(read.data, `${TRACE.traceparent}|vnd=1`);
  });

  it("ignores an invalid traceparent (no TRACEPARENT, no error) and drops a bad tracestate", async () => {
    const { executor, seen } = await world();
    const session = await executor.assignSession({ session_id: "ses_bad" });
    const zeros: TraceContext = { traceparent: `00-${"0".repeat(32)}-${PARENT_ID}-01` };
    const upper: TraceContext = { traceparent: TRACE.traceparent.toUpperCase() };
    for (const trace of [zeros, upper, { traceparent: "garbage", tracestate: "a=1" }]) {
      const result = await session.callTool({ tool: "bash", input: { command: ECHO } }, { trace });
      assert.equal(result.is_error, false);
      assert.equal(result.structured_content?.stdout, "unset|unset");
      await session.callTool({ tool: "probe", input: {} }, { trace });
    }
    assert.deepEqual(seen, [undefined, undefined, undefined]);
    const bounded = await session.callTool({ tool: "bash", input: { command: ECHO } }, {
      trace: { traceparent: TRACE.traceparent, tracestate: "Not Valid" },
    });
    assert.equal(bounded.structured_content?.stdout, `${TRACE.traceparent}|unset`);
  });

  it("emits spans on both ends, each executor span a child of the harness's", async () => {
    const harnessEnd = tracing();
    const executorEnd = tracing();
    fx.defer(() => harnessEnd.shutdown());
    fx.defer(() => executorEnd.shutdown());
    const { executor, seen } = await world({
      harness: { telemetry: harnessEnd.telemetry },
      client: { telemetry: executorEnd.telemetry },
    });
    const session = await executor.assignSession({ session_id: "ses_spans" }, { trace: TRACE });
    await session.callTool({ tool: "probe", input: {} }, { trace: TRACE });
    const bash = await session.callTool({ tool: "bash", input: { command: ECHO } }, {
      trace: TRACE,
    });

    const mine = await harnessEnd.spans();
    const theirs = await executorEnd.spans();
    // session.assign: the harness's client span under the given context, the executor's under it.
    const assignOut = named(mine, "session.assign");
    const assignIn = named(theirs, "session.assign");
    assert.equal(assignOut.kind, otel.SpanKind.CLIENT);
    assert.equal(assignIn.kind, otel.SpanKind.SERVER);
    assert.equal(assignOut.spanContext().traceId, TRACE_ID);
    assert.equal(parentOf(assignOut), PARENT_ID);
    assert.equal(assignIn.spanContext().traceId, TRACE_ID);
    assert.equal(parentOf(assignIn), assignOut.spanContext().spanId);

    // tool.call bash: the same; the command sees the executor span's context (and the state).
    const callOut = named(mine, "tool.call bash");
    const callIn = named(theirs, "tool.call bash");
    assert.equal(callOut.kind, otel.SpanKind.CLIENT);
    assert.equal(callIn.kind, otel.SpanKind.SERVER);
    assert.equal(callOut.spanContext().traceId, TRACE_ID);
    assert.equal(parentOf(callOut), PARENT_ID);
    assert.equal(callIn.spanContext().traceId, TRACE_ID);
    assert.equal(parentOf(callIn), callOut.spanContext().spanId);
    assert.equal(callIn.attributes["bma.tool.outcome"], "completed");
    assert.equal(callOut.attributes["bma.tool.outcome"], "completed");
    assert.equal(bash.structured_content?.stdout, contextOf(callIn, "vnd=1"));

    // The handler is told the executor span's context.
    const probeIn = named(theirs, "tool.call probe");
    assert.equal(parentOf(probeIn), named(mine, "tool.call probe").spanContext().spanId);
    assert.deepEqual(seen, [{ traceparent: contextOf(probeIn), tracestate: "vnd=1" }]);

    // The call's record is written under the call's span.
    const writes = mine.filter((span) => span.name === "store.write");
    assert.ok(writes.some((span) => parentOf(span) === callOut.spanContext().spanId));
    assert.ok(writes.some((span) => parentOf(span) === assignOut.spanContext().spanId));
  });

  it("without a trace, a span's parent is the active context (a root here)", async () => {
    const harnessEnd = tracing();
    const executorEnd = tracing();
    fx.defer(() => harnessEnd.shutdown());
    fx.defer(() => executorEnd.shutdown());
    const { executor } = await world({
      harness: { telemetry: harnessEnd.telemetry },
      client: { telemetry: executorEnd.telemetry },
    });
    const session = await executor.assignSession({ session_id: "ses_root" });
    const bash = await session.callTool({ tool: "bash", input: { command: ECHO } });
    const callOut = named(await harnessEnd.spans(), "tool.call bash");
    const callIn = named(await executorEnd.spans(), "tool.call bash");
    assert.equal(parentOf(callOut), undefined);
    assert.equal(callIn.spanContext().traceId, callOut.spanContext().traceId);
    assert.equal(parentOf(callIn), callOut.spanContext().spanId);
    assert.equal(bash.structured_content?.stdout, `${contextOf(callIn)}|unset`);
  });

  it("loses nothing to a tracer that throws: every call still ends with its result", async () => {
    // An exporter or span processor with a bug throws from `end` (and a provider may throw from
    // `startSpan`): the spans are lost, the calls are not.
    const throwing = (where: "start" | "use") => {
      const span = {
        spanContext: () => ({ traceId: TRACE_ID, spanId: PARENT_ID, traceFlags: 1 }),
        setAttribute: () => {
          throw new Error("setAttribute failed");
        },
        setStatus: () => {
          throw new Error("setStatus failed");
        },
        recordException: () => {
          throw new Error("recordException failed");
        },
        end: () => {
          throw new Error("exporter failed");
        },
      };
      return {
        api: otel,
        tracerProvider: {
          getTracer: () => ({
            startSpan: () => {
              if (where === "start") throw new Error("startSpan failed");
              return span;
            },
          }),
        },
      };
    };
    for (const where of ["start", "use"] as const) {
      const { executor, seen } = await world({
        harness: { telemetry: throwing(where) },
        client: { telemetry: throwing(where) },
      });
      const session = await executor.assignSession({ session_id: `ses_${where}` }, {
        trace: TRACE,
      });
      const probe = await session.callTool({ tool: "probe", input: {} }, { trace: TRACE });
      assert.equal(probe.outcome, "completed", where);
      const failed = await session.callTool({ tool: "bash", input: { command: "exit 3" } });
      assert.equal(failed.structured_content?.exit_code, 3, where);
      assert.equal(seen.length, 1, where);
      await fx.cleanup();
    }
  });
});

describe("trace context: agent turns", { timeout: 60_000 }, () => {
  const fx = new AgentFixtures();
  afterEach(() => fx.cleanup());

  it("carries turn.start's context to the turn, with spans on both ends", async () => {
    const harnessEnd = tracing();
    const executorEnd = tracing();
    fx.defer(() => harnessEnd.shutdown());
    fx.defer(() => executorEnd.shutdown());
    const fixture = await fx.harness({ harness: { telemetry: harnessEnd.telemetry } });
    const turns: Turn[] = [];
    const { executor } = await fx.executor(fixture, {
      runTurn: (turn) => {
        turns.push(turn);
      },
    }, { client: { telemetry: executorEnd.telemetry } });
    const result = await executor.startTurn({
      session_id: "ses_turn",
      turn_id: "turn_1",
      input: [{ type: "text", text: "hello" }],
    }, { trace: TRACE });
    assert.equal(result.accepted, true);
    await until(() => turns.length === 1, "the turn ran");
    const startOut = named(await harnessEnd.spans(), "turn.start");
    assert.equal(startOut.kind, otel.SpanKind.CLIENT);
    assert.equal(startOut.spanContext().traceId, TRACE_ID);
    assert.equal(parentOf(startOut), PARENT_ID);
    // The executor's span lasts the turn: it ends with the turn's idle event.
    let spans: ReadableSpan[] = [];
    for (let i = 0; i < 1_000 && !spans.some((s) => s.name === "turn.start"); i++) {
      spans = await executorEnd.spans();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    const startIn = named(spans, "turn.start");
    assert.equal(startIn.kind, otel.SpanKind.SERVER);
    assert.equal(parentOf(startIn), startOut.spanContext().spanId);
    assert.equal(startIn.attributes["bma.turn.outcome"], "completed");
    assert.deepEqual(turns[0]!.trace, { traceparent: contextOf(startIn), tracestate: "vnd=1" });
  });

  it("without telemetry, the turn gets the context as it came", async () => {
    const fixture = await fx.harness();
    const turns: Turn[] = [];
    const { executor } = await fx.executor(fixture, { runTurn: (turn) => void turns.push(turn) });
    await executor.startTurn({
      session_id: "ses_plain",
      turn_id: "turn_1",
      input: [{ type: "text", text: "hello" }],
    }, { trace: TRACE });
    await until(() => turns.length === 1, "the turn ran");
    assert.deepEqual(turns[0]!.trace, TRACE);
  });
});
