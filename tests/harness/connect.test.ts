/**
 * Connecting to the harness over real WebSockets on 127.0.0.1 and a Unix socket: subprotocol
 * negotiation, authentication before the upgrade, register-first, protocol mismatch, the
 * machine-scope capability rule, executor identity and 4004 replacement.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CapabilityMissingError,
  ConflictError,
  ConnectionClosedError,
  createLinkedTransportPair,
  DialError,
  ForbiddenError,
  ProtocolMismatchError,
} from "../../mod.ts";
import {
  ConnectRefusedError,
  type ConnectRequest,
  type ExecutorEvent,
  Harness,
  type HarnessServer,
  InsecureServeError,
  NoServerFactoryError,
} from "../../harness/node.ts";
import { Harness as CoreHarness } from "../../harness/mod.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { ExecutorPeer, OFFERED, registerParams, turns } from "../helpers/executor-peer.ts";

const GOOD = "Bearer good-token";

/** Accepts `Bearer good-token` (environment env_1) and `Bearer machine-<id>` tokens. */
function authenticate(request: ConnectRequest) {
  if (request.token === "good-token") {
    return { scope: "environment" as const, environmentId: "env_1" };
  }
  const machine = /^machine-(.+)$/.exec(request.token ?? "");
  if (machine) {
    return {
      scope: "machine" as const,
      machineId: machine[1],
      executorId: `exec_${machine[1]}`,
    };
  }
  throw new Error("refused");
}

describe("Harness: connect", { timeout: 20_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];
  const seenRequests: ConnectRequest[] = [];

  before(async () => {
    harness = new Harness({
      authenticate: (request) => {
        seenRequests.push(request);
        return authenticate(request);
      },
    });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  afterEach(async () => {
    for (const peer of peers.splice(0)) await peer.close().catch(() => {});
  });
  after(async () => {
    await harness.close();
    await server.close();
  });

  async function dial(options: Parameters<typeof ExecutorPeer.dial>[1] = {}) {
    const peer = await ExecutorPeer.dial(server.url, {
      headers: { authorization: GOOD },
      ...options,
    });
    peers.push(peer);
    return peer;
  }

  it("prefers bma.executor.v1.1 from the offered list", async () => {
    const peer = await dial({ protocols: ["bma.executor.v1", "bma.executor.v1.1"] });
    assert.equal(peer.transport.protocol, "bma.executor.v1.1");
    const result = await peer.start();
    assert.equal(result.protocol, "bma.executor.v1.1");
    assert.match(result.executor_id, /^exec_/);
    assert.equal(typeof result.heartbeat_interval_ms, "number");
  });

  it("accepts bma.executor.v1 alone", async () => {
    const peer = await dial({ protocols: ["bma.executor.v1"] });
    assert.equal(peer.transport.protocol, "bma.executor.v1");
    const result = await peer.start(registerParams({ protocol: "bma.executor.v1" }));
    assert.equal(result.protocol, "bma.executor.v1");
  });

  it("answers HTTP 400 when neither subprotocol is offered", async () => {
    await assert.rejects(
      dialWebSocket(server.url, { protocols: ["graphql-ws"], headers: { authorization: GOOD } }),
      (error: unknown) => error instanceof DialError && error.status === 400,
    );
  });

  it("authenticates before the upgrade: a refused token is HTTP 401 and no socket", async () => {
    const before = harness.executors.length;
    await assert.rejects(
      dialWebSocket(server.url, { protocols: OFFERED, headers: { authorization: "Bearer bad" } }),
      (error: unknown) => error instanceof DialError && error.status === 401,
    );
    await assert.rejects(
      dialWebSocket(server.url, { protocols: OFFERED }),
      (error: unknown) => error instanceof DialError && error.status === 401,
    );
    assert.equal(harness.executors.length, before);
    const last = seenRequests.at(-1)!;
    assert.equal(last.kind, "connect");
    assert.equal(last.token, undefined);
  });

  it("takes the token from ?access_token= when no header can be set", async () => {
    const peer = await ExecutorPeer.dial(
      `${server.url}/v1/executors/connect?access_token=good-token`,
    );
    peers.push(peer);
    const result = await peer.start();
    assert.match(result.executor_id, /^exec_/);
  });

  it("answers 404 for an upgrade on an unknown path", async () => {
    await assert.rejects(
      dialWebSocket(`${server.url}/elsewhere`, {
        protocols: OFFERED,
        headers: { authorization: GOOD },
      }),
      (error: unknown) => error instanceof DialError && error.status === 404,
    );
  });

  it("answers any request before executor.register with -32001 not_registered", async () => {
    const peer = await dial();
    peer.peer.capabilities = registerParams().capabilities;
    const error = await peer.peer.call("executor.heartbeat", {}).catch((e) => e);
    assert.ok(error instanceof ForbiddenError, "error instanceof ForbiddenError");
    assert.equal(error.reason, "not_registered");
    // The connection stays open and can still register.
    const result = await peer.start();
    assert.match(result.executor_id, /^exec_/);
  });

  it("answers a second executor.register with -32013 already_registered", async () => {
    const peer = await dial();
    const first = await peer.start();
    const error = await peer.peer.call("executor.register", registerParams()).catch((e) => e);
    assert.ok(error instanceof ConflictError, "error instanceof ConflictError");
    assert.equal(error.reason, "already_registered");
    assert.ok(
      harness.executor(first.executor_id)?.connected,
      "harness.executor(first.executor_id)?.connected",
    );
  });

  it("answers a protocol unequal to the negotiated one with -32010, then closes with 4003", async () => {
    const peer = await dial({ protocols: ["bma.executor.v1"] });
    peer.serveDefaults();
    const error = await peer.peer.call(
      "executor.register",
      registerParams({ protocol: "bma.executor.v1.1" }),
    ).catch((e) => e);
    assert.ok(error instanceof ProtocolMismatchError, "error instanceof ProtocolMismatchError");
    assert.deepEqual(error.data, {
      reason: "protocol_mismatch",
      expected: "bma.executor.v1",
      received: "bma.executor.v1.1",
    });
    const closed = await peer.peer.closed;
    assert.equal(closed.code, 4003);
  });

  it("refuses a machine-scoped executor without process or agent with -32012; it stays unregistered", async () => {
    const peer = await dial({ headers: { authorization: "Bearer machine-m_bare" } });
    peer.serveDefaults();
    const error = await peer.peer.call(
      "executor.register",
      registerParams({
        environment_id: "",
        machine_id: "m_bare",
        capabilities: { tools: ["bash"], shell: { enabled: true } },
      }),
    ).catch((e) => e);
    assert.ok(error instanceof CapabilityMissingError, "error instanceof CapabilityMissingError");
    assert.deepEqual(error.data, { reason: "capability_missing", capability: "process" });
    assert.equal(harness.executor("exec_m_bare"), undefined);
    // Unregistered: other requests are still refused as not_registered.
    peer.peer.capabilities = {};
    const heartbeat = await peer.peer.call("executor.heartbeat", {}).catch((e) => e);
    assert.ok(heartbeat instanceof ForbiddenError, "heartbeat instanceof ForbiddenError");
    assert.equal(heartbeat.reason, "not_registered");
    // Declaring agent is enough.
    const ok = await peer.peer.call(
      "executor.register",
      registerParams({
        environment_id: "",
        machine_id: "m_bare",
        capabilities: { agent: {} },
      }),
    );
    assert.equal(ok.executor_id, "exec_m_bare");
  });

  it("refuses a register whose environment does not match the token with -32001", async () => {
    const peer = await dial();
    peer.serveDefaults();
    const error = await peer.peer.call(
      "executor.register",
      registerParams({ environment_id: "env_other" }),
    ).catch((e) => e);
    assert.ok(error instanceof ForbiddenError, "error instanceof ForbiddenError");
  });

  it("maps a machine token to exec_<machine_id>; a new registration closes the old one with 4004", async () => {
    const events: ExecutorEvent[] = [];
    const listening = harness.onExecutor((event) => events.push(event));
    const first = await dial({ headers: { authorization: "Bearer machine-m_1" } });
    const machine = registerParams({ environment_id: "", machine_id: "m_1" });
    const registered = await first.start(machine);
    assert.equal(registered.executor_id, "exec_m_1");
    const executor = await harness.waitExecutor({ filter: (e) => e.id === "exec_m_1" });
    assert.equal(executor.machineId, "m_1");
    assert.equal(executor.environmentId, "");

    const second = await dial({ headers: { authorization: "Bearer machine-m_1" } });
    const again = await second.start(machine);
    assert.equal(again.executor_id, "exec_m_1");
    const closed = await first.peer.closed;
    assert.equal(closed.code, 4004);
    await turns();
    assert.equal(
      harness.executor("exec_m_1"),
      executor,
      "the same executor, now on the new socket",
    );
    assert.ok(executor.connected, "executor.connected");
    // The replaced socket's end is not a disconnect of the executor.
    assert.deepEqual(
      events.filter((e) => e.executor === executor).map((e) => e.type),
      ["registered", "reconnected"],
    );
    listening.dispose();
    // Requests on the old socket are over: it is closed.
    await assert.rejects(
      first.peer.call("executor.heartbeat", {}),
      (error: unknown) => error instanceof ConnectionClosedError && error.code === 4004,
    );
  });

  it("waitExecutor resolves with the next executor to register", async () => {
    const waiting = harness.waitExecutor({ filter: (e) => e.id === "exec_m_wait" });
    const peer = await dial({ headers: { authorization: "Bearer machine-m_wait" } });
    await peer.start(registerParams({ environment_id: "", machine_id: "m_wait" }));
    const executor = await waiting;
    assert.equal(executor.id, "exec_m_wait");
    assert.equal(executor.info.name, "test-executor");
  });

  it("waitExecutor stops waiting when its signal aborts", async () => {
    const controller = new AbortController();
    const waiting = harness.waitExecutor({ signal: controller.signal, filter: () => false });
    controller.abort();
    await assert.rejects(waiting, { name: "RequestAbortedError" });
  });
});

describe("Harness: serving rules", { timeout: 20_000 }, () => {
  it("refuses to serve TCP without authenticate unless insecureNoAuth is set", async () => {
    const harness = new Harness();
    await assert.rejects(harness.serve({ hostname: "127.0.0.1", port: 0 }), InsecureServeError);
    const open = new Harness({ insecureNoAuth: true });
    const server = await open.serve({ hostname: "127.0.0.1", port: 0 });
    const peer = await ExecutorPeer.dial(server.url);
    assert.match((await peer.start()).executor_id, /^exec_/);
    await peer.close();
    await open.close();
    await server.close();
  });

  it("throws NoServerFactoryError from serve() when built without a server factory", async () => {
    const harness = new CoreHarness({ insecureNoAuth: true });
    await assert.rejects(harness.serve(), NoServerFactoryError);
    await assert.rejects(harness.serveUnix("/nonexistent/x.sock"), NoServerFactoryError);
  });

  it("serves executors on a Unix socket without authenticate", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-harness-"));
    try {
      const harness = new Harness();
      const server = await harness.serveUnix(join(dir, "harness.sock"));
      assert.match(server.url, /^unix:\/\//);
      const peer = await ExecutorPeer.dial(server.url);
      const result = await peer.start(registerParams({ environment_id: "", machine_id: "m_u" }));
      assert.equal(result.executor_id, "exec_m_u");
      await peer.close();
      await harness.close();
      await server.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("accept() serves an in-process transport and runs authenticate on its request", async () => {
    const harness = new Harness({ authenticate });
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
    await harness.accept(
      harnessEnd,
      new Request("http://local/", { headers: { authorization: GOOD } }),
    );
    const peer = new ExecutorPeer(executorEnd);
    assert.match((await peer.start()).executor_id, /^exec_/);

    const [refusedEnd, refusedHarnessEnd] = createLinkedTransportPair({
      protocol: "bma.executor.v1.1",
    });
    await assert.rejects(harness.accept(refusedHarnessEnd), ConnectRefusedError);
    assert.equal((await refusedEnd.closed).code, 4002);
    await harness.close();
  });
});
