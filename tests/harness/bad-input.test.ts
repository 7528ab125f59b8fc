/**
 * Bad input at the harness over real WebSockets: garbage frames, register with wrong types, a
 * second register, tool.result for unknown calls (or another executor's), requests before
 * register, a frame over the size limit. Each gets the specified error or close code, and a
 * bystander executor's session and pending call are untouched.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Transport } from "../../mod.ts";
import { Harness, type HarnessServer, type Session } from "../../harness/node.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { ExecutorPeer, OFFERED, registerParams, turns } from "../helpers/executor-peer.ts";

const MAX_FRAME = 64 * 1024;

/** A WebSocket driven frame by frame. */
class RawSocket {
  readonly #frames: string[] = [];
  readonly #waiters: ((frame: string) => void)[] = [];
  constructor(readonly transport: Transport) {
    transport.listen((frame) => {
      const waiter = this.#waiters.shift();
      if (waiter) waiter(frame);
      else this.#frames.push(frame);
    });
  }
  static async dial(url: string): Promise<RawSocket> {
    return new RawSocket(
      await dialWebSocket(url, { protocols: OFFERED, maxFrameBytes: 4 * MAX_FRAME }),
    );
  }
  send(text: string): void {
    this.transport.send(text);
  }
  async request(frame: unknown): Promise<any> {
    this.send(typeof frame === "string" ? frame : JSON.stringify(frame));
    const text = this.#frames.shift() ?? await new Promise<string>((r) => this.#waiters.push(r));
    return JSON.parse(text);
  }
}

const register = (id: number, params: unknown) => ({
  jsonrpc: "2.0",
  id,
  method: "executor.register",
  params,
});

describe("Harness: bad input", { timeout: 20_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  let bystander: ExecutorPeer;
  let session: Session;
  let pending: ReturnType<Session["callTool"]>;
  let pendingCallId: string;

  before(async () => {
    harness = new Harness({
      insecureNoAuth: true,
      maxFrameBytes: MAX_FRAME,
      maxUnregisteredRequests: 4,
    });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    bystander = await ExecutorPeer.dial(server.url);
    await bystander.start(registerParams({ environment_id: "", machine_id: "m_bystander" }));
    const executor = await harness.waitExecutor({ filter: (e) => e.id === "exec_m_bystander" });
    session = await executor.assignSession({ session_id: "ses_bystander" });
    await bystander.peer.call("session.ready", { session_id: "ses_bystander" });
    await bystander.peer.call("session.event", {
      session_id: "ses_bystander",
      event: { type: "before" },
    }, { id: "evt_before" });
    pending = session.callTool({ tool: "bash", input: { command: "sleep 1" } });
    pendingCallId = (await bystander.nextToolCall()).tool_call_id;
  });
  after(async () => {
    // The bystander is untouched by everything above: its call completes, its session lives.
    assert.equal(session.state, "ready");
    assert.equal(harness.executor("exec_m_bystander")?.connected, true);
    assert.equal((await bystander.peer.call("executor.heartbeat", {})).drain, false);
    await bystander.completeBash(
      { session_id: "ses_bystander", tool_call_id: pendingCallId } as never,
      "fine\n",
    );
    const result = await pending;
    assert.equal(result.outcome, "completed");
    assert.deepEqual(session.eventRecords.map((r) => r.event.type), ["before"]);
    await bystander.close();
    await harness.close();
    await server.close();
  });

  it("answers garbage frames with -32700 / -32600 / -32601 and keeps the connection", async () => {
    const raw = await RawSocket.dial(server.url);
    assert.deepEqual(await raw.request("{not json"), {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: "parse error" },
    });
    assert.equal((await raw.request("[]")).error.code, -32600);
    assert.equal((await raw.request("42")).error.code, -32600);
    assert.equal(
      (await raw.request({ jsonrpc: "2.0", id: 7, method: "no.such" })).error.code,
      -32601,
    );
    const ok = await raw.request(register(8, registerParams()));
    assert.match(ok.result.executor_id, /^exec_/);
    raw.transport.close();
  });

  it("answers an unknown method of 50,000 characters with -32601 repeating 200 of them", async () => {
    const raw = await RawSocket.dial(server.url);
    const method = "m".repeat(50_000);
    const answer = await raw.request({ jsonrpc: "2.0", id: 1, method });
    assert.equal(answer.error.code, -32601);
    assert.equal(answer.error.data.method, `${"m".repeat(200)}…`);
    assert.ok(JSON.stringify(answer).length < 1024);
    raw.transport.close();
  });

  it("answers register with wrong types with -32602 and stays unregistered", async () => {
    const raw = await RawSocket.dial(server.url);
    const wrong = await raw.request(register(1, {
      ...registerParams(),
      protocol: 11,
      capabilities: "all",
      executor: { name: 5 },
    }));
    assert.equal(wrong.error.code, -32602);
    assert.ok(Array.isArray(wrong.error.data.issues), "the issues travel in error.data");
    const paths = wrong.error.data.issues.map((i: { path: string[] }) => i.path[0]);
    for (const member of ["protocol", "capabilities", "executor"]) {
      assert.ok(paths.includes(member), `an issue names ${member}`);
    }
    const beat = await raw.request({ jsonrpc: "2.0", id: 2, method: "executor.heartbeat" });
    assert.equal(beat.error.code, -32001);
    assert.equal(beat.error.data.reason, "not_registered");
    raw.transport.close();
  });

  it("answers a second register with -32013 already_registered", async () => {
    const raw = await RawSocket.dial(server.url);
    assert.ok((await raw.request(register(1, registerParams()))).result, "first register");
    const again = await raw.request(register(2, registerParams()));
    assert.equal(again.error.code, -32013);
    assert.equal(again.error.data.reason, "already_registered");
    raw.transport.close();
  });

  it("answers tool.result for unknown calls, and for another executor's call, with -32002", async () => {
    const raw = await RawSocket.dial(server.url);
    await raw.request(
      register(1, registerParams({ environment_id: "", machine_id: "m_intruder" })),
    );
    const unknown = await raw.request({
      jsonrpc: "2.0",
      id: 2,
      method: "tool.result",
      params: { session_id: "ses_x", tool_call_id: "call_x", outcome: "completed" },
    });
    assert.equal(unknown.error.code, -32002);
    assert.equal(unknown.error.data.reason, "unknown_tool_call");
    // The bystander's own call and session, from another executor: unknown as well.
    const stolen = await raw.request({
      jsonrpc: "2.0",
      id: 3,
      method: "tool.result",
      params: { session_id: "ses_bystander", tool_call_id: pendingCallId, outcome: "failed" },
    });
    assert.equal(stolen.error.code, -32002);
    const event = await raw.request({
      jsonrpc: "2.0",
      id: 4,
      method: "session.event",
      params: { session_id: "ses_bystander", event: { type: "forged" } },
    });
    assert.equal(event.error.code, -32002);
    const ended = await raw.request({
      jsonrpc: "2.0",
      id: 5,
      method: "session.ended",
      params: { session_id: "ses_bystander" },
    });
    assert.deepEqual(ended.result, { ok: true, duplicate: true }, "not this executor's session");
    raw.transport.close();
  });

  it("closes with 1008 after repeated requests before register", async () => {
    const raw = await RawSocket.dial(server.url);
    for (let id = 1; id <= 4; id++) {
      const refused = await raw.request({ jsonrpc: "2.0", id, method: "executor.heartbeat" });
      assert.equal(refused.error.data.reason, "not_registered");
    }
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 5, method: "executor.heartbeat" }));
    assert.equal((await raw.transport.closed).code, 1008);
  });

  it("closes with 1008 after repeated frames of any kind that earn only a refusal before register", async () => {
    const raw = await RawSocket.dial(server.url);
    let closed = false;
    void raw.transport.closed.then(() => (closed = true));
    // Each answered with its error, or dropped: all count toward the same bound as requests.
    assert.equal((await raw.request("{not json")).error.code, -32700);
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 77, result: {} }));
    raw.send(JSON.stringify({ jsonrpc: "2.0", method: "no.such.notification" }));
    assert.equal((await raw.request(register(3, { protocol: 11 }))).error.code, -32602);
    assert.equal(closed, false, "four refusals: still open");
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "no.such" }));
    assert.equal((await raw.transport.closed).code, 1008);
  });

  it("closes with 1009 on a frame over the size limit", async () => {
    const raw = await RawSocket.dial(server.url);
    await raw.request(register(1, registerParams()));
    raw.send(JSON.stringify({
      jsonrpc: "2.0",
      method: "session.status",
      params: { session_id: "ses_big", status: "running", detail: "x".repeat(MAX_FRAME) },
    }));
    assert.equal((await raw.transport.closed).code, 1009);
    await turns();
  });
});
