/**
 * A repeat of a request whose write is still pending is answered as the original is, once that
 * write has settled: never acknowledged before the store holds what it acknowledges. An executor
 * whose `session.event` (or `session.ready`) timed out sends it again on the same connection,
 * under the same JSON-RPC id (or a new one); a harness frozen in its write answers the repeat
 * when it wakes. If the write then fails (the harness was fenced meanwhile), neither may be
 * acknowledged. A real harness on 127.0.0.1 over a WebSocket, its store one whose writes the
 * test holds, then commits or fails; the executor's end driven frame by frame.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Harness, type HarnessServer } from "../../node.ts";
import { HeldStore } from "../helpers/held-store.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { OFFERED, registerParams } from "../helpers/executor-peer.ts";
import { RawEnd } from "../helpers/raw.ts";

/** The executor's end of a real WebSocket, registered, with a session assigned to it. */
async function executorWithSession(server: HarnessServer, harness: Harness, sessionId: string) {
  const raw = new RawEnd(await dialWebSocket(server.url, { protocols: OFFERED }));
  raw.sendJson({
    jsonrpc: "2.0",
    id: "reg",
    method: "executor.register",
    params: registerParams(),
  });
  const registered = await raw.next();
  assert.equal(registered.id, "reg", JSON.stringify(registered));
  assert.ok(registered.result, JSON.stringify(registered));
  const executor = await harness.waitExecutor();
  const assigned = executor.assignSession({ session_id: sessionId });
  const assign = await raw.next();
  assert.equal(assign.method, "session.assign");
  raw.sendJson({
    jsonrpc: "2.0",
    id: assign.id,
    result: { session_id: sessionId, accepted: true },
  });
  await assigned;
  return raw;
}

/** The next `count` responses, by id. */
async function responses(raw: RawEnd, count: number): Promise<Map<unknown, any>> {
  const out = new Map<unknown, any>();
  while (out.size < count) {
    const frame = await raw.next();
    if (frame.id !== undefined && frame.method === undefined) out.set(frame.id, frame);
  }
  return out;
}

describe("Harness: a repeat of a request whose write is pending", { timeout: 30_000 }, () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close().catch(() => {});
  });

  async function start(sessionId: string) {
    const store = new HeldStore();
    const harness = new Harness({ insecureNoAuth: true, store, heartbeatIntervalMs: 120_000 });
    closers.push(() => harness.close());
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closers.push(() => server.close());
    const raw = await executorWithSession(server, harness, sessionId);
    closers.push(() => Promise.resolve(raw.transport.close(1000, "")));
    return { store, harness, raw };
  }

  const event = (sessionId: string, id: unknown, n: number) => ({
    jsonrpc: "2.0",
    id,
    method: "session.event",
    params: { session_id: sessionId, event: { type: "probe.end", n } },
  });

  it("session.event resent under its id: neither is acknowledged when the write fails", async () => {
    const { store, raw } = await start("ses_fail");
    store.holding = ["ev/"];
    raw.sendJson(event("ses_fail", 7, 1));
    const [write] = await store.heldWrites(1);
    // The executor gave up waiting (its request timed out) and sends the event again.
    raw.sendJson(event("ses_fail", 7, 1));
    await raw.idle();
    assert.deepEqual(raw.frames, [], "nothing is answered while the write is pending");
    write.fail();
    const [first, second] = [await raw.next(), await raw.next()];
    for (const answer of [first, second]) {
      assert.equal(answer.id, 7);
      assert.equal(answer.result, undefined, JSON.stringify(answer));
      assert.equal(answer.error?.code, -32004, JSON.stringify(answer));
    }
    assert.deepEqual(store.storedEvents("ses_fail"), []);
    // Sent once more, with the store working: accepted, and stored once.
    store.holding = [];
    raw.sendJson(event("ses_fail", 7, 1));
    const again = await raw.next();
    assert.deepEqual(again.result, {}, JSON.stringify(again));
    assert.equal(store.storedEvents("ses_fail").length, 1);
  });

  it("session.event resent under its id: both are acknowledged once the write commits", async () => {
    const { store, raw } = await start("ses_commit");
    store.holding = ["ev/"];
    raw.sendJson(event("ses_commit", "e-1", 1));
    const [write] = await store.heldWrites(1);
    raw.sendJson(event("ses_commit", "e-1", 1));
    await raw.idle();
    assert.deepEqual(raw.frames, [], "nothing is answered while the write is pending");
    write.commit();
    const answers = [await raw.next(), await raw.next()];
    assert.deepEqual(answers.map((a) => a.id), ["e-1", "e-1"]);
    assert.deepEqual(answers.map((a) => a.result), [{}, { duplicate: true }]);
    assert.equal(store.storedEvents("ses_commit").length, 1);
  });

  it("an agent event resent under a new id waits for its original's write too", async () => {
    const { store, raw } = await start("ses_agent");
    store.holding = ["ev/"];
    const agentEvent = (id: string) => ({
      jsonrpc: "2.0",
      id,
      method: "session.event",
      params: {
        session_id: "ses_agent",
        turn_id: "turn_1",
        event_id: "evt_1",
        sequence: 1,
        event: { type: "agent.message", content: [{ type: "text", text: "hello" }] },
      },
    });
    raw.sendJson(agentEvent("a-1"));
    const [write] = await store.heldWrites(1);
    raw.sendJson(agentEvent("a-2"));
    await raw.idle();
    assert.deepEqual(raw.frames, [], "nothing is answered while the write is pending");
    write.fail();
    const answers = await responses(raw, 2);
    for (const id of ["a-1", "a-2"]) {
      assert.equal(answers.get(id)?.error?.code, -32004, JSON.stringify(answers.get(id)));
    }
  });

  it("session.ready resent: neither is acknowledged when the write fails, both once it commits", async () => {
    const { store, harness, raw } = await start("ses_ready");
    store.holding = ["s/"];
    const ready = (id: string) => ({
      jsonrpc: "2.0",
      id,
      method: "session.ready",
      params: { session_id: "ses_ready" },
    });
    raw.sendJson(ready("r-1"));
    const [write] = await store.heldWrites(1);
    raw.sendJson(ready("r-2"));
    await raw.idle();
    assert.deepEqual(raw.frames, [], "nothing is answered while the write is pending");
    write.fail();
    const refused = await responses(raw, 2);
    for (const id of ["r-1", "r-2"]) {
      assert.equal(refused.get(id)?.error?.code, -32004, JSON.stringify(refused.get(id)));
    }
    assert.notEqual(harness.session("ses_ready")?.state, "ready");
    // Sent again: the first write commits, and both are acknowledged after it.
    raw.sendJson(ready("r-3"));
    const [, second] = await store.heldWrites(2);
    raw.sendJson(ready("r-4"));
    await raw.idle();
    assert.deepEqual(raw.frames, [], "nothing is answered while the write is pending");
    second.commit();
    const accepted = await responses(raw, 2);
    assert.deepEqual(accepted.get("r-3")?.result, { ok: true });
    assert.deepEqual(accepted.get("r-4")?.result, { ok: true, duplicate: true });
    assert.equal(harness.session("ses_ready")?.state, "ready");
  });

  it("session.ended is acknowledged once its end is stored, and a failed write is not", async () => {
    const { store, raw } = await start("ses_end");
    store.holding = ["s/"];
    const ended = (id: string) => ({
      jsonrpc: "2.0",
      id,
      method: "session.ended",
      params: { session_id: "ses_end", reason: "finished_here" },
    });
    raw.sendJson(ended("x-1"));
    const [write] = await store.heldWrites(1);
    raw.sendJson(ended("x-2"));
    await raw.idle();
    assert.deepEqual(raw.frames, [], "nothing is answered while the write is pending");
    write.fail();
    const refused = await responses(raw, 2);
    for (const id of ["x-1", "x-2"]) {
      assert.equal(refused.get(id)?.error?.code, -32004, JSON.stringify(refused.get(id)));
    }
    assert.notEqual(store.get<{ state: string }>("s/ses_end")?.state, "ended");
    // The executor sends it again: written this time, then acknowledged, and a repeat after it.
    raw.sendJson(ended("x-3"));
    const [, second] = await store.heldWrites(2);
    raw.sendJson(ended("x-4"));
    await raw.idle();
    assert.deepEqual(raw.frames, [], "nothing is answered while the write is pending");
    second.commit();
    const accepted = await responses(raw, 2);
    assert.deepEqual(accepted.get("x-3")?.result, { ok: true });
    assert.deepEqual(accepted.get("x-4")?.result, { ok: true, duplicate: true });
    const stored = store.get<{ state: string; endReason?: string }>("s/ses_end");
    assert.equal(stored?.state, "ended");
    assert.equal(stored?.endReason, "finished_here");
  });
});
