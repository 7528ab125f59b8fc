import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CapabilityMissingError,
  CapabilityNotAdvertisedError,
  ConflictError,
  ConnectionClosedError,
  createLinkedTransportPair,
  ErrorCode,
  FrameTooLargeError,
  InvalidOutgoingParamsError,
  InvalidResultError,
  LocalError,
  ManualClock,
  MethodUnavailableError,
  Peer,
  ProtocolError,
  RequestAbortedError,
  RequestTimeoutError,
  ResourceExhaustedError,
} from "../../mod.ts";
import { ALL_CAPABILITIES, peerWithRawEnd, type RawEnd } from "../helpers/raw.ts";

const TOOL_CALL = {
  session_id: "ses_1",
  tool_call_id: "call_1",
  tool: "bash",
  input: { command: "ls" },
};
const TURN_START = {
  session_id: "ses_1",
  turn_id: "turn_1",
  input: [{ type: "text" as const, text: "hi" }],
};

const open: Peer[] = [];
afterEach(async () => {
  for (const peer of open.splice(0)) await peer.close();
});
function setup(...args: Parameters<typeof peerWithRawEnd>) {
  const made = peerWithRawEnd(...args);
  open.push(made.peer);
  return made;
}

async function request(raw: RawEnd, frame: unknown): Promise<any> {
  raw.sendJson(frame);
  return await raw.next();
}

describe("Peer: incoming errors", { timeout: 10_000 }, () => {
  it("answers unparseable text with -32700 and id null", async () => {
    const { raw } = setup();
    raw.send("{not json");
    const response = await raw.next();
    assert.deepEqual(response, {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: "parse error" },
    });
  });

  it("answers invalid envelopes with -32600", async () => {
    const { raw } = setup();
    const cases: [unknown, unknown][] = [
      [{ id: 1, method: "tool.call", params: TOOL_CALL }, 1], // no jsonrpc
      [{ jsonrpc: "1.0", id: 2, method: "tool.call" }, 2],
      [{ jsonrpc: "2.0", id: 3, method: 42 }, 3],
      [{ jsonrpc: "2.0", id: { x: 1 }, method: "tool.call" }, null],
      [{ jsonrpc: "2.0", id: null, method: "tool.call" }, null],
      [{ jsonrpc: "2.0", id: 4, method: "tool.call", params: "x" }, 4],
      [{ jsonrpc: "2.0", id: 5 }, 5],
      [42, null],
      [null, null],
      [[], null],
    ];
    for (const [frame, id] of cases) {
      const response = await request(raw, frame);
      assert.equal(response.error?.code, ErrorCode.INVALID_REQUEST, JSON.stringify(frame));
      assert.equal(response.id, id, JSON.stringify(frame));
    }
    // An integer beyond 2^53 - 1 is rounded by the parser: an answer could not carry it.
    raw.send('{"jsonrpc":"2.0","id":9007199254740993,"method":"tool.call","params":{}}');
    const rounded = await raw.next();
    assert.equal(rounded.error?.code, ErrorCode.INVALID_REQUEST);
    assert.equal(rounded.id, null);
  });

  it("answers an unknown method with -32601, contract method or not", async () => {
    const { raw } = setup();
    const unknown = await request(raw, { jsonrpc: "2.0", id: 1, method: "no.such", params: {} });
    assert.equal(unknown.error.code, -32601);
    // tool.call is in the contract, but this peer does not serve it.
    const unserved = await request(raw, {
      jsonrpc: "2.0",
      id: 2,
      method: "tool.call",
      params: TOOL_CALL,
    });
    assert.equal(unserved.error.code, -32601);
  });

  it("validates params before the handler runs: -32602 with the issues in data", async () => {
    const { peer, raw } = setup();
    let ran = 0;
    peer.onRequest("tool.call", () => {
      ran++;
      return { ok: true };
    });
    const { tool_call_id: _, ...missing } = TOOL_CALL;
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 7,
      method: "tool.call",
      params: missing,
    });
    assert.equal(response.id, 7);
    assert.equal(response.error.code, -32602);
    assert.ok(Array.isArray(response.error.data.issues));
    assert.deepEqual(response.error.data.issues[0].path, ["tool_call_id"]);
    const wrongType = await request(raw, {
      jsonrpc: "2.0",
      id: 8,
      method: "tool.call",
      params: { ...TOOL_CALL, input: "ls" },
    });
    assert.equal(wrongType.error.code, -32602);
    const positional = await request(raw, {
      jsonrpc: "2.0",
      id: 9,
      method: "tool.call",
      params: ["ses_1"],
    });
    assert.equal(positional.error.code, -32602);
    assert.equal(ran, 0);
  });

  it("turns a handler's exception into -32603 without leaking its text", async () => {
    const { peer, raw, logger } = setup();
    peer.onRequest("tool.call", () => {
      throw new Error("secret path /home/alice/.ssh");
    });
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 1,
      method: "tool.call",
      params: TOOL_CALL,
    });
    assert.deepEqual(response.error, { code: -32603, message: "internal error" });
    assert.ok(logger.records.some((r) => r.level === "error"));
    // An async handler's rejection is the same.
    peer.onRequest("tool.call", () => Promise.reject(new Error("boom")));
    const again = await request(raw, {
      jsonrpc: "2.0",
      id: 2,
      method: "tool.call",
      params: TOOL_CALL,
    });
    assert.equal(again.error.code, -32603);
  });

  it("answers with a protocol error's own code, message and data", async () => {
    const { peer, raw } = setup();
    peer.onRequest("tool.call", () => {
      throw new CapabilityMissingError("tool not served", {
        reason: "capability_missing",
        capability: "tool:bash",
      });
    });
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: "a",
      method: "tool.call",
      params: TOOL_CALL,
    });
    assert.deepEqual(response, {
      jsonrpc: "2.0",
      id: "a",
      error: {
        code: -32012,
        message: "tool not served",
        data: { reason: "capability_missing", capability: "tool:bash" },
      },
    });
  });

  it("answers -32603 when a handler returns a result outside the contract", async () => {
    const { peer, raw } = setup();
    peer.onRequest("tool.call", () => ({ ok: "yes" }) as any);
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 1,
      method: "tool.call",
      params: TOOL_CALL,
    });
    assert.equal(response.error.code, -32603);
  });

  it('keeps ids of both types distinct: 1 and "1" are two requests', async () => {
    const { peer, raw } = setup();
    peer.onRequest("tool.call", async (params) => {
      await new Promise((r) => setTimeout(r, params.tool_call_id === "slow" ? 20 : 0));
      return { ok: true };
    });
    raw.sendJson({
      jsonrpc: "2.0",
      id: 1,
      method: "tool.call",
      params: { ...TOOL_CALL, tool_call_id: "slow" },
    });
    raw.sendJson({ jsonrpc: "2.0", id: "1", method: "tool.call", params: TOOL_CALL });
    const first = await raw.next();
    const second = await raw.next();
    assert.equal(first.id, "1");
    assert.equal(typeof first.id, "string");
    assert.equal(second.id, 1);
    assert.equal(typeof second.id, "number");
  });

  it("answers a batch (unused by the contract) with one -32600, running nothing", async () => {
    const { peer, raw } = setup();
    let ran = 0;
    peer.onRequest("tool.call", () => {
      ran++;
      return { ok: true };
    });
    const response = await request(raw, [
      { jsonrpc: "2.0", id: 1, method: "tool.call", params: TOOL_CALL },
    ]);
    assert.equal(response.id, null);
    assert.equal(response.error.code, -32600);
    assert.equal(ran, 0);
  });

  it("answers a notification-kind method sent with an id with -32601 (no such request)", async () => {
    const { peer, raw } = setup();
    let got = 0;
    peer.onNotification("tool.progress", () => {
      got++;
    });
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 3,
      method: "tool.progress",
      params: { session_id: "s", tool_call_id: "c" },
    });
    assert.equal(response.id, 3);
    assert.equal(response.error.code, -32601);
    assert.equal(got, 0);
  });

  it("drops invalid notifications with a logged rejection and never answers them", async () => {
    const { peer, raw, logger } = setup();
    let got = 0;
    peer.onNotification("tool.progress", () => void got++);
    raw.sendJson({ jsonrpc: "2.0", method: "tool.progress", params: { session_id: 5 } });
    raw.sendJson({ jsonrpc: "2.0", method: "no.such.notification", params: {} });
    await raw.idle();
    assert.equal(raw.frames.length, 0);
    assert.equal(got, 0);
    const rejections = logger.records.filter((r) => r.message === "notification rejected");
    assert.deepEqual(rejections.map((r) => r.fields?.code), [-32602, -32601]);
  });
});

describe("Peer: outgoing requests", { timeout: 10_000 }, () => {
  it("resolves with the result, validated against the contract", async () => {
    const { peer, raw } = setup();
    const pending = peer.call("session.ready", { session_id: "ses_1" });
    const frame = await raw.next();
    assert.equal(frame.method, "session.ready");
    assert.deepEqual(frame.params, { session_id: "ses_1" });
    raw.sendJson({ jsonrpc: "2.0", id: frame.id, result: { ok: true } });
    assert.deepEqual(await pending, { ok: true });
  });

  it("rejects a result outside the contract with InvalidResultError", async () => {
    const { peer, raw } = setup();
    const pending = peer.call("session.ready", { session_id: "ses_1" });
    const frame = await raw.next();
    raw.sendJson({ jsonrpc: "2.0", id: frame.id, result: { ok: "sure" } });
    await assert.rejects(pending, InvalidResultError);
  });

  it("rejects with the contract's error class, code and data", async () => {
    const { peer, raw } = setup();
    const pending = peer.call("session.ready", { session_id: "ses_1" });
    const frame = await raw.next();
    raw.sendJson({
      jsonrpc: "2.0",
      id: frame.id,
      error: { code: -32013, message: "conflict", data: { expected_sequence: 4 } },
    });
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof ConflictError);
    assert.ok(error instanceof ProtocolError);
    assert.equal(error.code, -32013);
    assert.deepEqual(error.data, { expected_sequence: 4 });
    const other = peer.call("session.ready", { session_id: "ses_1" });
    const frame2 = await raw.next();
    raw.sendJson({ jsonrpc: "2.0", id: frame2.id, error: { code: -32009, message: "full" } });
    await assert.rejects(other, ResourceExhaustedError);
  });

  it("ignores responses to unknown ids and reports them to the logger", async () => {
    const { peer, raw, logger } = setup();
    const pending = peer.call("session.ready", { session_id: "ses_1" });
    const frame = await raw.next();
    assert.equal(typeof frame.id, "number");
    raw.sendJson({ jsonrpc: "2.0", id: String(frame.id), result: { ok: true } }); // "1" is not 1
    raw.sendJson({ jsonrpc: "2.0", id: 999, result: { ok: true } });
    await raw.idle();
    assert.equal(peer.pendingRequests, 1);
    const unknown = logger.records.filter((r) => r.message.includes("unknown request id"));
    assert.deepEqual(unknown.map((r) => r.fields?.id), [String(frame.id), 999]);
    raw.sendJson({ jsonrpc: "2.0", id: frame.id, result: { ok: true } });
    assert.deepEqual(await pending, { ok: true });
  });

  it("times out on the injected clock", async () => {
    const clock = new ManualClock();
    const { peer, raw } = setup({ clock, requestTimeoutMs: 5_000 });
    const pending = peer.call("session.ready", { session_id: "ses_1" });
    const settled = pending.catch((e) => e);
    await raw.next();
    await clock.advance(4_999);
    assert.equal(peer.pendingRequests, 1);
    await clock.advance(1);
    const error = await settled;
    assert.ok(error instanceof RequestTimeoutError);
    assert.equal(error.timeoutMs, 5_000);
    assert.equal(peer.pendingRequests, 0);
    // A per-call timeout overrides the default.
    const short = peer.call("session.ready", { session_id: "ses_1" }, { timeoutMs: 10 }).catch((
      e,
    ) => e);
    await clock.advance(10);
    assert.ok((await short) instanceof RequestTimeoutError);
    assert.equal(clock.pendingTimers, 0, "no timer is left behind");
  });

  it("hands a late result to onLateResult once: after a timeout or an abort, never an error's", async () => {
    const clock = new ManualClock();
    const { peer, raw } = setup({ clock, requestTimeoutMs: 5_000 });
    const late: unknown[] = [];
    const onLateResult = (result: unknown) => void late.push(result);
    const timedOut = peer.call("session.ready", { session_id: "ses_1" }, {
      timeoutMs: 10,
      onLateResult,
    }).catch((e) => e);
    const timedOutFrame = await raw.next();
    await clock.advance(10);
    assert.ok((await timedOut) instanceof RequestTimeoutError);
    const abort = new AbortController();
    const aborted = peer.call("session.ready", { session_id: "ses_1" }, {
      signal: abort.signal,
      onLateResult,
    }).catch((e) => e);
    const abortedFrame = await raw.next();
    abort.abort();
    assert.ok((await aborted) instanceof RequestAbortedError);
    const failed = peer.call("session.ready", { session_id: "ses_1" }, {
      timeoutMs: 10,
      onLateResult,
    }).catch((e) => e);
    const failedFrame = await raw.next();
    await clock.advance(10);
    await failed;
    raw.sendJson({ jsonrpc: "2.0", id: timedOutFrame.id, result: { ok: true } });
    raw.sendJson({ jsonrpc: "2.0", id: timedOutFrame.id, result: { ok: true } }); // once only
    raw.sendJson({ jsonrpc: "2.0", id: abortedFrame.id, result: { ok: true } });
    raw.sendJson({ jsonrpc: "2.0", id: failedFrame.id, error: { code: -32002, message: "gone" } });
    const after = peer.call("session.ready", { session_id: "ses_1" }).catch((e) => e);
    const afterFrame = await raw.next();
    raw.sendJson({ jsonrpc: "2.0", id: afterFrame.id, result: { ok: true } });
    await after; // every earlier frame was read by now
    assert.deepEqual(late, [{ ok: true }, { ok: true }]);
  });

  it("a late-result handler that throws is logged; the peer serves on", async () => {
    const clock = new ManualClock();
    const { peer, raw, logger } = setup({ clock });
    const timedOut = peer.call("session.ready", { session_id: "ses_1" }, {
      timeoutMs: 10,
      onLateResult: () => {
        throw new Error("handler failed");
      },
    }).catch((e) => e);
    const frame = await raw.next();
    await clock.advance(10);
    await timedOut;
    raw.sendJson({ jsonrpc: "2.0", id: frame.id, result: { ok: true } });
    const after = peer.call("session.ready", { session_id: "ses_1" });
    raw.sendJson({ jsonrpc: "2.0", id: (await raw.next()).id, result: { ok: true } });
    assert.deepEqual(await after, { ok: true });
    const errors = logger.records.filter((r) => r.level === "error").map((r) => r.message);
    assert.deepEqual(errors, ["late-result handler failed"]);
  });

  it("expires each request at its own deadline, answered ones not at all", async () => {
    const clock = new ManualClock();
    const { peer, raw } = setup({ clock, requestTimeoutMs: 5_000 });
    const outcomes: string[] = [];
    const track = (name: string, p: Promise<unknown>) =>
      p.then(() => outcomes.push(`${name} ok`), (e) => outcomes.push(`${name} ${e.name}`));
    const first = track("first", peer.call("session.ready", { session_id: "ses_1" }));
    const firstFrame = await raw.next();
    await clock.advance(1_000);
    const second = track("second", peer.call("session.ready", { session_id: "ses_1" }));
    const secondFrame = await raw.next();
    await clock.advance(1_000);
    const third = track("third", peer.call("session.ready", { session_id: "ses_1" }));
    await raw.next();
    raw.sendJson({ jsonrpc: "2.0", id: secondFrame.id, result: { ok: true } });
    await second;
    await clock.advance(2_999); // t = 4,999
    assert.deepEqual(outcomes, ["second ok"], "nothing expires before its deadline");
    await clock.advance(1); // t = 5,000: the first
    await first;
    assert.deepEqual(outcomes, ["second ok", "first RequestTimeoutError"]);
    await clock.advance(1_999); // t = 6,999: the third is due at 7,000
    assert.equal(outcomes.length, 2, "the third waits for its own deadline");
    await clock.advance(1);
    await third;
    assert.deepEqual(outcomes, [
      "second ok",
      "first RequestTimeoutError",
      "third RequestTimeoutError",
    ]);
    assert.equal(peer.pendingRequests, 0);
    // A late answer to the first is expected, not an unknown id.
    raw.sendJson({ jsonrpc: "2.0", id: firstFrame.id, result: { ok: true } });
    await raw.idle();
    assert.equal(clock.pendingTimers, 0, "no timer is left behind");
  });

  it("aborts through the signal; an already aborted signal sends nothing", async () => {
    const { peer, raw } = setup();
    const before = new AbortController();
    before.abort("not wanted");
    const error = await peer.call("session.ready", { session_id: "s" }, { signal: before.signal })
      .catch((e) => e);
    assert.ok(error instanceof RequestAbortedError);
    assert.equal(error.cause, "not wanted");
    await raw.idle();
    assert.equal(raw.frames.length, 0);

    const during = new AbortController();
    const pending = peer.call("session.ready", { session_id: "s" }, { signal: during.signal });
    const frame = await raw.next();
    during.abort();
    await assert.rejects(pending, RequestAbortedError);
    assert.equal(peer.pendingRequests, 0);
    raw.sendJson({ jsonrpc: "2.0", id: frame.id, result: { ok: true } }); // late: tolerated
    await raw.idle();
  });

  it("rejects every pending request with the close code and reason when the connection ends", async () => {
    const { peer, raw } = setup();
    const a = peer.call("session.ready", { session_id: "a" });
    const b = peer.call("session.ended", { session_id: "b" });
    await raw.next();
    await raw.next();
    raw.transport.close(4004, "replaced");
    for (const pending of [a, b]) {
      const error = await pending.catch((e) => e);
      assert.ok(error instanceof ConnectionClosedError);
      assert.equal(error.code, 4004);
      assert.equal(error.reason, "replaced");
    }
    assert.deepEqual(await peer.closed, { code: 4004, reason: "replaced" });
    const after = await peer.call("session.ready", { session_id: "c" }).catch((e) => e);
    assert.ok(after instanceof ConnectionClosedError);
    assert.equal(after.code, 4004);
    assert.throws(
      () => peer.notify("tool.progress", { session_id: "s", tool_call_id: "c" }),
      ConnectionClosedError,
    );
  });

  it("aborts the signal of handlers still running when the connection ends", async () => {
    const { peer, raw } = setup();
    let seen: AbortSignal | undefined;
    peer.onRequest("tool.call", (_params, ctx) => {
      seen = ctx.signal;
      return new Promise(() => {});
    });
    raw.sendJson({ jsonrpc: "2.0", id: 1, method: "tool.call", params: TOOL_CALL });
    await raw.idle();
    assert.equal(seen?.aborted, false);
    raw.transport.close(1001, "going away");
    await peer.closed;
    assert.equal(seen?.aborted, true);
    assert.ok(seen?.reason instanceof ConnectionClosedError);
  });

  it("refuses params outside the contract locally, sending nothing", async () => {
    const { peer, raw } = setup();
    await assert.rejects(
      peer.call("session.ready", { session_id: 5 } as any),
      InvalidOutgoingParamsError,
    );
    assert.throws(() => peer.notify("tool.progress", {} as any), InvalidOutgoingParamsError);
    await assert.rejects(peer.call("no.such" as any, {}), LocalError);
    await raw.idle();
    assert.equal(raw.frames.length, 0);
  });

  it("sends a request under a caller-chosen id, and refuses an id in use", async () => {
    const { peer, raw } = setup();
    const pending = peer.call("session.ready", { session_id: "s" }, { id: "evt_1" });
    await assert.rejects(
      peer.call("session.ready", { session_id: "s" }, { id: "evt_1" }),
      LocalError,
    );
    const frame = await raw.next();
    assert.equal(frame.id, "evt_1");
    raw.sendJson({ jsonrpc: "2.0", id: "evt_1", result: { ok: true } });
    await pending;
  });

  it("serializes concurrent sends: every frame arrives whole and in call order", async () => {
    const { peer, raw } = setup();
    const big = "x".repeat(100_000);
    const calls = Array.from(
      { length: 200 },
      (_, i) =>
        peer.call("session.ended", { session_id: `ses_${i}`, reason: i % 2 ? big : "short" }),
    );
    for (let i = 0; i < 200; i++) {
      const frame = await raw.next();
      assert.equal(frame.params.session_id, `ses_${i}`);
      assert.equal(frame.params.reason.length, i % 2 ? 100_000 : 5);
      raw.sendJson({ jsonrpc: "2.0", id: frame.id, result: { ok: true } });
    }
    await Promise.all(calls);
  });
});

describe("Peer: frame size limit", { timeout: 10_000 }, () => {
  it("closes with 1009 on an incoming frame over the limit, failing pending requests", async () => {
    const { peer, raw } = setup({ maxFrameBytes: 1024 });
    const pending = peer.call("session.ready", { session_id: "s" });
    await raw.next();
    raw.send(
      JSON.stringify({ jsonrpc: "2.0", method: "tool.progress", params: { x: "é".repeat(600) } }),
    );
    const info = await peer.closed;
    assert.equal(info.code, 1009);
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof ConnectionClosedError);
    assert.equal(error.code, 1009);
  });

  it("counts bytes, not characters", async () => {
    const { peer, raw } = setup({ maxFrameBytes: 1024 });
    peer.onRequest("session.ready" as any, () => ({ ok: true }));
    // 400 characters of 3 bytes each: 1,200 bytes although only ~460 characters long.
    raw.send(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { a: "€".repeat(400) } }),
    );
    assert.equal((await peer.closed).code, 1009);
  });

  it("refuses an outgoing frame over the limit locally with FrameTooLargeError", async () => {
    const { peer, raw } = setup({ maxFrameBytes: 1024 });
    await assert.rejects(
      peer.call("session.ended", { session_id: "s", reason: "x".repeat(2000) }),
      FrameTooLargeError,
    );
    await raw.idle();
    assert.equal(raw.frames.length, 0);
    assert.equal(peer.isClosed, false);
  });

  it("answers -32603 instead of sending a response over the limit", async () => {
    const { peer, raw } = setup({ maxFrameBytes: 1024 });
    peer.onRequest("tool.cancel", () => ({ canceled: true, note: "y".repeat(5000) }) as any);
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 1,
      method: "tool.cancel",
      params: { tool_call_id: "c" },
    });
    assert.equal(response.error.code, -32603);
    assert.equal(response.error.data.reason, "result_too_large");
  });
});

describe("Peer: gating", { timeout: 10_000 }, () => {
  it("refuses to send a method gated by a capability the executor did not advertise", async () => {
    const { peer, raw } = setup({ capabilities: { tools: ["bash"] } });
    const error = await peer.call("turn.start", TURN_START).catch((e) => e);
    assert.ok(error instanceof CapabilityNotAdvertisedError);
    assert.equal(error.capability, "agent");
    await raw.idle();
    assert.equal(raw.frames.length, 0);
    peer.capabilities = { agent: {} };
    const pending = peer.call("turn.start", TURN_START);
    const frame = await raw.next();
    assert.equal(frame.method, "turn.start");
    raw.transport.close(1000);
    await pending.catch(() => {});
  });

  it("answers a gated incoming method without the capability with -32012 and its name", async () => {
    const { peer, raw } = setup({ capabilities: {} });
    peer.onRequest("turn.start", () => ({ turn_id: "turn_1", accepted: true }));
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 1,
      method: "turn.start",
      params: TURN_START,
    });
    assert.equal(response.error.code, -32012);
    assert.deepEqual(response.error.data, { reason: "capability_missing", capability: "agent" });
    peer.capabilities = ALL_CAPABILITIES;
    const ok = await request(raw, {
      jsonrpc: "2.0",
      id: 2,
      method: "turn.start",
      params: TURN_START,
    });
    assert.equal(ok.result.turn_id, "turn_1");
  });

  it("answers a gated method it receives but did not advertise with -32012, a wrong-direction one with -32601", async () => {
    // An executor's end: it serves tool.call (harness to executor) and advertises no agent.
    const { peer, raw } = setup({ capabilities: { tools: ["bash"] } });
    peer.onRequest("tool.call", () => ({ ok: true }));
    const turn = await request(raw, {
      jsonrpc: "2.0",
      id: 1,
      method: "turn.start",
      params: TURN_START,
    });
    assert.equal(turn.error.code, -32012);
    assert.deepEqual(turn.error.data, { reason: "capability_missing", capability: "agent" });
    // model_token.refresh goes the other way (executor to harness): this end never receives it.
    const wrongWay = await request(raw, {
      jsonrpc: "2.0",
      id: 2,
      method: "model_token.refresh",
      params: { session_id: "s", turn_id: "t" },
    });
    assert.equal(wrongWay.error.code, -32601);
    // Advertised but not served: unknown here, as before.
    peer.capabilities = ALL_CAPABILITIES;
    const unserved = await request(raw, {
      jsonrpc: "2.0",
      id: 3,
      method: "turn.start",
      params: TURN_START,
    });
    assert.equal(unserved.error.code, -32601);
  });

  it("makes v1.1 methods unavailable on a bma.executor.v1 connection, both ways", async () => {
    const { peer, raw } = setup({ subprotocol: "bma.executor.v1", capabilities: ALL_CAPABILITIES });
    assert.equal(peer.protocol, "bma.executor.v1");
    const error = await peer.call("turn.start", TURN_START).catch((e) => e);
    assert.ok(error instanceof MethodUnavailableError);
    await assert.rejects(
      peer.call("executor.token.refresh", { token: "t" }),
      MethodUnavailableError,
    );
    peer.onRequest("turn.start", () => ({ turn_id: "turn_1", accepted: true }));
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 1,
      method: "turn.start",
      params: TURN_START,
    });
    assert.equal(response.error.code, -32601);
    // v1 methods still work.
    peer.onRequest("tool.call", () => ({ ok: true }));
    const ok = await request(raw, {
      jsonrpc: "2.0",
      id: 2,
      method: "tool.call",
      params: TOOL_CALL,
    });
    assert.deepEqual(ok.result, { ok: true });
  });

  it("consults the admission gate before dispatching", async () => {
    const { peer, raw } = setup();
    peer.onRequest("tool.call", () => ({ ok: true }));
    peer.admit = (method) =>
      method === "tool.call"
        ? new ProtocolError(-32001, "forbidden", { reason: "unregistered" })
        : undefined;
    const response = await request(raw, {
      jsonrpc: "2.0",
      id: 1,
      method: "tool.call",
      params: TOOL_CALL,
    });
    assert.deepEqual(response.error, {
      code: -32001,
      message: "forbidden",
      data: { reason: "unregistered" },
    });
  });
});

describe("Peer: two peers", { timeout: 10_000 }, () => {
  it("call and notify round-trip between two peers; dispose removes a handler", async () => {
    const [a, b] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
    const executor = new Peer(a);
    const harness = new Peer(b);
    const registration = harness.onRequest("session.ready", (params) => {
      assert.equal(params.session_id, "ses_9");
      return { ok: true };
    });
    const progress: string[] = [];
    harness.onNotification("tool.progress", (p) => void progress.push(p.tool_call_id));
    assert.deepEqual(await executor.call("session.ready", { session_id: "ses_9" }), { ok: true });
    executor.notify("tool.progress", { session_id: "ses_9", tool_call_id: "c1" });
    registration.dispose();
    const error = await executor.call("session.ready", { session_id: "ses_9" }).catch((e) => e);
    assert.ok(error instanceof ProtocolError);
    assert.equal(error.code, -32601);
    assert.deepEqual(progress, ["c1"]);
    await executor.close(1000, "bye");
    assert.deepEqual(await harness.closed, { code: 1000, reason: "bye" });
  });
});
