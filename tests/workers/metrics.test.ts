/**
 * The harness's metrics on the edge, in real workerd: `BMA_METRICS_TOKEN` turns on each
 * object's `GET /metrics` (the portable route, tested on tests/harness/metrics.test.ts),
 * reached through the Worker at `/v1/harness/<object name>/metrics`: refused without the
 * token, and counting what that object's harness did — its executor, a tool call made over
 * the brain API.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { EDGE, Edge } from "./edge-fixture.ts";

const METRICS_TOKEN = "metrics_SECRET_edge_token_2b7d";

describe("edge harness on workerd: the metrics endpoint", { timeout: 90_000 }, () => {
  let edge: Edge;
  before(async () => {
    edge = await Edge.start({ vars: { BMA_METRICS_TOKEN: METRICS_TOKEN } });
  });
  afterEach(() => edge.stopClients());
  after(() => edge.dispose());

  const scrape = (token?: string, route = `environments/${EDGE.environmentId}`) =>
    fetch(`${edge.url}/v1/harness/${route}/metrics`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });

  it("answers 401 without the metrics token, the brain's included", async () => {
    for (const token of [undefined, EDGE.brainToken, EDGE.environmentKey]) {
      const response = await scrape(token);
      assert.equal(response.status, 401);
      assert.equal((await response.text()).includes(METRICS_TOKEN), false);
    }
  });

  it("counts the object's executor and the tool calls made on it", async () => {
    const client = edge.client();
    client.tools.bash.handle((input) => ({
      stdout: `ran ${input.command}`,
      stderr: "",
      exit_code: 0,
    }));
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    const { executor_id } = await client.start();
    const assigned = await edge.brain("POST", "/sessions", { session_id: "ses_m", executor_id });
    assert.equal(assigned.status, 201, JSON.stringify(assigned.body));
    const ready = await edge.brain("GET", "/sessions/ses_m?until=ready&wait_ms=20000");
    assert.equal(ready.status, 200);
    const body = { tool: "bash", input: { command: "ls" }, tool_call_id: "call_m" };
    const called = await edge.brain("POST", "/sessions/ses_m/tool-calls?wait_ms=20000", body);
    assert.equal(called.status, 200, JSON.stringify(called.body));

    const response = await scrape(METRICS_TOKEN);
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^application\/openmetrics-text;/);
    const text = await response.text();
    assert.ok(text.endsWith("# EOF\n"));
    const lines = text.split("\n");
    assert.ok(lines.includes("bma_executors_connected 1"), text);
    assert.ok(lines.includes('bma_tool_calls_total{outcome="completed"} 1'), text);
    assert.ok(lines.includes('bma_tool_call_duration_seconds_bucket{le="+Inf"} 1'), text);
    // The object's store is its storage: every write was timed, none failed.
    assert.ok(!lines.includes("bma_store_write_duration_seconds_count 0"), text);
    assert.ok(lines.includes("bma_store_write_failures_total 0"), text);

    const other = await scrape(METRICS_TOKEN, `machines/${EDGE.machineId}`);
    assert.ok((await other.text()).split("\n").includes("bma_executors_connected 0"));
  });
});
