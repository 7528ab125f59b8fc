/**
 * The edge harness in real workerd (Miniflare), driven by the SDK's `ExecutorClient` over
 * WebSocket on 127.0.0.1 and by a brain inside the Durable Object (the conformance harness
 * agent on the object's `Harness`, `fixture-worker.ts`): the token endpoint and the routing of
 * each connection to its object, register, tool calls, 4004 replacement, and the refusals
 * (4003, -32012, register first, -32700 and 1009, 401 and 400 before the upgrade). The
 * behaviour the other harnesses share runs in the conformance matrix's Workers column.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { EDGE, Edge, INFO, registerParams } from "./edge-fixture.ts";

const MACHINE_ROUTE = `machines/${EDGE.machineId}`;

describe("edge harness on workerd: routing and identity", { timeout: 90_000 }, () => {
  let edge: Edge;
  before(async () => {
    edge = await Edge.start();
  });
  afterEach(() => edge.stopClients());
  after(() => edge.dispose());

  it("exchanges a token, registers in the environment's object, and serves a call", async () => {
    let runs = 0;
    const client = edge.client();
    client.tools.bash.handle((input) => {
      runs++;
      return { stdout: `ran ${input.command}`, stderr: "", exit_code: 0 };
    });
    const { executor_id } = await client.start();
    assert.match(executor_id, /^exec_/);
    const view = await edge.driver("executor", [INFO.name]);
    assert.equal(view.id, executor_id);
    assert.equal(view.connected, true);
    assert.equal(view.protocol, "bma.executor.v1.1");
    assert.deepEqual(view.tools, ["bash"]);
    assert.equal(await edge.driver("assign", [INFO.name, "ses_call"]), "ready");
    const call = { tool: "bash", input: { command: "ls" }, tool_call_id: "call_once" };
    const [one, two] = await Promise.all([
      edge.driver("call", ["ses_call", call]),
      edge.driver("call", ["ses_call", call]),
    ]);
    assert.equal(runs, 1, "a repeated tool_call_id runs once");
    assert.deepEqual(one.result, two.result);
    assert.equal(one.result.structured_content.stdout, "ran ls");
    await assert.rejects(
      edge.driver("executor", [INFO.name], MACHINE_ROUTE),
      /no executor named/,
      "another object holds nothing of it",
    );
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
    const view = await edge.driver("executor", ["second"], MACHINE_ROUTE);
    assert.equal(view.id, one.executor_id);
    assert.equal(view.connected, true);
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
    await assert.rejects(
      edge.driver("executor", [INFO.name], MACHINE_ROUTE),
      /no executor named/,
      "no runtime is bound",
    );
  });

  it("deduplicates session.event by JSON-RPC id", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token);
    await raw.opened;
    const registered = await raw.call("executor.register", registerParams());
    assert.match(registered.result.executor_id, /^exec_/);
    const assigning = edge.driver("assign", [INFO.name, "ses_dedup"]);
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
    const ready = await raw.call("session.ready", { session_id: "ses_dedup" });
    assert.ok(ready.result);
    assert.equal(await assigning, "ready");
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
    assert.deepEqual(await edge.driver("events", ["ses_dedup", 1]), [{ type: "note" }]);
  });

  it("refuses before the upgrade: 401 for a bad token, 400 without a known subprotocol", async () => {
    const bad = edge.raw("not-a-jwt");
    await assert.rejects(bad.opened, /401/);
    const { token } = await edge.token();
    const foreign = edge.raw(token, ["graphql-ws"]);
    await assert.rejects(foreign.opened, /400/);
  });

  it("refuses what a browser sends for another origin's page: 403 before the upgrade, and on uploads", async () => {
    const { token } = await edge.token();
    const browser = {
      "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0",
      "sec-fetch-site": "cross-site",
    };
    const fromPage = edge.raw(token, ["bma.executor.v1.1"], {
      origin: "https://evil.example",
      ...browser,
    });
    await assert.rejects(fromPage.opened, /403/);
    const upload = await fetch(`${edge.url}/v1/environments/${EDGE.environmentId}/artifacts`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        origin: "https://evil.example",
        ...browser,
        "content-type": "text/plain",
      },
      body: "x",
    });
    assert.equal(upload.status, 403);
    assert.equal((await upload.json()).error, "forbidden_origin");
  });

  it("guards the token endpoint", async () => {
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
  });
});
