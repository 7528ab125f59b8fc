/**
 * Frames nested deeper than the limit are refused with -32600 `too_deep` and the connection
 * serves the next call: the raw-text scan and the envelope reader, the core `Peer` over the text
 * pair, a harness receiving a 100,000-deep `session.event` from an executor over a real
 * WebSocket (refused, not stored), and an `ExecutorClient` receiving a too-deep `tool.call`
 * from a harness over a real WebSocket.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  createLinkedTransportPair,
  DEFAULT_MAX_DEPTH,
  InvalidResultError,
  Peer,
  PROTOCOLS,
  type Transport,
} from "../../mod.ts";
import { exceedsDepth, withoutDeepValues } from "../../protocol/jsonrpc.ts";
import { Harness } from "../../harness/node.ts";
import { ExecutorClient } from "../../executor/node.ts";
import { dialWebSocket, type RunningServer, serveWebSocket } from "../../transport/node.ts";
import { OFFERED, registerParams } from "../helpers/executor-peer.ts";
import { RawEnd } from "../helpers/raw.ts";

const INFO = { name: "depth-test", os: "linux", arch: "x64", version: "0.0.1" };
const DEEP = 100_000;

/** `depth` nested arrays. */
function nested(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth);
}

/** A request frame whose params carry `value` (raw JSON text) at params.event.data. */
function eventFrame(id: string, sessionId: string, value: string): string {
  return `{"jsonrpc":"2.0","id":"${id}","method":"session.event","params":{"session_id":"${sessionId}","event":{"type":"probe","data":${value}}}}`;
}

describe("exceedsDepth and withoutDeepValues", () => {
  it("count brackets outside strings only, against the limit", () => {
    const padding = `"${"p".repeat(300)}"`;
    // The frame's own object is level 1: 1 + 127 arrays reach the default limit exactly.
    assert.equal(exceedsDepth(`{"a":${nested(127)},"b":${padding}}`, 128), false);
    assert.equal(exceedsDepth(`{"a":${nested(128)},"b":${padding}}`, 128), true);
    const brackets = `"${"[{".repeat(400)}"`;
    assert.equal(exceedsDepth(`{"s":${brackets}}`, 128), false);
    const escaped = `"\\"${"[".repeat(400)}\\\\"`;
    assert.equal(exceedsDepth(`{"s":${escaped},"t":${nested(2)}}`, 128), false);
    assert.equal(exceedsDepth(`{"s":"\\\\","t":${nested(200)}}`, 128), true);
    // Too short to nest that deep: not read.
    assert.equal(exceedsDepth("[[[[[[", 3), false);
    assert.equal(exceedsDepth("[[[[]]]]", 3), true);
  });

  it("keep the envelope and cut what is too deep", () => {
    const frame = `{"id":7,"a":[[["x",[1]]]],"b":"[[[[","c":[[[[]]]]}`;
    const shallow = JSON.parse(withoutDeepValues(frame, 3));
    assert.deepEqual(shallow, { id: 7, a: [[null]], b: "[[[[", c: [[null]] });
    const deep = JSON.parse(withoutDeepValues(eventFrame("e1", "s", nested(DEEP)), 4));
    assert.equal(deep.id, "e1");
    assert.equal(deep.method, "session.event");
    assert.deepEqual(deep.params.event, { type: "probe", data: [null] }); // data is level 4
  });
});

describe("Peer: frames nested too deep", { timeout: 20_000 }, () => {
  it("answers a deep request -32600 too_deep, drops a deep notification, and serves the next call", async () => {
    const [a, b] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
    const served: string[] = [];
    const harness = new Peer(b, { maxFrameDepth: 16 });
    harness.onRequest("session.ready", ({ session_id }) => {
      served.push(session_id);
      return { ok: true };
    });
    harness.onNotification(
      "session.status",
      (params) => {
        served.push(`status:${params.session_id}`);
      },
    );
    const raw = new RawEnd(a);
    const deepReady =
      `{"jsonrpc":"2.0","id":41,"method":"session.ready","params":{"session_id":"s1","x":${
        nested(40)
      }}}`;
    raw.send(deepReady);
    assert.deepEqual(await raw.next(), {
      jsonrpc: "2.0",
      id: 41,
      error: {
        code: -32600,
        message: "invalid request: nested too deep",
        data: { reason: "too_deep", max_depth: 16 },
      },
    });
    raw.send(
      `{"jsonrpc":"2.0","method":"session.status","params":{"session_id":"s1","status":"idle","x":${
        nested(40)
      }}}`,
    );
    raw.sendJson({ jsonrpc: "2.0", id: 42, method: "session.ready", params: { session_id: "s2" } });
    assert.deepEqual(await raw.next(), { jsonrpc: "2.0", id: 42, result: { ok: true } });
    assert.deepEqual(served, ["s2"]);
    assert.equal(harness.isClosed, false);
    harness.close();
  });

  it("rejects a request whose response is nested too deep with InvalidResultError", async () => {
    const [a, b] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
    const executor = new Peer(a, { maxFrameDepth: 16 });
    const raw = new RawEnd(b);
    const first = executor.call("session.ready", { session_id: "s1" });
    const request = await raw.next();
    raw.send(
      `{"jsonrpc":"2.0","id":${JSON.stringify(request.id)},"result":{"ok":true,"x":${nested(40)}}}`,
    );
    await assert.rejects(
      first,
      (error: unknown) => error instanceof InvalidResultError && error.method === "session.ready",
    );
    const second = executor.call("session.ready", { session_id: "s2" });
    raw.sendJson({ jsonrpc: "2.0", id: (await raw.next()).id, result: { ok: true } });
    assert.deepEqual(await second, { ok: true });
    executor.close();
  });
});

describe("Over real WebSockets", { timeout: 30_000 }, () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  });

  it("a harness refuses a 100,000-deep session.event from an executor; it is not stored; the next event is", async () => {
    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    cleanups.push(() => server.close(), () => harness.close());
    const end = new RawEnd(await dialWebSocket(server.url, { protocols: OFFERED }));
    cleanups.push(() => Promise.resolve(end.transport.close()));
    end.sendJson({
      jsonrpc: "2.0",
      id: "r1",
      method: "executor.register",
      params: registerParams(),
    });
    const registered = await end.next();
    const executor = harness.executor(registered.result.executor_id)!;
    const assigning = executor.assignSession({ session_id: "ses_deep" });
    const assign = await end.next();
    assert.equal(assign.method, "session.assign");
    end.sendJson({
      jsonrpc: "2.0",
      id: assign.id,
      result: { session_id: "ses_deep", accepted: true },
    });
    const session = await assigning;

    end.send(eventFrame("ev-deep", "ses_deep", nested(DEEP)));
    const refused = await end.next();
    assert.equal(refused.id, "ev-deep");
    assert.equal(refused.error.code, -32600);
    assert.equal(refused.error.data.reason, "too_deep");
    assert.equal(refused.error.data.max_depth, DEFAULT_MAX_DEPTH);

    end.send(eventFrame("ev-next", "ses_deep", '{"fine":[1,[2,[3]]]}'));
    assert.deepEqual(await end.next(), { jsonrpc: "2.0", id: "ev-next", result: {} });
    assert.equal(session.eventRecords.length, 1);
    assert.deepEqual(session.eventRecords[0].event, {
      type: "probe",
      data: { fine: [1, [2, [3]]] },
    });
    // What the log holds can be persisted.
    assert.doesNotThrow(() => JSON.stringify(session.eventRecords));
    assert.equal(end.transport.protocol, "bma.executor.v1.1");
    assert.ok(executor.connected);
  });

  it("an executor refuses a too-deep tool.call from a harness and serves the next one", async () => {
    let harnessEnd: RawEnd | undefined;
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const server: RunningServer = await serveWebSocket({
      hostname: "127.0.0.1",
      port: 0,
      upgrade: (_request, protocols) =>
        Promise.resolve({
          accept: true,
          protocol: PROTOCOLS.find((p) => protocols.includes(p))!,
          onOpen: (transport: Transport) => {
            harnessEnd = new RawEnd(transport);
            opened();
          },
        }),
    });
    cleanups.push(() => server.close());
    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO });
    client.tools.bash.handle(({ command }) => ({
      stdout: `ran ${command}`,
      stderr: "",
      exit_code: 0,
    }));
    const started = client.start();
    cleanups.push(() => client.stop());
    await open;
    const end = harnessEnd!;
    const register = await end.next();
    assert.equal(register.method, "executor.register");
    end.sendJson({
      jsonrpc: "2.0",
      id: register.id,
      result: {
        executor_id: "exec_d",
        protocol: end.transport.protocol,
        heartbeat_interval_ms: 60_000,
      },
    });
    await started;
    end.sendJson({
      jsonrpc: "2.0",
      id: "h1",
      method: "session.assign",
      params: { session_id: "ses_x", metadata: { source: "harness" } },
    });
    assert.equal((await end.next()).result.accepted, true);

    const call = (id: string, input: string) =>
      `{"jsonrpc":"2.0","id":"${id}","method":"tool.call","params":{"session_id":"ses_x","tool_call_id":"${id}","tool":"bash","input":{"command":"true","x":${input}}}}`;
    end.send(call("call_deep", nested(DEEP)));
    const refused = await next(end, (m) => m.id === "call_deep");
    assert.equal(refused.error.code, -32600);
    assert.equal(refused.error.data.reason, "too_deep");

    end.send(call("call_ok", "[1]"));
    assert.deepEqual((await next(end, (m) => m.id === "call_ok")).result, { ok: true });
    const result = await next(end, (m) => m.method === "tool.result");
    assert.equal(result.params.tool_call_id, "call_ok");
    assert.equal(result.params.structured_content.stdout, "ran true");
    end.sendJson({ jsonrpc: "2.0", id: result.id, result: { ok: true } });
    assert.equal(client.state, "connected");
    // stop() ends the session: session.ended is answered while the client stops.
    void next(end, () => false);
  });
});

/** The next frame matching `predicate`, answering what else the executor asks on the way. */
async function next(end: RawEnd, predicate: (message: any) => boolean): Promise<any> {
  for (;;) {
    const message = await end.next();
    if (predicate(message)) return message;
    if (message.method && message.id !== undefined) {
      end.sendJson({ jsonrpc: "2.0", id: message.id, result: { ok: true } });
    }
  }
}
