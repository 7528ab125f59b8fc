/**
 * The edge harness in real workerd (Miniflare), driven by the SDK's `ExecutorClient` over
 * WebSocket on 127.0.0.1 and by the brain API over fetch: register, tool calls, cancel,
 * progress, durable events, stop, drain, 4004 replacement, and the refusals (4003, -32012,
 * register first, 401 and 400 before the upgrade).
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BashInput, BashResult, DrainInfo, ToolHandler } from "../../executor/node.ts";
import { EDGE, Edge, gate, INFO, registerParams } from "./edge-fixture.ts";

const MACHINE_ROUTE = `machines/${EDGE.machineId}`;

describe("edge harness on workerd: sessions and tools", { timeout: 90_000 }, () => {
  let edge: Edge;
  before(async () => {
    edge = await Edge.start();
  });
  afterEach(() => edge.stopClients());
  after(() => edge.dispose());

  /** A started client with bash, ready for sessions; returns it and its executor id. */
  async function started(handle?: ToolHandler<BashInput, BashResult>) {
    const client = edge.client();
    client.tools.bash.handle(
      handle ?? ((input) => ({ stdout: `ran ${input.command}`, stderr: "", exit_code: 0 })),
    );
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    const registration = await client.start();
    return { client, executorId: registration.executor_id };
  }

  async function assign(executorId: string, sessionId: string) {
    const assigned = await edge.brain("POST", "/sessions", {
      session_id: sessionId,
      executor_id: executorId,
    });
    assert.equal(assigned.status, 201, JSON.stringify(assigned.body));
    const ready = await edge.brain("GET", `/sessions/${sessionId}?until=ready&wait_ms=20000`);
    assert.equal(ready.status, 200);
    assert.equal(ready.body.state, "ready");
  }

  it("exchanges a token, registers, and lists the executor on the brain API", async () => {
    const { executorId } = await started();
    assert.match(executorId, /^exec_/);
    const listed = await edge.brain("GET", "/executors");
    assert.equal(listed.status, 200);
    const view = listed.body.executors.find((e: any) => e.executor_id === executorId);
    assert.ok(view, "the executor is listed");
    assert.equal(view.connected, true);
    assert.equal(view.protocol, "bma.executor.v1.1");
    assert.equal(view.environment_id, EDGE.environmentId);
    assert.deepEqual(view.capabilities.tools, ["bash"]);
    assert.deepEqual(view.executor, INFO);
    assert.ok(Date.parse(view.token_expires_at) > Date.now(), "the token deadline is known");
  });

  it("calls a tool and waits for its result; a repeated tool_call_id runs once", async () => {
    let runs = 0;
    const { executorId } = await started((input) => {
      runs++;
      return { stdout: `run ${runs}: ${input.command}`, stderr: "", exit_code: 0 };
    });
    await assign(executorId, "ses_call");
    const body = { tool: "bash", input: { command: "ls" }, tool_call_id: "call_once" };
    const calls = await Promise.all(
      [1, 2, 3].map(() => edge.brain("POST", "/sessions/ses_call/tool-calls?wait_ms=20000", body)),
    );
    const again = await edge.brain("POST", "/sessions/ses_call/tool-calls?wait_ms=20000", body);
    assert.equal(runs, 1, "the tool ran once");
    for (const call of [...calls, again]) {
      assert.equal(call.status, 200);
      assert.equal(call.body.state, "settled");
      assert.equal(call.body.result.outcome, "completed");
      assert.equal(call.body.result.structured_content.stdout, "run 1: ls");
    }
    const read = await edge.brain("GET", "/tool-calls/call_once");
    assert.equal(read.status, 200);
    assert.equal(read.body.result.content[0].text, "run 1: ls");
  });

  it("refuses a tool the executor does not serve and bad input, before sending anything", async () => {
    const { executorId } = await started();
    await assign(executorId, "ses_refuse");
    const unknownTool = await edge.brain("POST", "/sessions/ses_refuse/tool-calls", {
      tool: "grep",
      input: { pattern: "x" },
    });
    assert.equal(unknownTool.status, 409);
    assert.equal(unknownTool.body.error.code, "capability_not_advertised");
    assert.equal(unknownTool.body.error.data.capability, "tool:grep");
    const badInput = await edge.brain("POST", "/sessions/ses_refuse/tool-calls", {
      tool: "bash",
      input: { command: 42 },
    });
    assert.equal(badInput.status, 400);
    assert.equal(badInput.body.error.code, "invalid_params");
    const noSession = await edge.brain("POST", "/sessions/ses_nope/tool-calls", {
      tool: "bash",
      input: { command: "ls" },
    });
    assert.equal(noSession.status, 404);
  });

  it("cancels a running call: the executor aborts it and reports canceled", async () => {
    const running = gate();
    const { executorId } = await started((_input, ctx) => {
      running.open();
      return new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
      });
    });
    await assign(executorId, "ses_cancel");
    const posted = await edge.brain("POST", "/sessions/ses_cancel/tool-calls", {
      tool: "bash",
      input: { command: "sleep 1000" },
      tool_call_id: "call_cancel",
    });
    assert.equal(posted.status, 202, "not settled yet");
    await running.promise;
    const canceled = await edge.brain("POST", "/tool-calls/call_cancel/cancel", { reason: "user" });
    assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
    assert.equal(canceled.body.canceled, true);
    const settled = await edge.brain("GET", "/tool-calls/call_cancel?wait_ms=20000");
    assert.equal(settled.status, 200);
    assert.equal(settled.body.result.outcome, "canceled");
    const late = await edge.brain("POST", "/tool-calls/call_cancel/cancel", {});
    assert.deepEqual(late.body, { canceled: false }, "a settled call is not canceled again");
  });

  it("relays tool.progress while the call runs", async () => {
    const release = gate();
    const { executorId } = await started(async (_input, ctx) => {
      ctx.progress({ message: "half way", progress: 1, total: 2 });
      await release.promise;
      return { stdout: "done", stderr: "", exit_code: 0 };
    });
    await assign(executorId, "ses_progress");
    await edge.brain("POST", "/sessions/ses_progress/tool-calls", {
      tool: "bash",
      input: { command: "build" },
      tool_call_id: "call_progress",
    });
    const progressed = await edge.brain(
      "GET",
      "/tool-calls/call_progress?progress_from=0&wait_ms=20000",
    );
    assert.equal(progressed.status, 202, "still running");
    assert.equal(progressed.body.progress.length, 1);
    assert.equal(progressed.body.progress[0].message, "half way");
    assert.equal(progressed.body.progress[0].total, 2);
    release.open();
    const settled = await edge.brain("GET", "/tool-calls/call_progress?wait_ms=20000");
    assert.equal(settled.body.result.structured_content.stdout, "done");
  });

  it("keeps durable events in order and stops the session after session.ended", async () => {
    const stopped: string[] = [];
    const { client, executorId } = await started();
    client.onSessionStop((session, params) => void stopped.push(`${session.id}:${params.reason}`));
    await assign(executorId, "ses_events");
    for (const type of ["one", "two", "three"]) {
      const ack = await client.call("session.event", { session_id: "ses_events", event: { type } });
      assert.equal(ack.duplicate, undefined);
    }
    const first = await edge.brain("GET", "/sessions/ses_events/events?from=0&limit=2");
    assert.deepEqual(first.body.events.map((e: any) => e.event.type), ["one", "two"]);
    assert.equal(first.body.next, 2);
    assert.equal(first.body.ended, false);
    const rest = await edge.brain("GET", `/sessions/ses_events/events?from=${first.body.next}`);
    assert.deepEqual(rest.body.events.map((e: any) => e.event.type), ["three"]);
    assert.deepEqual(rest.body.events.map((e: any) => e.index), [3]);

    const stop = await edge.brain("POST", "/sessions/ses_events/stop?wait_ms=20000", {
      reason: "done",
    });
    assert.equal(stop.status, 200, JSON.stringify(stop.body));
    assert.equal(stop.body.state, "ended");
    assert.equal(stop.body.end_reason, "done");
    assert.deepEqual(stopped, ["ses_events:done"]);
    const end = await edge.brain("GET", "/sessions/ses_events/events?from=3&wait_ms=20000");
    assert.deepEqual(end.body.events, []);
    assert.equal(end.body.ended, true, "the event stream ends with the session");
    const gone = await edge.brain("POST", "/sessions/ses_events/tool-calls", {
      tool: "bash",
      input: { command: "ls" },
    });
    assert.equal(gone.status, 409);
    assert.equal(gone.body.error.code, "session_ended");
  });

  it("surfaces the executor's -32009 beyond max_sessions", async () => {
    const client = edge.client({ maxSessions: 1 });
    client.tools.bash.handle(() => "ok");
    const { executor_id } = await client.start();
    const one = await edge.brain("POST", "/sessions", {
      session_id: "ses_max_1",
      executor_id,
    });
    assert.equal(one.status, 201);
    const two = await edge.brain("POST", "/sessions", {
      session_id: "ses_max_2",
      executor_id,
    });
    assert.equal(two.status, 409);
    assert.equal(two.body.error.code, -32009);
    const refused = await edge.brain("GET", "/sessions/ses_max_2");
    assert.equal(refused.body.state, "ended");
    assert.equal(refused.body.end_reason, "refused");
  });

  it("drains: the executor is told, heartbeats say so, and new sessions are refused", async () => {
    const drains: DrainInfo[] = [];
    const { client, executorId } = await started();
    client.onDrain((info) => void drains.push(info));
    const drained = await edge.brain("POST", `/executors/${executorId}/drain`, {
      reason: "maintenance",
    });
    assert.equal(drained.status, 200, JSON.stringify(drained.body));
    assert.deepEqual(drained.body.active_sessions, []);
    assert.equal(drains.length, 1);
    assert.equal(drains[0].source, "request");
    assert.equal(drains[0].reason, "maintenance");
    assert.equal(client.draining, true);
    const view = await edge.brain("GET", `/executors/${executorId}`);
    assert.equal(view.body.draining, true);
    const refused = await edge.brain("POST", "/sessions", {
      session_id: "ses_after_drain",
      executor_id: executorId,
    });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.data.reason, "draining");
  });

  it("closes the older connection with 4004 when the same machine registers again", async () => {
    const machine = (name: string) =>
      edge.client({
        environmentKey: undefined,
        environmentId: undefined,
        machineToken: EDGE.machineToken,
        machineId: EDGE.machineId,
        capabilities: { process: true },
        executor: { ...INFO, name },
      });
    const first = machine("first");
    first.tools.bash.handle(() => "first");
    const one = await first.start();
    assert.equal(one.executor_id, `exec_${EDGE.machineId}`);
    const second = machine("second");
    second.tools.bash.handle(() => "second");
    const two = await second.start();
    assert.equal(two.executor_id, one.executor_id);
    const ended = await first.closed;
    assert.equal(ended.reason, "close_code");
    assert.equal(ended.code, 4004);
    const listed = await edge.brain("GET", "/executors", undefined, MACHINE_ROUTE);
    assert.equal(listed.body.executors.length, 1);
    assert.equal(listed.body.executors[0].executor.name, "second");
    assert.equal(listed.body.executors[0].connected, true);
    assert.equal(second.connected, true);
  });
});

describe("edge harness on workerd: refusals", { timeout: 60_000 }, () => {
  let edge: Edge;
  before(async () => {
    // A frame limit far below the runtime's own, so the harness's check is what closes.
    edge = await Edge.start({ vars: { BMA_MAX_FRAME_BYTES: "65536" } });
  });
  after(() => edge.dispose());

  it("answers -32010 and closes with 4003 when register names another protocol", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token, ["bma.executor.v1.1", "bma.executor.v1"]);
    await raw.opened;
    assert.equal(raw.ws.protocol, "bma.executor.v1.1", "the 101 carries the chosen subprotocol");
    const answer = await raw.call("executor.register", registerParams("bma.executor.v1"));
    assert.equal(answer.error.code, -32010);
    assert.equal(answer.error.data.expected, "bma.executor.v1.1");
    assert.equal(answer.error.data.received, "bma.executor.v1");
    assert.equal((await raw.closed).code, 4003);
  });

  it("negotiates bma.executor.v1 when only it is offered", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token, ["bma.executor.v1"]);
    await raw.opened;
    assert.equal(raw.ws.protocol, "bma.executor.v1");
    const answer = await raw.call("executor.register", registerParams("bma.executor.v1"));
    assert.equal(answer.result.protocol, "bma.executor.v1");
    const refresh = await raw.call("executor.token.refresh", { token });
    assert.equal(refresh.error.code, -32601, "v1.1 methods do not exist on v1");
  });

  it("requires executor.register first, and only once", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token);
    await raw.opened;
    const early = await raw.call("executor.heartbeat", {});
    assert.equal(early.error.code, -32001);
    assert.equal(early.error.data.reason, "not_registered");
    const registered = await raw.call("executor.register", registerParams());
    assert.match(registered.result.executor_id, /^exec_/);
    const twice = await raw.call("executor.register", registerParams());
    assert.equal(twice.error.code, -32013);
    assert.equal(twice.error.data.reason, "already_registered");
    const wrongTypes = await raw.call("executor.heartbeat", { active_sessions: "x" });
    assert.equal(wrongTypes.error.code, -32602);
    const unknown = await raw.call("tool.result", {
      session_id: "ses_x",
      tool_call_id: "call_never",
      outcome: "completed",
    });
    assert.equal(unknown.error.code, -32002);
    assert.equal(unknown.error.data.reason, "unknown_tool_call");
    const heartbeat = await raw.call("executor.heartbeat", {});
    assert.equal(heartbeat.result.drain, false, "the connection still serves");
  });

  it("answers garbage with -32700 and closes on a frame over the size limit with 1009", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token);
    await raw.opened;
    raw.ws.send("{ not json");
    const parseError = await raw.next();
    assert.equal(parseError.error.code, -32700);
    assert.equal(parseError.id, null);
    const registered = await raw.call("executor.register", registerParams());
    assert.ok(registered.result, "the connection still serves");
    raw.ws.send(JSON.stringify({
      jsonrpc: "2.0",
      id: 99,
      method: "session.event",
      params: { session_id: "s", event: { type: "big", blob: "x".repeat(65536) } },
    }));
    const closed = await raw.closed;
    assert.equal(closed.code, 1009);
    assert.equal(closed.reason, "frame too large");
  });

  it("answers -32012 capability_missing to a machine without process and keeps it unregistered", async () => {
    const { token } = await edge.token(true);
    const raw = edge.raw(token);
    await raw.opened;
    const answer = await raw.call("executor.register", {
      protocol: "bma.executor.v1.1",
      environment_id: "",
      machine_id: EDGE.machineId,
      executor: INFO,
      capabilities: { tools: ["bash"] },
    });
    assert.equal(answer.error.code, -32012);
    assert.deepEqual(answer.error.data, { reason: "capability_missing", capability: "process" });
    const heartbeat = await raw.call("executor.heartbeat", {});
    assert.equal(heartbeat.error.data.reason, "not_registered");
    const listed = await edge.brain("GET", "/executors", undefined, MACHINE_ROUTE);
    assert.deepEqual(listed.body.executors, [], "no runtime is bound");
  });

  it("deduplicates session.event by JSON-RPC id", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token);
    await raw.opened;
    const { result } = await raw.call("executor.register", registerParams());
    const assigning = edge.brain("POST", "/sessions", {
      session_id: "ses_dedup",
      executor_id: result.executor_id,
    });
    const request = await raw.next();
    assert.equal(request.method, "session.assign");
    assert.equal(request.params.metadata.source, "harness");
    raw.ws.send(
      JSON.stringify({
        jsonrpc: "2.0",
        id: request.id,
        result: { session_id: "ses_dedup", accepted: true },
      }),
    );
    assert.equal((await assigning).status, 201);
    const frame = {
      jsonrpc: "2.0",
      id: "ev_1",
      method: "session.event",
      params: { session_id: "ses_dedup", event: { type: "note" } },
    };
    raw.ws.send(JSON.stringify(frame));
    raw.ws.send(JSON.stringify(frame));
    const acks = [await raw.next(), await raw.next()];
    assert.deepEqual(acks.map((a) => a.result.duplicate), [undefined, true]);
    const events = await edge.brain("GET", "/sessions/ses_dedup/events");
    assert.equal(events.body.events.length, 1);
  });

  it("refuses before the upgrade: 401 for a bad token, 400 without a known subprotocol", async () => {
    const bad = edge.raw("not-a-jwt");
    await assert.rejects(bad.opened, /401/);
    const { token } = await edge.token();
    const foreign = edge.raw(token, ["graphql-ws"]);
    await assert.rejects(foreign.opened, /400/);
  });

  it("guards the token endpoint and the brain API", async () => {
    const wrongKey = await fetch(`${edge.url}/v1/environments/${EDGE.environmentId}/token`, {
      method: "POST",
      headers: { authorization: "Bearer ek_wrong" },
      body: "{}",
    });
    assert.equal(wrongKey.status, 401);
    assert.deepEqual(await wrongKey.json(), { error: "invalid_credential" });
    const legacy = await fetch(`${edge.url}/v1/executors/token`, {
      method: "POST",
      headers: { authorization: `Bearer ${EDGE.environmentKey}` },
      body: JSON.stringify({ environment_id: EDGE.environmentId }),
    });
    assert.equal(legacy.status, 200);
    const issued = await legacy.json();
    assert.equal(issued.expires_in, 300);
    assert.equal(issued.url, `${edge.connectUrl}`);
    const noBearer = await fetch(
      `${edge.url}/v1/harness/environments/${EDGE.environmentId}/executors`,
    );
    assert.equal(noBearer.status, 401);
    const wrongBearer = await fetch(
      `${edge.url}/v1/harness/environments/${EDGE.environmentId}/executors`,
      { headers: { authorization: `Bearer ${EDGE.environmentKey}` } },
    );
    assert.equal(wrongBearer.status, 401, "an executor credential is not a brain credential");
  });
});
