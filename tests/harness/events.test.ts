/**
 * Durable session events over a real WebSocket: deduplicated by JSON-RPC id (also across a
 * reconnect), agent events by (session_id, event_id) and sequence, gaps refused with
 * -32013 expected_sequence, persisted through the sink before the ACK, read in order.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ConflictError, InvalidParamsError, NotFoundError, UnavailableError } from "../../mod.ts";
import { Harness, type HarnessServer, type SessionEventRecord } from "../../harness/node.ts";
import { ExecutorPeer, registerParams, turns } from "../helpers/executor-peer.ts";

describe("Harness: durable session events", { timeout: 20_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];
  const stored: SessionEventRecord[] = [];
  let failNextStore = 0;
  let next = 0;

  before(async () => {
    harness = new Harness({
      insecureNoAuth: true,
      onSessionEvent: async (record) => {
        await new Promise((resolve) => setTimeout(resolve, 0));
        if (failNextStore > 0) {
          failNextStore--;
          throw new Error("store down");
        }
        stored.push(record);
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

  async function connect(machineId = `m_e${++next}`, resume?: string[]) {
    const peer = await ExecutorPeer.dial(server.url);
    peers.push(peer);
    const result = await peer.start(registerParams({
      environment_id: "",
      machine_id: machineId,
      capabilities: { process: true, agent: {}, tools: ["bash"] },
      ...(resume ? { resume: { executor_id: `exec_${machineId}`, active_sessions: resume } } : {}),
    }));
    const executor = await harness.waitExecutor({ filter: (e) => e.id === result.executor_id });
    return { peer, executor, machineId };
  }

  async function collect(session: { events(): AsyncIterable<SessionEventRecord> }) {
    const out: SessionEventRecord[] = [];
    for await (const record of session.events()) out.push(record);
    return out;
  }

  it("deduplicates a tool executor's events by JSON-RPC id, also across a reconnect", async () => {
    const first = await connect();
    const session = await first.executor.assignSession({ session_id: "ses_ev_tool" });
    const event = (type: string) => ({ session_id: "ses_ev_tool", event: { type } });
    assert.deepEqual(await first.peer.peer.call("session.event", event("a"), { id: "evt_1" }), {});
    assert.deepEqual(
      await first.peer.peer.call("session.event", event("a"), { id: "evt_1" }),
      { duplicate: true },
    );
    // "1" and 1 are different ids.
    assert.deepEqual(await first.peer.peer.call("session.event", event("b"), { id: 1 }), {});
    await first.peer.close(1001, "network");
    await turns();
    const second = await connect(first.machineId, ["ses_ev_tool"]);
    assert.equal(second.executor, first.executor);
    assert.deepEqual(
      await second.peer.peer.call("session.event", event("b"), { id: 1 }),
      { duplicate: true },
    );
    assert.deepEqual(await second.peer.peer.call("session.event", event("c"), { id: "evt_3" }), {});
    await second.peer.peer.call("session.ended", { session_id: "ses_ev_tool" });
    const records = await collect(session);
    assert.deepEqual(records.map((r) => r.event.type), ["a", "b", "c"]);
    assert.deepEqual(records.map((r) => r.index), [1, 2, 3]);
  });

  it("keeps pipelined events in arrival order", async () => {
    const { peer, executor } = await connect();
    const session = await executor.assignSession({ session_id: "ses_ev_pipe" });
    const reading = collect(session);
    const acks = [];
    for (let i = 0; i < 200; i++) {
      // Extra members are allowed in an event (the schema is loose).
      const event = { type: "tick", n: i };
      acks.push(peer.peer.call("session.event", {
        session_id: "ses_ev_pipe",
        event,
      }, { id: `evt_pipe_${i}` }));
    }
    await Promise.all(acks);
    await peer.peer.call("session.ended", { session_id: "ses_ev_pipe" });
    const records = await reading;
    assert.deepEqual(
      records.map((r) => (r.event as { n?: number }).n),
      Array.from({ length: 200 }, (_, i) => i),
    );
    const persisted = stored.filter((r) => r.session_id === "ses_ev_pipe");
    assert.equal(persisted.length, 200, "every event went through the sink before its ACK");
  });

  it("deduplicates agent events by event_id and sequence and refuses a gap with -32013", async () => {
    const { peer, executor } = await connect();
    const session = await executor.assignSession({ session_id: "ses_ev_agent" });
    const agent = (sequence: number, eventId: string, text: string) => ({
      session_id: "ses_ev_agent",
      turn_id: "turn_1",
      event_id: eventId,
      sequence,
      event: { type: "agent.message", content: [{ type: "text" as const, text }] },
    });
    assert.deepEqual(await peer.peer.call("session.event", agent(1, "e1", "hello")), {
      acked_sequence: 1,
    });
    assert.deepEqual(await peer.peer.call("session.event", agent(2, "e2", "world")), {
      acked_sequence: 2,
    });
    // A resend under a new JSON-RPC id: duplicate by event_id, and by sequence <= acked.
    assert.deepEqual(await peer.peer.call("session.event", agent(2, "e2", "world")), {
      acked_sequence: 2,
      duplicate: true,
    });
    assert.deepEqual(await peer.peer.call("session.event", agent(1, "e1_again", "x")), {
      acked_sequence: 2,
      duplicate: true,
    });
    const gap = await peer.peer.call("session.event", agent(4, "e4", "skipped")).catch((e) => e);
    assert.ok(gap instanceof ConflictError, String(gap));
    assert.deepEqual(gap.data, { reason: "sequence_gap", expected_sequence: 3 });
    const invalid = await peer.peer.call("session.event", {
      ...agent(3, "e3", ""),
      event: { type: "agent.message" },
    }).catch((e) => e);
    assert.ok(invalid instanceof InvalidParamsError, "an agent event must match AgentEvent");
    assert.deepEqual(await peer.peer.call("session.event", agent(3, "e3", "!")), {
      acked_sequence: 3,
    });
    assert.deepEqual(
      session.eventRecords.map((r) => [r.sequence, r.event_id]),
      [[1, "e1"], [2, "e2"], [3, "e3"]],
    );
  });

  it("tells agent events apart by event_id and sequence, not by JSON-RPC id (an executor that numbers its requests per connection)", async () => {
    const { peer, executor } = await connect();
    const session = await executor.assignSession({ session_id: "ses_ev_rpc" });
    const agent = (sequence: number, eventId: string) => ({
      session_id: "ses_ev_rpc",
      turn_id: "turn_1",
      event_id: eventId,
      sequence,
      event: { type: "agent.message", content: [{ type: "text" as const, text: eventId }] },
    });
    const sent = (sequence: number, eventId: string) =>
      peer.peer.call("session.event", agent(sequence, eventId), { id: 7 });
    assert.deepEqual(await sent(1, "a1"), { acked_sequence: 1 });
    assert.deepEqual(await sent(2, "a2"), { acked_sequence: 2 }, "a new event under a used id");
    const gap = await sent(4, "a4").catch((e) => e);
    assert.ok(gap instanceof ConflictError, String(gap));
    assert.deepEqual(gap.data, { reason: "sequence_gap", expected_sequence: 3 });
    assert.deepEqual(await sent(2, "a2"), { acked_sequence: 2, duplicate: true });
    assert.deepEqual(
      session.eventRecords.map((r) => [r.sequence, r.event_id]),
      [[1, "a1"], [2, "a2"]],
    );
  });

  it("does not acknowledge an event the sink failed to store (-32004); the resend is accepted", async () => {
    const { peer, executor } = await connect();
    const session = await executor.assignSession({ session_id: "ses_ev_sink" });
    failNextStore = 1;
    const params = { session_id: "ses_ev_sink", event: { type: "important" } };
    const refused = await peer.peer.call("session.event", params, { id: "evt_sink" })
      .catch((e) => e);
    assert.ok(refused instanceof UnavailableError, String(refused));
    assert.equal(refused.reason, "backend_unavailable");
    assert.equal(session.eventRecords.length, 0);
    assert.deepEqual(await peer.peer.call("session.event", params, { id: "evt_sink" }), {});
    assert.equal(session.eventRecords.length, 1);
  });

  it("answers an event for an unknown session with -32002", async () => {
    const { peer } = await connect();
    const error = await peer.peer.call("session.event", {
      session_id: "ses_unknown",
      event: { type: "x" },
    }).catch((e) => e);
    assert.ok(error instanceof NotFoundError, String(error));
    assert.equal(error.reason, "unknown_session");
  });

  it("events() can stop early through a signal", async () => {
    const { peer, executor } = await connect();
    const session = await executor.assignSession({ session_id: "ses_ev_signal" });
    const controller = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (
        const record of session.events({ signal: controller.signal })
      ) {
        seen.push(record.event.type);
        if (seen.length === 2) controller.abort();
      }
    })();
    for (const type of ["one", "two", "three"]) {
      await peer.peer.call("session.event", { session_id: "ses_ev_signal", event: { type } });
    }
    await reading;
    assert.deepEqual(seen, ["one", "two"]);
  });
});
