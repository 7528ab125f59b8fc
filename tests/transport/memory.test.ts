import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  createLinkedTransportPair,
  type MessageTransport,
  Peer,
  TransportClosedError,
} from "../../mod.ts";
import { isMessageTransport } from "../../transport/transport.ts";

const collect = (frames: string[]) => (frame: string) => void frames.push(frame);

describe("in-memory linked transport pair", { timeout: 10_000 }, () => {
  it("delivers frames in order, asynchronously, both ways", async () => {
    const [a, b] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
    assert.equal(a.protocol, "bma.executor.v1.1");
    assert.equal(b.protocol, "bma.executor.v1.1");
    const atB: string[] = [];
    const atA: string[] = [];
    b.listen(collect(atB));
    a.listen(collect(atA));
    a.send("1");
    a.send("2");
    b.send("x");
    assert.deepEqual(atB, [], "delivery is asynchronous, like a socket");
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(atB, ["1", "2"]);
    assert.deepEqual(atA, ["x"]);
  });

  it("queues frames sent before the other end listens", async () => {
    const [a, b] = createLinkedTransportPair();
    for (let i = 0; i < 100; i++) a.send(String(i));
    await new Promise((r) => setTimeout(r, 0));
    const got: string[] = [];
    b.listen(collect(got));
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(got.length, 100);
    assert.equal(got[99], "99");
  });

  it("delivers frames sent before a close, then the close code and reason to both ends", async () => {
    const [a, b] = createLinkedTransportPair();
    const got: string[] = [];
    b.listen(collect(got));
    a.send("last words");
    a.close(4004, "replaced");
    assert.deepEqual(await a.closed, { code: 4004, reason: "replaced" });
    assert.deepEqual(await b.closed, { code: 4004, reason: "replaced" });
    assert.deepEqual(got, ["last words"]);
    assert.throws(() => a.send("x"), TransportClosedError);
    assert.throws(() => b.send("x"), TransportClosedError);
  });

  it("keeps frames for a late listener even after the close", async () => {
    const [a, b] = createLinkedTransportPair();
    a.send("early");
    a.close(1000, "");
    assert.equal((await b.closed).code, 1000);
    const got: string[] = [];
    b.listen(collect(got));
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(got, ["early"]);
  });

  it("refuses close codes that cannot be sent and clamps long reasons", async () => {
    const [a] = createLinkedTransportPair();
    assert.throws(() => a.close(1006), RangeError);
    assert.throws(() => a.close(2999), RangeError);
    a.close(4001, "é".repeat(200));
    const info = await a.closed;
    assert.equal(info.code, 4001);
    assert.ok(new TextEncoder().encode(info.reason).byteLength <= 123);
  });

  it("close is idempotent: the first close each end sees wins", async () => {
    const [a, b] = createLinkedTransportPair();
    a.close(4003, "protocol mismatch");
    a.close(1000);
    assert.equal((await a.closed).code, 4003);
    assert.equal((await b.closed).code, 4003);
    b.close(4005);
    assert.equal((await b.closed).code, 4003);
  });
});

describe("in-memory pair by reference", { timeout: 10_000 }, () => {
  it("hands message objects over unserialized, in order with text frames", async () => {
    const [a, b] = createLinkedTransportPair({ byReference: true });
    assert.ok(isMessageTransport(a) && isMessageTransport(b), "both ends take message objects");
    const got: (string | object)[] = [];
    (b as MessageTransport).listenMessages((message) => void got.push(message));
    const message = { jsonrpc: "2.0", method: "executor.heartbeat", params: {} };
    a.send("text first");
    (a as MessageTransport).sendMessage(message);
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(got.length, 2);
    assert.equal(got[0], "text first");
    assert.equal(got[1], message, "the very object, not a copy");
  });

  it("gives a text listener objects as JSON, and a default pair takes no objects", async () => {
    const [a, b] = createLinkedTransportPair({ byReference: true });
    const got: string[] = [];
    b.listen(collect(got));
    (a as MessageTransport).sendMessage({ n: 1 });
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(got, ['{"n":1}']);
    const [plain] = createLinkedTransportPair();
    assert.equal(isMessageTransport(plain), false, "text frames unless asked");
  });

  it("carries a Peer's requests with validation both ways, and the close", async () => {
    const [a, b] = createLinkedTransportPair({ protocol: "bma.executor.v1.1", byReference: true });
    const caller = new Peer(a);
    const server = new Peer(b);
    server.onRequest("session.ready", (params) => {
      assert.equal(params.session_id, "ses_1");
      return { ok: true };
    });
    assert.deepEqual(await caller.call("session.ready", { session_id: "ses_1" }), { ok: true });
    // Invalid params are refused by the receiving end as over a socket: -32602.
    const answers: unknown[] = [];
    const [c, d] = createLinkedTransportPair({ protocol: "bma.executor.v1.1", byReference: true });
    const served = new Peer(d);
    served.onRequest("session.ready", () => ({ ok: true }));
    (c as MessageTransport).listenMessages((m) => void answers.push(m));
    (c as MessageTransport).sendMessage({
      jsonrpc: "2.0",
      id: 1,
      method: "session.ready",
      params: { session_id: 7 },
    });
    await new Promise((r) => setTimeout(r, 0));
    assert.equal((answers[0] as { error?: { code: number } }).error?.code, -32602);
    await caller.close(1000, "done");
    assert.equal((await server.closed).code, 1000);
    c.close();
  });
});
