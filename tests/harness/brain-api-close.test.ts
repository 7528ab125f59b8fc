/**
 * A brain waiting over HTTP for a tool call's result when the harness closes (a drain, a
 * failover) gets 503 `harness_closed` — and repeats its request at the next harness — not a
 * connection cut without an answer. The brain API served by the harness's own server on
 * 127.0.0.1, as `bma-harness serve` serves it (closing the harness closes that server), an
 * executor on a real WebSocket that acknowledges the call and never answers it.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { bearerAuthorize, brainApi, Harness } from "../../node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

const TOKEN = "brain-token-0123456789abcdef";
const BASE = "/v1/harness";

describe("brainApi on the harness's server, when the harness closes", { timeout: 30_000 }, () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close().catch(() => {});
  });

  it("answers a request waiting for a tool call's result with 503 harness_closed", async () => {
    const harness = new Harness({ insecureNoAuth: true, heartbeatIntervalMs: 120_000 });
    closers.push(() => harness.close());
    const api = brainApi(harness, { authorize: bearerAuthorize(TOKEN), basePath: BASE });
    const server = await harness.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (request) =>
        new URL(request.url).pathname.startsWith(`${BASE}/`)
          ? api.fetch(request)
          : harness.fetch(request),
    });
    closers.push(() => server.close());
    const peer = await ExecutorPeer.dial(server.url);
    closers.push(() => peer.close());
    await peer.start(registerParams());
    const executor = await harness.waitExecutor();
    await executor.assignSession({ session_id: "ses_close" });

    const waiting = fetch(`${server.httpUrl}${BASE}/sessions/ses_close/tool-calls?wait_ms=30000`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({
        tool: "bash",
        input: { command: "sleep 4" },
        tool_call_id: "call_long",
      }),
    });
    // Dispatched: the request waits for its result.
    const call = await peer.nextToolCall();
    assert.equal(call.tool_call_id, "call_long");

    await harness.close();
    const response = await waiting;
    assert.equal(response.status, 503);
    const body = await response.json();
    assert.equal(body.error?.code, "harness_closed", JSON.stringify(body));
  });
});
