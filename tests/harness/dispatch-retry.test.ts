/**
 * A `tool.call` whose ack does not come within the request timeout (a held link, a busy
 * executor) is sent again on the same connection, not failed: the executor acknowledges a
 * duplicate `tool_call_id` without running it again, so the call completes once. Over a real
 * WebSocket, on the injectable clock.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../mod.ts";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import type { ToolCallParams } from "../../protocol/mod.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

const TIMEOUT = 5_000;

describe("Harness: a tool.call whose ack is late", { timeout: 20_000 }, () => {
  let clock: ManualClock;
  let harness: Harness;
  let server: HarnessServer;
  let peer: ExecutorPeer;

  before(async () => {
    clock = new ManualClock();
    harness = new Harness({
      clock,
      heartbeatIntervalMs: 60_000,
      requestTimeoutMs: TIMEOUT,
      insecureNoAuth: true,
    });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    peer = await ExecutorPeer.dial(server.url);
  });
  after(async () => {
    await peer.close().catch(() => {});
    await harness.close();
    await server.close();
  });

  it("is sent again until acknowledged, and completes once", async () => {
    const received: ToolCallParams[] = [];
    let arrived: (() => void) | undefined;
    peer.serveDefaults();
    // The first tool.call is never acknowledged; later ones are.
    peer.peer.onRequest("tool.call", (params) => {
      received.push(params);
      arrived?.();
      return received.length === 1 ? new Promise<never>(() => {}) : { ok: true };
    });
    const arrival = () => new Promise<void>((resolve) => (arrived = resolve));
    const registered = await peer.peer.call("executor.register", registerParams());
    const executor = await harness.waitExecutor({
      filter: (e) => e.id === registered.executor_id,
    });
    const session = await executor.assignSession({ session_id: "ses_late_ack" });

    let next = arrival();
    const outcome = session.callTool({ tool: "bash", input: { command: "true" } }).then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    await next;
    next = arrival();
    await clock.advance(TIMEOUT);
    // Before the fix the call failed here (dispatch_failed) and nothing was sent again.
    const again = await Promise.race([next.then(() => "sent again"), outcome]);
    assert.equal(again, "sent again", `the call ended instead: ${JSON.stringify(again)}`);
    assert.equal(received.length, 2);
    assert.equal(received[1].tool_call_id, received[0].tool_call_id);

    await peer.completeBash(received[1], "done");
    const settled = await outcome;
    assert.ok("result" in settled, String((settled as { error?: unknown }).error));
    assert.equal(settled.result.outcome, "completed");
    assert.deepEqual(settled.result.structured_content, {
      stdout: "done",
      stderr: "",
      exit_code: 0,
    });
  });
});
