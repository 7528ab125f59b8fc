/**
 * Sessions and tool calls through the public API, with a Peer playing the executor over a
 * real WebSocket: assignment, readiness, idempotent tool calls, tool.result rules, typed tool
 * slots, cancellation, progress, capability gating, fs.mount / fs.unmount, stop and drain.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CapabilityNotAdvertisedError,
  InternalError,
  InvalidResultError,
  NotFoundError,
  RequestAbortedError,
  ResourceExhaustedError,
} from "../../mod.ts";
import type { FsMountStatus, ToolCallParams, ToolCancelParams } from "../../protocol/mod.ts";
import {
  type ExecutorHandle,
  Harness,
  type HarnessServer,
  SessionEndedError,
  SessionRefusedError,
  ToolOutcomeUnknownError,
} from "../../harness/node.ts";
import { ExecutorPeer, registerParams, turns } from "../helpers/executor-peer.ts";

describe("Harness: sessions and tools", { timeout: 20_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];
  let next = 0;

  before(async () => {
    harness = new Harness({ insecureNoAuth: true, fileServiceUrl: "https://files.example" });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  afterEach(async () => {
    for (const peer of peers.splice(0)) await peer.close().catch(() => {});
  });
  after(async () => {
    await harness.close();
    await server.close();
  });

  /** A fresh executor (its own machine id) serving the default handlers. */
  async function executor(
    capabilities = registerParams().capabilities,
    setup: (peer: ExecutorPeer) => void = () => {},
  ): Promise<{ peer: ExecutorPeer; executor: ExecutorHandle }> {
    const machineId = `m_s${++next}`;
    const peer = await ExecutorPeer.dial(server.url);
    peers.push(peer);
    setup(peer);
    await peer.start(registerParams({
      environment_id: "",
      machine_id: machineId,
      capabilities: { process: true, ...capabilities },
    }));
    const handle = await harness.waitExecutor({ filter: (e) => e.id === `exec_${machineId}` });
    return { peer, executor: handle };
  }

  it("assigns a long-lived session by default and waits for session.ready", async () => {
    const { peer, executor: handle } = await executor();
    const assigned: unknown[] = [];
    peer.peer.onRequest("session.assign", (params) => {
      assigned.push(params);
      return { session_id: params.session_id, accepted: true };
    });
    const session = await handle.assignSession({ session_id: "ses_ready" });
    assert.deepEqual(assigned, [{ session_id: "ses_ready", metadata: { source: "harness" } }]);
    assert.equal(session.state, "assigned");
    assert.equal(harness.sessions.get("ses_ready"), session);
    const ready = session.ready();
    assert.deepEqual(await peer.peer.call("session.ready", { session_id: "ses_ready" }), {
      ok: true,
    });
    await ready;
    assert.equal(session.state, "ready");
    assert.deepEqual(
      await peer.peer.call("session.ready", { session_id: "ses_ready" }),
      { ok: true, duplicate: true },
    );
    const unknown = await peer.peer.call("session.ready", { session_id: "ses_nope" }).catch((e) =>
      e
    );
    assert.ok(unknown instanceof NotFoundError, "unknown session is -32002");
    assert.equal(unknown.reason, "unknown_session");
  });

  it("surfaces -32009 from session.assign as ResourceExhaustedError and keeps no session", async () => {
    const { peer, executor: handle } = await executor();
    peer.peer.onRequest("session.assign", () => {
      throw new ResourceExhaustedError("too many sessions", { reason: "max_sessions" });
    });
    const error = await handle.assignSession({ session_id: "ses_full" }).catch((e) => e);
    assert.ok(error instanceof ResourceExhaustedError, String(error));
    assert.equal(error.reason, "max_sessions");
    assert.equal(harness.sessions.has("ses_full"), false);
    assert.equal(handle.sessions.size, 0);
  });

  it("repeats an assign with the session's own metadata, whatever the repeat carries", async () => {
    const { peer, executor: handle } = await executor();
    const assigned: unknown[] = [];
    peer.peer.onRequest("session.assign", (params) => {
      assigned.push(params.metadata);
      return { session_id: params.session_id, accepted: true };
    });
    const first = await handle.assignSession({ session_id: "ses_rep", metadata: { life: "1" } });
    const again = await handle.assignSession({ session_id: "ses_rep", metadata: { life: "2" } });
    assert.equal(again, first);
    assert.deepEqual(assigned, [
      { source: "harness", life: "1" },
      { source: "harness", life: "1" },
    ]);
    assert.deepEqual(again.metadata, { source: "harness", life: "1" });
  });

  it("refuses a session id that another executor holds", async () => {
    const a = await executor();
    const b = await executor();
    await a.executor.assignSession({ session_id: "ses_taken" });
    const error = await b.executor.assignSession({ session_id: "ses_taken" }).catch((e) => e);
    assert.ok(error instanceof SessionRefusedError, String(error));
    assert.equal(error.reason, "session_exists");
  });

  it("is idempotent by tool_call_id: a repeat returns the same outcome and the tool runs once", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_idem" });
    const first = session.callTool({
      tool: "bash",
      input: { command: "date" },
      tool_call_id: "call_same",
    });
    const second = session.callTool({
      tool: "bash",
      input: { command: "date" },
      tool_call_id: "call_same",
    });
    const call = await peer.nextToolCall();
    assert.equal(call.tool_call_id, "call_same");
    await peer.completeBash(call, "Mon\n");
    const [a, b] = await Promise.all([first, second]);
    assert.deepEqual(a, b);
    assert.equal(a.outcome, "completed");
    const third = await session.callTool({
      tool: "bash",
      input: { command: "date" },
      tool_call_id: "call_same",
    });
    assert.deepEqual(third, a);
    await turns();
    assert.equal(peer.toolCalls.length, 1, "one tool.call reached the executor");
  });

  it("generates a tool_call_id when none is given", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_gen" });
    const pending = session.callTool({ tool: "bash", input: { command: "ls" } });
    const call = await peer.nextToolCall();
    assert.match(call.tool_call_id, /^call_[0-9a-f]{24}$/);
    await peer.completeBash(call, "");
    assert.equal((await pending).tool_call_id, call.tool_call_id);
  });

  it("answers tool.result for an unknown call with -32002 and a repeated one with duplicate", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_results" });
    const unknown = await peer.peer.call("tool.result", {
      session_id: "ses_results",
      tool_call_id: "call_never",
      outcome: "completed",
    }).catch((e) => e);
    assert.ok(unknown instanceof NotFoundError, String(unknown));
    assert.equal(unknown.reason, "unknown_tool_call");

    const pending = session.callTool({ tool: "bash", input: { command: "id" } });
    const call = await peer.nextToolCall();
    assert.deepEqual(await peer.completeBash(call, "uid=0\n"), { ok: true });
    assert.deepEqual(await peer.completeBash(call, "other\n"), { ok: true, duplicate: true });
    const result = await pending;
    assert.deepEqual(
      result.content,
      [{ type: "text", text: "uid=0\n" }],
      "the first result counts",
    );
  });

  it("answers -32002, not duplicate, a result for a call it wrote off (no result was accepted)", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_off" });
    let sent: ToolCallParams | undefined;
    // The executor fails the call's dispatch (-32603): the harness settles it as failed.
    peer.peer.onRequest("tool.call", (params) => {
      sent = params;
      throw new InternalError("the dispatch broke");
    });
    const written = await session.callTool({ tool: "bash", input: { command: "id" } })
      .then(() => undefined, (e) => e);
    assert.ok(written instanceof InternalError, String(written));
    const late = await peer.completeBash(sent!, "uid=0\n").then(() => undefined, (e) => e);
    assert.ok(late instanceof NotFoundError, `expected -32002, got ${late}`);
    assert.equal(late.reason, "unknown_tool_call");
  });

  it("types session.tools.<name>.call and checks structured_content", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_typed" });
    const typed = session.tools.bash.call({ command: "echo hi" }, { toolCallId: "call_typed" });
    const call = await peer.nextToolCall();
    assert.deepEqual(call.input, { command: "echo hi" });
    await peer.completeBash(call, "hi\n");
    const result = await typed;
    const bash = result.structured_content!;
    assert.equal(bash.stdout, "hi\n");
    assert.equal(bash.exit_code, 0);

    const broken = session.tools.bash.call({ command: "x" }).catch((e) => e);
    const brokenCall = await peer.nextToolCall();
    await peer.peer.call("tool.result", {
      session_id: brokenCall.session_id,
      tool_call_id: brokenCall.tool_call_id,
      outcome: "completed",
      structured_content: { stdout: 1 },
    });
    assert.ok(await broken instanceof InvalidResultError, "structured_content is checked");
    // Input is checked against the tool's schema before anything is sent.
    await assert.rejects(
      session.tools.bash.call({ command: "" }),
      { name: "InvalidOutgoingParamsError" },
    );
  });

  it("refuses locally to call a tool the executor did not advertise", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_gate" });
    const error = await session.tools.read.call({ path: "a.txt" }).catch((e) => e);
    assert.ok(error instanceof CapabilityNotAdvertisedError, String(error));
    assert.equal(error.capability, "tool:read");
    await turns();
    assert.equal(peer.toolCalls.length, 0);
    // executor.capabilities.update adds it.
    peer.peer.notify("executor.capabilities.update", {
      capabilities: { process: true, tools: ["bash", "read"], files: { enabled: true } },
    });
    await turns();
    assert.deepEqual(handle.capabilities.tools, ["bash", "read"]);
    const pending = session.tools.read.call({ path: "a.txt" });
    const call = await peer.nextToolCall();
    assert.equal(call.tool, "read");
    await peer.peer.call("tool.result", {
      session_id: call.session_id,
      tool_call_id: call.tool_call_id,
      outcome: "completed",
      structured_content: { content: "text" },
    });
    assert.equal((await pending).structured_content?.content, "text");
  });

  it("cancels a running call: tool.cancel, then the call ends canceled", async () => {
    const { peer, executor: handle } = await executor();
    const cancels: ToolCancelParams[] = [];
    peer.peer.onRequest("tool.cancel", (params) => {
      cancels.push(params);
      return { canceled: true };
    });
    const session = await handle.assignSession({ session_id: "ses_cancel" });
    const pending = session.callTool({ tool: "bash", input: { command: "sleep 60" } });
    const call = await peer.nextToolCall();
    assert.deepEqual(await session.cancelTool(call.tool_call_id), { canceled: true });
    assert.equal(cancels[0].tool_call_id, call.tool_call_id);
    await peer.peer.call("tool.result", {
      session_id: call.session_id,
      tool_call_id: call.tool_call_id,
      outcome: "canceled",
    });
    assert.equal((await pending).outcome, "canceled");

    // Aborting the wait also asks the executor to cancel.
    const controller = new AbortController();
    const aborted = session.callTool(
      { tool: "bash", input: { command: "sleep 60" } },
      { signal: controller.signal },
    );
    const abortedCall = await peer.nextToolCall();
    controller.abort();
    await assert.rejects(aborted, RequestAbortedError);
    await turns();
    assert.equal(cancels.at(-1)?.tool_call_id, abortedCall.tool_call_id);
  });

  it("relays tool.progress to the caller", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_progress" });
    const seen: unknown[] = [];
    const pending = session.callTool(
      { tool: "bash", input: { command: "make" } },
      { onProgress: (progress) => seen.push(progress.output?.text) },
    );
    const call = await peer.nextToolCall();
    peer.peer.notify("tool.progress", {
      session_id: call.session_id,
      tool_call_id: call.tool_call_id,
      output: { stream: "stdout", text: "building\n" },
    });
    await turns();
    await peer.completeBash(call, "done\n");
    await pending;
    assert.deepEqual(seen, ["building\n"]);
  });

  it("gates fs.mount by fs.fuse with a typed local error", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_nofuse" });
    const error = await handle.mount(session, [{ view: "repo", path: "/mnt/repo", token: "t1" }])
      .catch((e) => e);
    assert.ok(error instanceof CapabilityNotAdvertisedError, String(error));
    assert.equal(error.capability, "fs.fuse");
    await assert.rejects(handle.unmount(session), CapabilityNotAdvertisedError);
    assert.equal(peer.peer.pendingRequests, 0);
  });

  it("mounts and unmounts session views with typed results", async () => {
    const mounts = new Map<string, { path: string; readonly: boolean; token: string }>();
    const received: unknown[] = [];
    const { executor: handle } = await executor(
      { fs: { fuse: true } },
      (peer) => {
        // A recording mounter with the contract's idempotency rules.
        peer.peer.onRequest("fs.mount", (params) => {
          received.push(params);
          const statuses: FsMountStatus[] = params.views.map((view) => {
            const key = `${params.session_id}/${view.view}`;
            const before = mounts.get(key);
            const readonly = view.readonly ?? false;
            mounts.set(key, { path: view.path, readonly, token: view.token });
            const status = !before
              ? "mounted"
              : before.path === view.path && before.readonly === readonly
              ? "renewed"
              : "remounted";
            return { view: view.view, path: view.path, status };
          });
          return { mounts: statuses };
        });
        peer.peer.onRequest("fs.unmount", ({ session_id }) => {
          for (const key of [...mounts.keys()]) {
            if (key.startsWith(`${session_id}/`)) mounts.delete(key);
          }
          return { status: "unmounted", flushed: true };
        });
      },
    );
    const session = await handle.assignSession({ session_id: "ses_fuse" });
    const views = [{ view: "repo", path: "/mnt/repo", token: "tok_1" }];
    const first = await handle.mount(session, views);
    assert.deepEqual(first.mounts, [{ view: "repo", path: "/mnt/repo", status: "mounted" }]);
    assert.equal((received[0] as { service_url: string }).service_url, "https://files.example");
    const renewed = await handle.mount(session, [{ ...views[0], token: "tok_2" }]);
    assert.equal(renewed.mounts[0].status, "renewed");
    const moved = await handle.mount(session, [{ ...views[0], path: "/mnt/other" }], {
      serviceUrl: "https://files2.example",
    });
    assert.equal(moved.mounts[0].status, "remounted");
    assert.deepEqual(await handle.unmount(session, { flush: true }), {
      status: "unmounted",
      flushed: true,
    });
  });

  it("stop() resolves after session.ended; later calls fail with SessionEndedError", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({ session_id: "ses_stop" });
    const pending = session.callTool({ tool: "bash", input: { command: "sleep 60" } });
    await peer.nextToolCall();
    assert.deepEqual(await session.stop("done"), { reason: "done" });
    assert.equal(session.state, "ended");
    const lost = await pending.catch((e) => e);
    assert.ok(lost instanceof ToolOutcomeUnknownError, String(lost));
    assert.equal(lost.reason, "session_ended");
    await assert.rejects(
      session.callTool({ tool: "bash", input: { command: "ls" } }),
      SessionEndedError,
    );
    assert.equal(harness.sessions.has("ses_stop"), false);
    assert.deepEqual(
      await peer.peer.call("session.ended", { session_id: "ses_stop" }),
      { ok: true, duplicate: true },
    );
  });

  it("a one-shot session ends when the executor reports session.ended after its call", async () => {
    const { peer, executor: handle } = await executor();
    const session = await handle.assignSession({
      session_id: "ses_once",
      metadata: { source: "api" },
    });
    assert.equal(session.metadata.source, "api");
    const pending = session.callTool({ tool: "bash", input: { command: "true" } });
    const call = await peer.nextToolCall();
    await peer.completeBash(call, "");
    await peer.peer.call("session.ended", { session_id: "ses_once", reason: "one_shot_done" });
    assert.equal((await pending).outcome, "completed");
    assert.deepEqual(await session.ended, { reason: "one_shot_done" });
  });

  it("drain() sends executor.drain, later heartbeats say drain, no new sessions", async () => {
    const { peer, executor: handle } = await executor();
    await handle.assignSession({ session_id: "ses_draining" });
    peer.peer.onRequest("executor.drain", () => ({ active_sessions: ["ses_draining"] }));
    assert.deepEqual(await handle.drain({ reason: "deploy" }), {
      active_sessions: ["ses_draining"],
    });
    assert.equal((await peer.peer.call("executor.heartbeat", {})).drain, true);
    const error = await handle.assignSession({ session_id: "ses_new" }).catch((e) => e);
    assert.ok(error instanceof SessionRefusedError, String(error));
    assert.equal(error.reason, "draining");
  });

  it("close() tells the executor (executor.close, 1000) and fails its pending calls", async () => {
    const { peer, executor: handle } = await executor();
    const closes: unknown[] = [];
    peer.peer.onNotification("executor.close", (params) => {
      closes.push(params);
    });
    const session = await handle.assignSession({ session_id: "ses_closing" });
    const pending = session.callTool({ tool: "bash", input: { command: "sleep 60" } });
    await peer.nextToolCall();
    await handle.close("maintenance");
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof ToolOutcomeUnknownError, String(error));
    assert.equal(error.reason, "executor_closed");
    assert.equal((await peer.peer.closed).code, 1000);
    assert.deepEqual(closes, [{ reason: "maintenance" }]);
    assert.deepEqual(await handle.closed, { reason: "closed" });
  });

  it("an executor that sends executor.close is gone at once, without waiting for its lease", async () => {
    const { peer, executor: handle } = await executor();
    peer.peer.notify("executor.close", { reason: "shutdown" });
    await peer.close(1000, "bye");
    assert.deepEqual(await handle.closed, { reason: "closed" });
    assert.equal(harness.executor(handle.id), undefined);
  });

  it("sends capability requests typed by the contract and gates them", async () => {
    const { peer, executor: handle } = await executor({ process: true });
    peer.peer.onRequest("process.list", () => ({ processes: [] }));
    assert.deepEqual(await handle.request("process.list", { session_id: "ses_x" }), {
      processes: [],
    });
    await assert.rejects(
      handle.request("terminal.open", { session_id: "ses_x" }),
      CapabilityNotAdvertisedError,
    );
  });
});
