/**
 * Property: random and mutated frames thrown at a peer never throw out of its read loop, never
 * leave an outgoing request unsettled, and every request-shaped frame gets exactly one response.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setImmediate } from "node:timers";
import fc from "fast-check";
import { type CloseInfo, ManualClock, Peer, ProtocolError, type Transport } from "../../mod.ts";
import { ALL_CAPABILITIES } from "../helpers/raw.ts";

/** A transport the test drives synchronously: it calls the receiver itself, inside try/catch. */
class DrivenTransport implements Transport {
  readonly protocol = "bma.executor.v1.1";
  readonly sent: string[] = [];
  receiver: ((frame: string) => void) | undefined;
  readonly closed: Promise<CloseInfo>;
  #resolve!: (info: CloseInfo) => void;
  #done = false;
  constructor() {
    this.closed = new Promise((r) => (this.#resolve = r));
  }
  send(frame: string): void {
    if (this.#done) throw new Error("closed");
    this.sent.push(frame);
  }
  listen(receiver: (frame: string) => void): void {
    this.receiver = receiver;
  }
  close(code = 1000, reason = ""): void {
    if (this.#done) return;
    this.#done = true;
    this.#resolve({ code, reason });
  }
}

const VALID_FRAMES: unknown[] = [
  {
    jsonrpc: "2.0",
    id: 1,
    method: "tool.call",
    params: { session_id: "s", tool_call_id: "c", tool: "bash", input: { command: "ls" } },
  },
  { jsonrpc: "2.0", id: "x", method: "tool.cancel", params: { tool_call_id: "c" } },
  { jsonrpc: "2.0", id: 2, method: "session.stop", params: { session_id: "s" } },
  {
    jsonrpc: "2.0",
    id: 3,
    method: "turn.start",
    params: { session_id: "s", turn_id: "t", input: [{ type: "text", text: "hi" }] },
  },
  { jsonrpc: "2.0", method: "tool.progress", params: { session_id: "s", tool_call_id: "c" } },
  { jsonrpc: "2.0", id: 1, result: { ok: true } },
  { jsonrpc: "2.0", id: 2, error: { code: -32009, message: "full" } },
];

/** Replaces one value somewhere in a JSON tree with another. */
function mutate(value: unknown, path: number[], replacement: unknown, drop: boolean): unknown {
  if (path.length === 0 || typeof value !== "object" || value === null) return replacement;
  const entries = Array.isArray(value)
    ? value.map((v, i) => [i, v] as const)
    : Object.entries(value);
  if (entries.length === 0) return replacement;
  const [key] = entries[path[0] % entries.length];
  const copy: any = Array.isArray(value) ? [...value] : { ...value };
  if (drop && path.length === 1) {
    if (Array.isArray(copy)) copy.splice(key as number, 1);
    else delete copy[key];
    return copy;
  }
  copy[key] = mutate(copy[key], path.slice(1), replacement, drop);
  return copy;
}

const frameArb: fc.Arbitrary<string> = fc.oneof(
  fc.string(),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc.tuple(
    fc.constantFrom(...VALID_FRAMES),
    fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
    fc.jsonValue(),
    fc.boolean(),
  ).map(([frame, path, replacement, drop]) =>
    JSON.stringify(mutate(frame, path, replacement, drop))
  ),
  fc.array(fc.constantFrom(...VALID_FRAMES), { maxLength: 4 }).map((batch) =>
    JSON.stringify(batch)
  ),
  fc.constantFrom(...VALID_FRAMES).map((f) => JSON.stringify(f)),
  fc.constantFrom(...VALID_FRAMES).map((f) => JSON.stringify(f).slice(0, 20)),
);

function isRequestShaped(value: unknown): value is { id: unknown } {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    "method" in value &&
    "id" in value;
}

/**
 * Lets the peer's promise chains run out: the peer sets no timer of its own (its clock is manual),
 * so macrotask turns suffice. `setImmediate`, not `setTimeout(0)`: a nested timer waits 1–4 ms
 * (Deno clamps it as browsers do), thousands of times over the property's runs.
 */
async function idle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
}

describe("Peer under random frames", { timeout: 120_000 }, () => {
  it("never throws, answers every request-shaped frame once, settles every pending request", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(frameArb, { minLength: 1, maxLength: 25 }),
        fc.nat(4),
        async (frames, outgoing) => {
          const transport = new DrivenTransport();
          const clock = new ManualClock();
          const peer = new Peer(transport, {
            clock,
            capabilities: ALL_CAPABILITIES,
            requestTimeoutMs: 1_000,
          });
          peer.onRequest("tool.call", async () => {
            await Promise.resolve();
            return { ok: true };
          });
          peer.onRequest("tool.cancel", () => {
            throw new Error("handler bug");
          });
          peer.onRequest("session.stop", () => {
            throw new ProtocolError(-32002, "not found", { session_id: "s" });
          });
          peer.onRequest("turn.start", (p) => ({ turn_id: p.turn_id, accepted: true }));
          peer.onNotification("tool.progress", () => {
            throw new Error("notification handler bug");
          });
          let settled = 0;
          const calls = Array.from(
            { length: outgoing },
            () =>
              peer.call("session.ready", { session_id: "s" }).then(
                () => settled++,
                () => settled++,
              ),
          );

          for (const frame of frames) {
            const before = transport.sent.length;
            assert.doesNotThrow(() => transport.receiver!(frame));
            await idle();
            const replies = transport.sent.slice(before).map((t) => JSON.parse(t));
            let parsed: unknown;
            try {
              parsed = JSON.parse(frame);
            } catch {
              assert.equal(replies.length, 1);
              assert.equal(replies[0].error.code, -32700);
              continue;
            }
            if (isRequestShaped(parsed)) {
              assert.equal(replies.length, 1, `one response to ${frame}`);
              const expectedId = typeof parsed.id === "string" ||
                  (typeof parsed.id === "number" && Math.abs(parsed.id) <= 2 ** 53 - 1)
                ? parsed.id
                : null;
              assert.deepEqual(replies[0].id, expectedId, frame);
              assert.ok("result" in replies[0] || "error" in replies[0]);
            } else if (typeof parsed !== "object" || parsed === null) {
              assert.equal(replies.length, 1);
              assert.equal(replies[0].error.code, -32600);
            }
            for (const reply of replies) {
              for (const r of Array.isArray(reply) ? reply : [reply]) {
                assert.equal(r.jsonrpc, "2.0");
                if ("error" in r) assert.ok(Number.isInteger(r.error.code));
              }
            }
          }
          // Half the time the clock runs out the requests, otherwise the connection drops.
          if (outgoing % 2) await clock.advance(1_000);
          transport.close(1006, "");
          await peer.closed;
          await Promise.all(calls);
          assert.equal(settled, outgoing);
          assert.equal(peer.pendingRequests, 0);
        },
      ),
      { numRuns: 300 },
    );
  });
});
