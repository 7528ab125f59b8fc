/**
 * The HTTP API for outside brains on the edge: the portable `brainApi` (harness/brain-api.ts)
 * mounted in each object, reached through the Worker at `/v1/harness/<object name>/...` with
 * the bearer `BMA_BRAIN_TOKEN`, in real workerd. The routes themselves are tested on the
 * portable harness (tests/harness/brain-api.test.ts); here: the routing to the right object,
 * the guard, and a call made over HTTP.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { EDGE, Edge, INFO } from "./edge-fixture.ts";

describe("edge harness on workerd: the brain API", { timeout: 90_000 }, () => {
  let edge: Edge;
  before(async () => {
    edge = await Edge.start();
  });
  afterEach(() => edge.stopClients());
  after(() => edge.dispose());

  it("answers 401 without the brain token, an executor credential included", async () => {
    const path = `${edge.url}/v1/harness/environments/${EDGE.environmentId}/executors`;
    assert.equal((await fetch(path)).status, 401);
    const wrong = await fetch(path, {
      headers: { authorization: `Bearer ${EDGE.environmentKey}` },
    });
    assert.equal(wrong.status, 401, "an executor credential is not a brain credential");
  });

  it("answers a bad percent-escape in an object's name with a typed 4xx, never a 500", async () => {
    for (
      const [path, status] of [
        ["/v1/environments/%E0%A4%A/token", 400],
        ["/v1/harness/%ZZ/executors", 404],
        ["/v1/harness/environments/%ZZ/executors", 404],
      ] as const
    ) {
      const answer = await fetch(`${edge.url}${path}`, {
        method: path.endsWith("/token") ? "POST" : "GET",
      });
      assert.equal(answer.status, status, path);
      assert.match(answer.headers.get("content-type") ?? "", /application\/json/);
      assert.doesNotMatch(await answer.text(), /URIError|at /, path);
    }
  });

  it("lists the object's executors, assigns a session and calls a tool over HTTP", async () => {
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
    const listed = await edge.brain("GET", "/executors");
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body.executors.map((e: any) => e.executor_id), [executor_id]);
    const elsewhere = await edge.brain(
      "GET",
      "/executors",
      undefined,
      `machines/${EDGE.machineId}`,
    );
    assert.deepEqual(elsewhere.body.executors, [], "another object holds nothing of it");
    const assigned = await edge.brain("POST", "/sessions", { session_id: "ses_http", executor_id });
    assert.equal(assigned.status, 201, JSON.stringify(assigned.body));
    const ready = await edge.brain("GET", "/sessions/ses_http?until=ready&wait_ms=20000");
    assert.equal(ready.status, 200);
    const body = { tool: "bash", input: { command: "ls" }, tool_call_id: "call_http" };
    const called = await edge.brain("POST", "/sessions/ses_http/tool-calls?wait_ms=20000", body);
    assert.equal(called.status, 200, JSON.stringify(called.body));
    assert.equal(JSON.stringify(called.body).includes("ran ls"), true);
    // The brain inside the object sees the same call: one harness, two brains.
    const inside = await edge.driver("recovered", ["ses_http"]);
    assert.equal(inside, "ready");
    const { result } = await edge.driver("call", ["ses_http", body]);
    assert.equal(result.structured_content.stdout, "ran ls");
    assert.equal((await edge.driver("executor", [INFO.name])).id, executor_id);
  });
});
