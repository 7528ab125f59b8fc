/**
 * The harness's metrics, without a network: `HarnessMetrics` counting on an injected clock
 * (bucket placement, cumulative buckets, outcomes, a call whose start this harness did not see)
 * and `openMetricsText` writing OpenMetrics 1.0 — families, `_total` counters, histogram buckets
 * with canonical `le` values and `+Inf`, escaped label values, refused label names, `# EOF`.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../protocol/clock.ts";
import { HarnessMetrics, METRICS_DURATION_BUCKETS } from "../../harness/metrics.ts";
import { MetricsLabelError, OPENMETRICS_CONTENT_TYPE, openMetricsText } from "../../harness/mod.ts";

const GAUGES = { executorsConnected: 2, executorsHeld: 3, sessionsLive: 1, toolCallsInFlight: 4 };

describe("harness metrics: counting and the OpenMetrics text", () => {
  it("puts each duration in its bucket, cumulatively, and counts outcomes", async () => {
    const clock = new ManualClock();
    const metrics = new HarnessMetrics(clock);
    const settle = async (ms: number, outcome: string) => {
      const started = metrics.now();
      await clock.advance(ms);
      metrics.toolCallSettled(started, outcome);
    };
    await settle(0, "completed"); // 0 s: the first bucket
    await settle(3, "completed"); // 0.003 s: le 0.005
    await settle(1_000, "failed"); // exactly 1 s: le 1 (bounds are inclusive)
    await settle(60_000, "refused"); // beyond 10 s: +Inf only
    metrics.toolCallSettled(NaN, "unknown"); // started before this harness: outcome only
    metrics.eventStored();
    metrics.eventStored();
    const started = metrics.now();
    await clock.advance(2);
    metrics.storeWritten(started, true);

    const snap = metrics.snapshot(GAUGES);
    assert.deepEqual(snap.toolCalls, {
      completed: 2,
      failed: 1,
      canceled: 0,
      timed_out: 0,
      refused: 1,
      unknown: 1,
    });
    const h = snap.toolCallDuration;
    assert.deepEqual(h.bounds, METRICS_DURATION_BUCKETS);
    assert.equal(h.count, 4);
    assert.ok(Math.abs(h.sum - 61.003) < 1e-9, String(h.sum));
    const at = (bound: number) => h.buckets[h.bounds.indexOf(bound)];
    assert.equal(at(0.0005), 1);
    assert.equal(at(0.0025), 1);
    assert.equal(at(0.005), 2);
    assert.equal(at(0.5), 2);
    assert.equal(at(1), 3);
    assert.equal(at(10), 3);
    assert.equal(h.buckets.at(-1), 4, "the +Inf bucket counts every observation");
    assert.equal(h.buckets.length, h.bounds.length + 1);
    assert.equal(snap.sessionEventsStored, 2);
    assert.equal(snap.storeWriteFailures, 1);
    assert.equal(snap.storeWriteDuration.count, 1);
    assert.equal(snap.executorsHeld, 3);
  });

  it("writes OpenMetrics text: families, _total counters, buckets, _sum, _count, # EOF", () => {
    const metrics = new HarnessMetrics(new ManualClock());
    metrics.toolCallSettled(metrics.now(), "completed");
    metrics.eventStored();
    const text = openMetricsText(metrics.snapshot(GAUGES));
    assert.equal(
      OPENMETRICS_CONTENT_TYPE,
      "application/openmetrics-text; version=1.0.0; charset=utf-8",
    );
    assert.ok(text.endsWith("\n# EOF\n"), "the text ends with # EOF and a line feed");
    assert.equal(text.split("\n").filter((l) => l === "# EOF").length, 1);
    const lines = text.split("\n");
    assert.deepEqual(lines.slice(0, 3), [
      "# TYPE bma_executors_connected gauge",
      "# HELP bma_executors_connected Executors with a registered connection open now.",
      "bma_executors_connected 2",
    ]);
    assert.ok(lines.includes("bma_tool_calls_in_flight 4"));
    assert.ok(lines.includes("# TYPE bma_tool_calls counter"), "a counter family has no _total");
    assert.ok(lines.includes('bma_tool_calls_total{outcome="completed"} 1'));
    assert.ok(lines.includes('bma_tool_calls_total{outcome="timed_out"} 0'));
    assert.ok(lines.includes("bma_session_events_stored_total 1"));
    assert.ok(lines.includes("# TYPE bma_tool_call_duration_seconds histogram"));
    assert.ok(lines.includes("# UNIT bma_tool_call_duration_seconds seconds"));
    assert.ok(lines.includes('bma_tool_call_duration_seconds_bucket{le="0.0005"} 1'));
    assert.ok(lines.includes('bma_tool_call_duration_seconds_bucket{le="1.0"} 1'), "le 1.0");
    assert.ok(lines.includes('bma_tool_call_duration_seconds_bucket{le="10.0"} 1'));
    assert.ok(lines.includes('bma_tool_call_duration_seconds_bucket{le="+Inf"} 1'));
    assert.ok(lines.includes("bma_tool_call_duration_seconds_sum 0"));
    assert.ok(lines.includes("bma_tool_call_duration_seconds_count 1"));
    assert.ok(lines.includes('bma_store_write_duration_seconds_bucket{le="+Inf"} 0'));
    // Every sample belongs to the family declared last before it, and every family has HELP.
    let family = "";
    const helped = new Set<string>();
    for (const line of lines) {
      const type = /^# TYPE (\S+) (gauge|counter|histogram)$/.exec(line);
      if (type) {
        family = type[1];
        continue;
      }
      const help = /^# HELP (\S+) /.exec(line);
      if (help) helped.add(help[1]);
      if (line === "" || line.startsWith("#")) continue;
      const name = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line)![1];
      assert.ok(
        [family, `${family}_total`, `${family}_bucket`, `${family}_sum`, `${family}_count`]
          .includes(name),
        `${name} under ${family}`,
      );
      assert.ok(helped.has(family), `${family} has # HELP`);
    }
  });

  it("puts constant labels on every sample, their values escaped", () => {
    const metrics = new HarnessMetrics(new ManualClock());
    const text = openMetricsText(metrics.snapshot(GAUGES), {
      labels: { harness: 'eu\\1 "blue"\nline', zone: "a" },
    });
    const labels = 'harness="eu\\\\1 \\"blue\\"\\nline",zone="a"';
    const lines = text.split("\n");
    assert.ok(lines.includes(`bma_executors_connected{${labels}} 2`), text);
    assert.ok(lines.includes(`bma_tool_calls_total{${labels},outcome="completed"} 0`));
    assert.ok(lines.includes(`bma_tool_call_duration_seconds_bucket{${labels},le="+Inf"} 0`));
    assert.ok(lines.includes(`bma_tool_call_duration_seconds_count{${labels}} 0`));
    // No raw line feed escaped into a sample: every line is a comment, a sample or the end.
    for (const line of lines) {
      assert.ok(line === "" || line.startsWith("# ") || /^[a-z_]+(\{.*\})? \S+$/.test(line), line);
    }
  });

  it("refuses label names that cannot be a label's, or that the harness uses", () => {
    const snap = new HarnessMetrics(new ManualClock()).snapshot(GAUGES);
    for (const name of ["le", "outcome", "__reserved", "1st", "has-dash", "", "sp ace"]) {
      assert.throws(
        () => openMetricsText(snap, { labels: { [name]: "x" } }),
        (error: unknown) => error instanceof MetricsLabelError && error.label === name,
        name,
      );
    }
  });
});
