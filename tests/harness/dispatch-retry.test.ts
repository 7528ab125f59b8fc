/**
 * A `tool.call` whose ack does not come within the request timeout (a held link, a busy
 * executor) is sent again on the same connection, not failed: the executor acknowledges a
 * duplicate `tool_call_id` without running it again, so the call completes once; but not past its
 * `timeout_ms` (and a request timeout) when the ack never comes. A call whose frame is over the
 * link's limit is refused, never sent. Over a real WebSocket, on the injectable clock.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { FrameTooLargeError, ManualClock } from "../../mod.ts";
import {
  brainApi,
  Harness,
  type HarnessOptions,
  type HarnessServer,
  MemoryHarnessStore,
  SessionEndedError,
  ToolOutcomeUnknownError,
} from "../../harness/node.ts";
import type { ToolCallParams } from "../../protocol/mod.ts";
import { ExecutorPeer, registerParams, until } from "../helpers/executor-peer.ts";

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

describe("Harness: a tool.call that is never acknowledged, or cannot be sent", {
  timeout: 20_000,
}, () => {
  const closing: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  /**
   * A harness, and an executor that heartbeats (its link stays) but acknowledges no tool.call,
   * registered with a session; `silent()` dials another such executor.
   */
  async function rig(options: Partial<HarnessOptions> = {}, sessionId = "ses_unacked") {
    const clock = new ManualClock();
    const harness = new Harness({
      clock,
      heartbeatIntervalMs: 60_000,
      requestTimeoutMs: TIMEOUT,
      insecureNoAuth: true,
      ...options,
    });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closing.push(() => harness.close(), () => server.close());
    const silent = async () => {
      const peer = await ExecutorPeer.dial(server.url);
      closing.push(() => peer.close());
      peer.serveDefaults();
      const received: ToolCallParams[] = [];
      peer.peer.onRequest("tool.call", (params) => {
        received.push(params);
        return new Promise<never>(() => {});
      });
      return { peer, received };
    };
    const first = await silent();
    const registered = await first.peer.peer.call("executor.register", registerParams());
    const executor = await harness.waitExecutor({
      filter: (e) => e.id === registered.executor_id,
    });
    const session = await executor.assignSession({ session_id: sessionId });
    return { clock, harness, session, received: first.received, first, registered, silent };
  }

  it("ends with outcome unknown once its timeout_ms and a request timeout passed without an ack", async () => {
    const { clock, session, received } = await rig();
    const outcome = session.callTool({
      tool: "bash",
      input: { command: "true" },
      timeout_ms: 3 * TIMEOUT,
    }).then(() => undefined, (error: unknown) => error);
    let ended: unknown;
    void outcome.then((error) => (ended = error));
    // Sent again at each request timeout while the ack does not come, within the bound.
    for (let i = 0; i < 3; i++) await clock.advance(TIMEOUT);
    assert.equal(ended, undefined, "ended within timeout_ms + the request timeout");
    assert.ok(received.length >= 3, String(received.length));
    await clock.advance(TIMEOUT);
    const error = await outcome;
    assert.ok(error instanceof ToolOutcomeUnknownError, String(error));
    assert.equal(error.reason, "dispatch_failed");
    assert.match(String((error.cause as Error)?.message), /not acknowledged within its timeout_ms/);
  });

  it("counts the wait for an ack from its first sending on each connection, not an earlier one's", async () => {
    const { clock, session, first, registered, silent } = await rig({}, "ses_away");
    let ended: unknown;
    const outcome = session.callTool({
      tool: "bash",
      input: { command: "true" },
      timeout_ms: 2 * TIMEOUT,
    }).then(() => "completed", (error: unknown) => (ended = error));
    await until(() => first.received.length === 1);
    // The link drops before the ack; the executor is back after 4 request timeouts (its lease
    // is far longer), past the call's timeout_ms and a request timeout since its first sending.
    await first.peer.close();
    await clock.advance(4 * TIMEOUT);
    const second = await silent();
    await second.peer.peer.call(
      "executor.register",
      registerParams({
        resume: { executor_id: registered.executor_id, active_sessions: ["ses_away"] },
      }),
    );
    await until(() => second.received.length === 1);
    await clock.advance(TIMEOUT);
    // Before, the call ended here (dispatch_failed) after one sending on the new connection.
    await until(() => second.received.length === 2 || ended !== undefined);
    assert.equal(ended, undefined, `ended after one request timeout: ${ended}`);
    await clock.advance(2 * TIMEOUT);
    const error = await outcome;
    assert.ok(error instanceof ToolOutcomeUnknownError, String(error));
    assert.equal(error.reason, "dispatch_failed");
  });

  it("is refused as too large for the link when its frame is over the limit: FrameTooLargeError (brain API 413), never sent", async () => {
    // A store: a harness started again on it answers repeats from its records.
    const store = new MemoryHarnessStore();
    const { harness, session, received } = await rig({ maxFrameBytes: 64 * 1024, store });
    const big = { command: `echo ${"x".repeat(100 * 1024)}` };
    const error = await session.callTool({ tool: "bash", input: big, tool_call_id: "call_big" })
      .then(() => undefined, (error: unknown) => error);
    assert.ok(error instanceof FrameTooLargeError, String(error));
    assert.equal(error.limit, 64 * 1024);
    assert.equal(received.length, 0, "nothing was sent");
    // A repeat of the id answers the same refusal; the brain API says 413.
    const api = brainApi(harness, { authorize: () => true });
    const answer = await api.fetch(
      new Request(`http://h/sessions/ses_unacked/tool-calls`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ tool: "bash", input: big, tool_call_id: "call_big" }),
      }),
    );
    assert.equal(answer.status, 413);
    const body = await answer.json() as { error: { code: string; data: { limit: number } } };
    assert.equal(body.error.code, "payload_too_large");
    assert.equal(body.error.data.limit, 64 * 1024);
    // A harness started again on the store answers the same refusal from the call's record
    // (before: outcome unknown, dispatch_failed).
    await harness.close();
    const restarted = new Harness({ store, insecureNoAuth: true, heartbeatIntervalMs: 60_000 });
    closing.push(() => restarted.close());
    const recovered = await restarted.findSession("ses_unacked");
    assert.ok(recovered, "the session is read back");
    const again = await recovered.callTool({ tool: "bash", input: big, tool_call_id: "call_big" })
      .then(() => undefined, (error: unknown) => error);
    assert.ok(again instanceof FrameTooLargeError, String(again));
  });
});

describe("Harness: work asked for while a stop is on its way", { timeout: 20_000 }, () => {
  it("is refused SessionEndedError (stopping) at once, not sent for the executor to refuse (-32002), while any stop is on its way", async () => {
    const harness = new Harness({ heartbeatIntervalMs: 60_000, insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const peer = await ExecutorPeer.dial(server.url);
    try {
      await peer.start();
      // The stop is answered only when the test says so.
      let answer: (() => void) | undefined;
      peer.peer.onRequest("session.stop", ({ session_id }) =>
        new Promise((resolve) => {
          answer = () => {
            resolve({ stopping: true });
            queueMicrotask(() =>
              void peer.peer.call("session.ended", { session_id, reason: "stopped" })
                .catch(() => {})
            );
          };
        }));
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_stopping" });
      // Two stops on their way; the first is given up (aborted): the other still is.
      const giveUp = new AbortController();
      const abandoned = session.stop("first", { signal: giveUp.signal }).catch((e: unknown) => e);
      const stopped = session.stop("bye");
      giveUp.abort(new Error("given up"));
      assert.ok((await abandoned) instanceof Error);
      const refused = await session.callTool({ tool: "bash", input: { command: "true" } })
        .then(() => undefined, (error: unknown) => error);
      assert.ok(refused instanceof SessionEndedError, String(refused));
      assert.equal(refused.reason, "stopping");
      assert.equal(peer.toolCalls.length, 0, "nothing was sent");
      while (!answer) await new Promise((resolve) => setTimeout(resolve, 5));
      answer();
      await stopped;
      assert.equal(session.state, "ended");
    } finally {
      await peer.close().catch(() => {});
      await harness.close();
      await server.close();
    }
  });
});
