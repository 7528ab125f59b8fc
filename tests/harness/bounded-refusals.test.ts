/**
 * A refusal costs no more than the frame that caused it: an `executor.heartbeat` of 137 KiB whose
 * `active_sessions` holds 70,000 invalid items, sent over a real WebSocket by a registered
 * executor, is answered -32602 with the first few issues and their count in a frame of a few KiB
 * (it was an 8 MiB frame listing every issue), and the connection goes on.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Transport } from "../../mod.ts";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { MAX_COUNTED_ISSUES, MAX_REPORTED_ISSUES } from "../../protocol/issues.ts";
import { OFFERED, registerParams } from "../helpers/executor-peer.ts";

/** A WebSocket that reads every frame it receives as text. */
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
  /** Sends `frame` and returns the text of the next frame received. */
  async request(frame: unknown): Promise<string> {
    this.transport.send(JSON.stringify(frame));
    return this.#frames.shift() ?? await new Promise<string>((r) => this.#waiters.push(r));
  }
}

describe("Harness: a refusal's size is bounded", { timeout: 60_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  let raw: RawSocket;

  before(async () => {
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    // The client reads frames up to 64 MiB: an unbounded answer would reach the test whole.
    raw = new RawSocket(
      await dialWebSocket(server.url, { protocols: OFFERED, maxFrameBytes: 64 * 1024 * 1024 }),
    );
    const registered = JSON.parse(
      await raw.request({
        jsonrpc: "2.0",
        id: 1,
        method: "executor.register",
        params: registerParams(),
      }),
    );
    assert.ok(registered.result, JSON.stringify(registered));
  });
  after(async () => {
    raw.transport.close();
    await harness.close();
    await server.close();
  });

  it("answers 70,000 invalid active_sessions with the first issues and a count, in < 8 KiB", async () => {
    const request = {
      jsonrpc: "2.0",
      id: 2,
      method: "executor.heartbeat",
      params: { active_sessions: Array.from({ length: 70_000 }, () => 1) },
    };
    assert.ok(JSON.stringify(request).length > 136 * 1024);
    const text = await raw.request(request);
    assert.ok(text.length < 8 * 1024, `the answer is ${text.length} bytes`);
    const answer = JSON.parse(text);
    assert.equal(answer.id, 2);
    assert.equal(answer.error.code, -32602);
    const { issues, issue_count, truncated } = answer.error.data;
    assert.equal(issues.length, MAX_REPORTED_ISSUES);
    assert.deepEqual(issues[0].path, ["active_sessions", 0]);
    assert.equal(issues[0].code, "invalid_type");
    assert.deepEqual(issues[9].path, ["active_sessions", 9]);
    assert.equal(issue_count, MAX_COUNTED_ISSUES);
    assert.equal(truncated, true, "the search stopped: there are more");
  });

  it("counts every issue of a refusal with fewer than the limit, and the connection goes on", async () => {
    const text = await raw.request({
      jsonrpc: "2.0",
      id: 3,
      method: "executor.heartbeat",
      params: { active_sessions: ["ses_a", "", 7, "ses_b"] },
    });
    const answer = JSON.parse(text);
    assert.equal(answer.error.code, -32602);
    assert.deepEqual(answer.error.data.issues.map((i: { path: unknown[] }) => i.path), [
      ["active_sessions", 1],
      ["active_sessions", 2],
    ]);
    assert.equal(answer.error.data.issue_count, 2);
    assert.equal(answer.error.data.truncated, undefined);
    const beat = JSON.parse(
      await raw.request({ jsonrpc: "2.0", id: 4, method: "executor.heartbeat", params: {} }),
    );
    assert.equal(beat.result.drain, false);
  });
});
