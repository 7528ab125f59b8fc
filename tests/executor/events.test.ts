/**
 * Durable session events: kept until acknowledged, resent after a reconnect in their order and
 * under their JSON-RPC ids before any new event, retried after a retryable refusal, rejected
 * after a final one.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ConflictError, NotFoundError, UnavailableError } from "../../executor/node.ts";
import type {
  SessionEventParams,
  SessionEventPayload,
  SessionEventResult,
} from "../../protocol/mod.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

/** A tool executor's own event type, with its own members (the contract allows extra fields). */
function step(n: number): SessionEventPayload {
  return { type: "step", n } as SessionEventPayload;
}

/** The `n` of a step event. */
function nOf(event: SessionEventPayload): number | undefined {
  return (event as unknown as { n?: number }).n;
}

describe("ExecutorClient: durable session events", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  async function scriptedWithSessions(...ids: string[]) {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    const { client } = fx.client(harness);
    await client.start();
    for (const id of ids) await harness.last.peer.call("session.assign", { session_id: id });
    return { harness, client };
  }

  it("keeps events until acknowledged and resends them after a reconnect, in order, under the same ids, before any new event", async () => {
    const { harness, client } = await scriptedWithSessions("ses_1", "ses_2");
    // The first connection never acknowledges.
    harness.on(
      "session.event",
      (_params, { connection }) => connection.index === 0 ? new Promise<never>(() => {}) : {},
    );
    const acks: Promise<SessionEventResult>[] = [];
    const emit = (session: string, n: number) =>
      acks.push(client.call("session.event", { session_id: session, event: step(n) }));
    emit("ses_1", 1);
    emit("ses_2", 2);
    emit("ses_1", 3); // queued behind 1: one event per session in flight
    await harness.waitForRequests("session.event", 2);
    harness.last.peer.close(1011, "harness fault");
    await until(() => client.state !== "connected");
    emit("ses_2", 4); // new, while disconnected
    await Promise.all(acks);
    const first = harness.received.filter((r) =>
      r.method === "session.event" && r.connection === 0
    );
    const second = harness.received.filter((r) =>
      r.method === "session.event" && r.connection === 1
    );
    assert.deepEqual(first.map((r) => r.params.event.n), [1, 2]);
    assert.deepEqual(second.map((r) => r.params.event.n), [1, 2, 3, 4]);
    assert.deepEqual(
      second.slice(0, 2).map((r) => r.id),
      first.map((r) => r.id),
      "resent under the same JSON-RPC ids",
    );
    assert.equal(new Set(second.map((r) => r.id)).size, 4);
    assert.ok(second.every((r) => typeof r.id === "string"));
  });

  it("keeps one session's events in order when the harness refuses one for a while", async () => {
    const { harness, client } = await scriptedWithSessions("ses_1");
    const accepted: number[] = [];
    let refusals = 2;
    harness.on("session.event", (params) => {
      const n = nOf(params.event)!;
      if (n === 2 && refusals-- > 0) {
        throw new UnavailableError("store down", {
          reason: "backend_unavailable",
          retry_after_ms: 1,
        });
      }
      accepted.push(n);
      return {};
    });
    const acks = [1, 2, 3, 4].map((n) =>
      client.call("session.event", { session_id: "ses_1", event: step(n) })
    );
    await Promise.all(acks);
    assert.deepEqual(accepted, [1, 2, 3, 4]);
  });

  it("pipelines sequenced (agent) events and recovers from a gap at the expected sequence", async () => {
    const { harness, client } = await scriptedWithSessions("ses_1");
    let acked = 0;
    let refuseTwo = true;
    const accepted: number[] = [];
    harness.on("session.event", (params) => {
      const seq = params.sequence!;
      if (seq <= acked) return { acked_sequence: acked, duplicate: true };
      if (seq > acked + 1) {
        throw new ConflictError("gap", { reason: "sequence_gap", expected_sequence: acked + 1 });
      }
      if (seq === 2 && refuseTwo) {
        refuseTwo = false;
        throw new UnavailableError("store down", {
          reason: "backend_unavailable",
          retry_after_ms: 1,
        });
      }
      acked = seq;
      accepted.push(seq);
      return { acked_sequence: acked };
    });
    const acks = [1, 2, 3, 4, 5, 6].map((sequence) =>
      client.call("session.event", {
        session_id: "ses_1",
        turn_id: "turn_1",
        event_id: `evt_${sequence}`,
        sequence,
        event: { type: "agent.message", content: [{ type: "text", text: `${sequence}` }] },
      } as SessionEventParams)
    );
    await Promise.all(acks);
    assert.deepEqual(accepted, [1, 2, 3, 4, 5, 6]);
    const sent = harness.requests("session.event").map((r) => r.params.sequence);
    // 3..6 went out before 2 was accepted: pipelined; then resent from 2.
    assert.deepEqual(sent.slice(0, 6), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(sent.slice(6), [2, 3, 4, 5, 6]);
  });

  it("rejects an event the harness refuses for good, and delivers the next", async () => {
    const { harness, client } = await scriptedWithSessions("ses_1");
    harness.on("session.event", (params) => {
      if (params.session_id === "ses_gone") {
        throw new NotFoundError("unknown session", { reason: "unknown_session" });
      }
      return {};
    });
    const refused = await client.call("session.event", {
      session_id: "ses_gone",
      event: { type: "x" },
    }).then(() => undefined, (e) => e);
    assert.ok(refused instanceof NotFoundError, String(refused));
    assert.deepEqual(
      await client.call("session.event", { session_id: "ses_1", event: { type: "y" } }),
      {},
    );
  });

  it("delivers every event once, in order, across cuts (project harness)", async () => {
    const { harness, server } = await fx.harness();
    const proxy = await ChaosProxy.start(server.url);
    fx.defer(() => proxy.close());
    const { client } = fx.client(server, { harnessUrl: proxy.url });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    const acks: Promise<unknown>[] = [];
    for (let n = 1; n <= 300; n++) {
      acks.push(client.call("session.event", { session_id: "ses_1", event: step(n) }));
      if (n % 100 === 50) {
        await until(() => session.eventRecords.length >= n - 20);
        proxy.cut();
      }
    }
    await Promise.all(acks);
    assert.ok(proxy.cuts >= 3);
    assert.deepEqual(
      session.eventRecords.map((r) => nOf(r.event)),
      Array.from({ length: 300 }, (_, i) => i + 1),
    );
  });
});
