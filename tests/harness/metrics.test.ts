/**
 * The harness's metrics on real parts, on Node, Deno and Bun: a harness serving WebSocket and
 * HTTP on 127.0.0.1 over a store, a real `ExecutorClient`, tool calls and durable events, then
 * `GET /metrics` over HTTP parsed as OpenMetrics text — refused without the bearer token (the
 * token never in any answer), absent unless asked for — and the same numbers through an
 * OpenTelemetry meter (`meterHarness`; `@opentelemetry/sdk-metrics`, a reader collecting on
 * demand).
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AggregationTemporality,
  DataPointType,
  MeterProvider,
  MetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  bearerAuthorize,
  MemoryHarnessStore,
  meterHarness,
  MetricsLabelError,
  OPENMETRICS_CONTENT_TYPE,
  TokenTooShortError,
} from "../../harness/node.ts";
import { openMetricsText } from "../../harness/mod.ts";
import { METRICS_OF } from "../../harness/metrics.ts";
import { METRIC_CATALOGUE } from "../../http/metrics/catalogue.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";

const TOKEN = "metrics_SECRET_token_8c1f3e2a";

/** The samples of an OpenMetrics text, `name{labels}` to value; checks its frame. */
function parse(text: string): Map<string, number> {
  assert.ok(text.endsWith("# EOF\n"), "ends with # EOF");
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    assert.ok(match, `a sample line: ${line}`);
    samples.set(match[1], Number(match[2]));
  }
  return samples;
}

/** A reader that collects when asked (the SDK's abstract reader, nothing pushed). */
class OnDemandReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

describe("Harness: metrics", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  /** A client whose bash completes, unless the command is `fail` (its handler throws). */
  async function connected(server: { httpUrl: string }) {
    const { client } = fx.client(server);
    client.tools.bash.handle((input) => {
      if (input.command === "fail") throw new Error("no such luck");
      return { stdout: `ran ${input.command}`, stderr: "", exit_code: 0 };
    });
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    await client.start();
    return client;
  }

  it("serves GET /metrics behind its bearer token, counting what the harness did", async () => {
    const { harness, server, logger } = await fx.harness({
      store: new MemoryHarnessStore(),
      metricsEndpoint: { authorize: bearerAuthorize(TOKEN), labels: { harness: "test" } },
    });
    const client = await connected(server);
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_metrics" });
    await session.ready();
    const outcomes: string[] = [];
    for (const command of ["a", "b", "fail", "c"]) {
      outcomes.push((await session.tools.bash.call({ command })).outcome);
    }
    assert.deepEqual(outcomes, ["completed", "completed", "failed", "completed"]);
    for (const type of ["one", "two", "three"]) {
      await client.call("session.event", { session_id: "ses_metrics", event: { type } });
    }

    const url = `${server.httpUrl}/metrics`;
    const refusals = [
      await fetch(url),
      await fetch(url, { headers: { authorization: "Bearer not-the-token-at-all" } }),
      await fetch(url, { headers: { authorization: `Basic ${btoa(`x:${TOKEN}`)}` } }),
    ];
    for (const refused of refusals) {
      assert.equal(refused.status, 401);
      const body = await refused.text();
      assert.equal(body.includes(TOKEN), false);
    }
    const response = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), OPENMETRICS_CONTENT_TYPE);
    const text = await response.text();
    assert.equal(text.includes(TOKEN), false, "no secret in the metrics");
    const m = parse(text);
    const l = 'harness="test"';
    assert.equal(m.get(`bma_executors_connected{${l}}`), 1);
    assert.equal(m.get(`bma_executors_held{${l}}`), 1);
    assert.equal(m.get(`bma_sessions_live{${l}}`), 1);
    assert.equal(m.get(`bma_tool_calls_in_flight{${l}}`), 0);
    assert.equal(m.get(`bma_tool_calls_total{${l},outcome="completed"}`), 3);
    assert.equal(m.get(`bma_tool_calls_total{${l},outcome="failed"}`), 1);
    assert.equal(m.get(`bma_tool_calls_total{${l},outcome="unknown"}`), 0);
    assert.equal(m.get(`bma_tool_call_duration_seconds_count{${l}}`), 4, "each call once");
    assert.equal(m.get(`bma_tool_call_duration_seconds_bucket{${l},le="+Inf"}`), 4);
    assert.ok(m.get(`bma_tool_call_duration_seconds_sum{${l}}`)! >= 0);
    let previous = 0;
    for (const [name, value] of m) {
      if (!name.startsWith("bma_tool_call_duration_seconds_bucket")) continue;
      assert.ok(value >= previous, `${name}: buckets are cumulative`);
      previous = value;
    }
    assert.equal(m.get(`bma_session_events_stored_total{${l}}`), 3);
    const writes = m.get(`bma_store_write_duration_seconds_count{${l}}`)!;
    // Registration, assignment, readiness, each call made and settled, each event at least.
    assert.ok(writes >= 1 + 1 + 1 + 2 * 4 + 3, `store writes: ${writes}`);
    assert.equal(m.get(`bma_store_write_failures_total{${l}}`), 0);

    // The accessor tells the same numbers.
    const snap = harness.metrics;
    assert.equal(snap.executorsConnected, 1);
    assert.equal(snap.toolCalls.completed, 3);
    assert.equal(snap.toolCallDuration.count, 4);
    assert.equal(snap.sessionEventsStored, 3);
    assert.equal(logger.text().includes(TOKEN), false, "no secret in the harness log");

    // The executor goes: the gauge follows.
    await client.stop();
    await fx.cleanup();
    assert.equal(harness.metrics.executorsConnected, 0);
  });

  it("serves no metrics unless asked, and checks its options when the harness is made", async () => {
    const { server } = await fx.harness();
    const response = await fetch(`${server.httpUrl}/metrics`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(response.status, 404);
    await response.body?.cancel();
    assert.throws(() => bearerAuthorize("short"), TokenTooShortError);
    await assert.rejects(
      fx.harness({ metricsEndpoint: { authorize: () => true, labels: { le: "x" } } }),
      MetricsLabelError,
    );
  });

  it("reports the same numbers through an OpenTelemetry meter", async () => {
    const reader = new OnDemandReader();
    const provider = new MeterProvider({ readers: [reader] });
    try {
      const { harness, server } = await fx.harness();
      const metered = meterHarness(harness, provider.getMeter("bma-test"));
      fx.defer(() => metered.dispose());
      await connected(server);
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_otel" });
      await session.ready();
      await session.tools.bash.call({ command: "a" });
      await session.tools.bash.call({ command: "fail" });
      const { resourceMetrics, errors } = await reader.collect();
      assert.deepEqual(errors, []);
      const metrics = new Map(
        resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]),
      );
      const value = (name: string, attributes: Record<string, string> = {}) => {
        const metric = metrics.get(name);
        assert.ok(metric, name);
        const point = (metric.dataPoints as { attributes: object; value: unknown }[]).find((p) =>
          JSON.stringify(p.attributes) === JSON.stringify(attributes)
        );
        return point?.value;
      };
      assert.equal(value("bma.executors.connected"), 1);
      assert.equal(value("bma.tool_calls.in_flight"), 0);
      assert.equal(value("bma.tool_calls", { outcome: "completed" }), 1);
      assert.equal(value("bma.tool_calls", { outcome: "failed" }), 1);
      assert.equal(value("bma.session_events.stored"), 0);
      const duration = metrics.get("bma.tool_call.duration")!;
      assert.equal(duration.dataPointType, DataPointType.HISTOGRAM);
      assert.equal(duration.descriptor.unit, "s");
      const histogram = duration.dataPoints[0].value as { count: number };
      assert.equal(histogram.count, 2);
      assert.equal(histogram.count, harness.metrics.toolCallDuration.count);
      metered.dispose();
      metered.dispose(); // a second call does nothing
      await session.tools.bash.call({ command: "b" });
      const after = await reader.collect();
      const count = (name: string) =>
        after.resourceMetrics.scopeMetrics.flatMap((s) => s.metrics)
          .find((m) => m.descriptor.name === name)?.dataPoints
          .find((p) => (p.attributes as { outcome?: string }).outcome !== "failed");
      // Once disposed, nothing more reaches the meter (the SDK keeps what it last saw).
      assert.equal((count("bma.tool_call.duration")?.value as { count: number }).count, 2);
      assert.equal(count("bma.tool_calls")?.value, 1);
      assert.equal(harness.metrics.toolCallDuration.count, 3);
      assert.throws(() => meterHarness({} as never, provider.getMeter("x")), TypeError);
    } finally {
      await fx.cleanup();
      await provider.shutdown();
    }
  });

  it("shows every metric of its catalogue in both outputs, each with its words", async () => {
    const reader = new OnDemandReader();
    const provider = new MeterProvider({ readers: [reader] });
    try {
      const { harness } = await fx.harness();
      const metered = meterHarness(harness, provider.getMeter("bma-test"));
      fx.defer(() => metered.dispose());
      // A histogram the SDK was told nothing shows no instrument: one call, one store write.
      const counters = METRICS_OF.get(harness)!;
      counters.toolCallSettled(counters.now(), "completed");
      counters.storeWritten(counters.now(), false);
      const text = openMetricsText(harness.metrics);
      const { resourceMetrics } = await reader.collect();
      const instruments = new Map(
        resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]),
      );
      const families = text.split("\n").filter((line) => line.startsWith("# TYPE ")).length;
      assert.equal(families, METRIC_CATALOGUE.length, "no family outside the catalogue");
      assert.equal(instruments.size, METRIC_CATALOGUE.length, "no instrument outside it");
      for (const metric of METRIC_CATALOGUE) {
        assert.ok(text.includes(`# TYPE ${metric.name} ${metric.kind}\n`), metric.name);
        assert.ok(text.includes(`# HELP ${metric.name} ${metric.help}\n`), metric.name);
        const samples = text.split("\n").filter((line) =>
          line.startsWith(`${metric.name}_`) ||
          line.startsWith(`${metric.name}{`) || line.startsWith(`${metric.name} `)
        );
        assert.ok(samples.length > 0, `${metric.name} has samples`);
        const instrument = instruments.get(metric.otelName);
        assert.ok(instrument, metric.otelName);
        assert.equal(instrument.descriptor.description, metric.help, metric.otelName);
        assert.equal(instrument.descriptor.unit, metric.unit, metric.otelName);
        const type = metric.kind === "histogram"
          ? DataPointType.HISTOGRAM
          : metric.kind === "gauge"
          ? DataPointType.GAUGE
          : DataPointType.SUM;
        assert.equal(instrument.dataPointType, type, metric.otelName);
      }
    } finally {
      await fx.cleanup();
      await provider.shutdown();
    }
  });
});
