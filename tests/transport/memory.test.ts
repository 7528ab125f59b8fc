import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createLinkedTransportPair, TransportClosedError } from "../../mod.ts";

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
