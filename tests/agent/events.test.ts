/**
 * Durable agent events and deltas over a real WebSocket: the harness deduplicates by
 * (session_id, event_id), takes a sequence at or below the acknowledged one as a duplicate and
 * rejects a gap with -32013 `expected_sequence`; events are validated against AgentEvent;
 * deltas are relayed as `event_start` / `event_delta` and end with their durable event;
 * unacknowledged events are resent in order after a reconnect, before newer ones; an event the
 * harness's smaller frame limit refused after it was numbered leaves no gap (a `session.error`
 * takes its sequence); and a turn streaming 10,000 events with deltas through at least 20
 * random cuts delivers every durable event exactly once, in order.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type AgentEvent,
  type AgentStreamEvent,
  ConflictError,
  type EmittedEvent,
  FrameTooLargeError,
  InvalidOutgoingParamsError,
  InvalidParamsError,
  serveAgent,
  type SessionEventRecord,
  TurnCanceledError,
} from "../../mod.ts";
import { SEQUENCED_WINDOW } from "../../executor/event-outbox.ts";
import type { SessionEventParams } from "../../protocol/mod.ts";
import { AgentFixtures, collect, eventTypes, gate, text, until } from "../helpers/agent-fixture.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

/** A seeded PRNG (mulberry32), so a failing run can be replayed with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";

describe("agent events", { timeout: 120_000 }, () => {
  const fx = new AgentFixtures();
  afterEach(() => fx.cleanup());

  /** A raw executor (a contract Peer) with a started turn on session `ses_raw`. */
  async function rawExecutorWithTurn() {
    const h = await fx.harness();
    const raw = await ExecutorPeer.dial(h.server.url);
    fx.defer(() => void raw.close());
    raw.peer.onRequest("turn.start", ({ turn_id }) => ({ turn_id, accepted: true }));
    await raw.start(registerParams({ capabilities: { agent: {} } }));
    const executor = await h.harness.waitExecutor();
    await executor.startTurn({ session_id: "ses_raw", turn_id: "t1", input: [text("go")] });
    const event = (sequence: number, eventId = `ev_${sequence}`): SessionEventParams => ({
      session_id: "ses_raw",
      turn_id: "t1",
      event_id: eventId,
      sequence,
      event: { type: "agent.message", content: [text(`${sequence}`)] },
    });
    return { h, raw, executor, event, session: executor.sessions.get("ses_raw")! };
  }

  it("rejects a sequence gap with -32013 and the expected sequence; repeats are duplicates", async () => {
    const { raw, event, session } = await rawExecutorWithTurn();
    assert.deepEqual(await raw.peer.call("session.event", event(1)), { acked_sequence: 1 });
    const gap = await raw.peer.call("session.event", event(3)).then(() => undefined, (e) => e);
    assert.ok(gap instanceof ConflictError, `expected -32013, got ${gap}`);
    assert.deepEqual(gap.data, { reason: "sequence_gap", expected_sequence: 2 });
    assert.deepEqual(await raw.peer.call("session.event", event(2)), { acked_sequence: 2 });
    // A sequence at or below the acknowledged one, under a new event id: a duplicate.
    assert.deepEqual(await raw.peer.call("session.event", event(1, "ev_other")), {
      acked_sequence: 2,
      duplicate: true,
    });
    // The same (session_id, event_id) again, even with the next sequence: a duplicate.
    assert.deepEqual(await raw.peer.call("session.event", event(3, "ev_2")), {
      acked_sequence: 2,
      duplicate: true,
    });
    // Not an AgentEvent: refused before it counts.
    const invalid = await raw.peer.call("session.event", {
      ...event(3),
      event: { type: "agent.message" },
    }).then(() => undefined, (e) => e);
    assert.ok(invalid instanceof InvalidParamsError, `expected -32602, got ${invalid}`);
    // An agent event without its turn, its id or its sequence: outside the turn's order.
    for (const field of ["turn_id", "event_id", "sequence"] as const) {
      const { [field]: _, ...without } = event(3);
      const refused = await raw.peer.call("session.event", without).then(() => undefined, (e) => e);
      assert.ok(refused instanceof InvalidParamsError, `${field}: expected -32602, got ${refused}`);
      assert.equal((refused.data as { field?: string }).field, `/${field}`);
    }
    assert.deepEqual(session.eventRecords.map((r) => [r.sequence, r.event_id]), [
      [1, "ev_1"],
      [2, "ev_2"],
    ]);
  });

  it("relays deltas as event_start and event_delta until their durable event arrives", async () => {
    const { h, raw, event } = await rawExecutorWithTurn();
    const stream = collect(h.platform.stream("ses_raw"));
    const delta = (index: number, eventId = "ev_1") =>
      raw.peer.notify("session.event_delta", {
        session_id: "ses_raw",
        turn_id: "t1",
        event_id: eventId,
        index,
        delta: { type: "text_delta", text: `d${index}` },
      });
    delta(0);
    delta(1);
    await raw.peer.call("session.event", event(1));
    delta(2); // after the event itself: the preview is over, dropped
    delta(0, "ev_2");
    await raw.peer.call("session.event", event(2));
    await until(() => stream.items.length === 7, "seven stream items");
    const summary = stream.items.map((item: AgentStreamEvent) =>
      item.type === "event"
        ? `event ${item.record.event_id}`
        : item.type === "event_start"
        ? `start ${item.event_id}`
        : `delta ${item.event_id} ${item.index} ${(item.delta as unknown as { text: string }).text}`
    );
    assert.deepEqual(summary, [
      "start ev_1",
      "delta ev_1 0 d0",
      "delta ev_1 1 d1",
      "event ev_1",
      "start ev_2",
      "delta ev_2 0 d0",
      "event ev_2",
    ]);
    await raw.peer.call("session.event", {
      ...event(3),
      event: { type: "session.status_idle", turn_outcome: "completed" },
    });
    await until(() => stream.items.length === 8, "the idle event");
    assert.equal(stream.items[7].type, "event");
  });

  it("refuses at emit an event too deep for its frame: its sequence goes to the next event", async () => {
    const h = await fx.harness();
    let deep: unknown = "leaf";
    for (let i = 0; i < 200; i++) deep = { deeper: deep };
    const outcomes: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        outcomes.push(
          await turn.emit({
            type: "agent.tool_use",
            id: "tu_deep",
            name: "search",
            input: { q: deep },
          } as never).then((ack) => ack, (e) => e),
        );
        outcomes.push(await turn.emit({ type: "agent.message", content: [text("after")] }));
      },
    });
    await executor.startTurn({ session_id: "ses_deep", turn_id: "t1", input: [text("go")] });
    await until(() => h.platform.turn("ses_deep")?.state === "completed", "the turn completes");
    assert.ok(outcomes[0] instanceof InvalidOutgoingParamsError, String(outcomes[0]));
    assert.equal((outcomes[1] as EmittedEvent).sequence, 2);
    const records = executor.sessions.get("ses_deep")!.eventRecords;
    assert.deepEqual(records.map((r) => r.sequence), [1, 2, 3]);
  });

  it("refuses at emit, typed, an event that cannot be serialized: its sequence goes to the next event", async () => {
    const h = await fx.harness();
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    let deep: unknown[] = [];
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const unserializable: unknown[] = [
      10n,
      cycle,
      {
        toJSON: () => {
          throw new Error("boom");
        },
      },
      Object.defineProperty({}, "x", {
        enumerable: true,
        get: () => {
          throw new Error("getter");
        },
      }),
      deep,
    ];
    const outcomes: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        for (const value of unserializable) {
          outcomes.push(
            await turn.emit({
              type: "agent.tool_use",
              id: "tu_bad",
              name: "search",
              input: { q: value },
            } as never).then((ack) => ack, (e) => e),
          );
        }
        outcomes.push(await turn.emit({ type: "agent.message", content: [text("after")] }));
      },
    });
    await executor.startTurn({ session_id: "ses_json", turn_id: "t1", input: [text("go")] });
    await until(() => h.platform.turn("ses_json")?.state === "completed", "the turn completes");
    const codes = outcomes.slice(0, unserializable.length).map((outcome) => {
      assert.ok(outcome instanceof InvalidOutgoingParamsError, String(outcome));
      return (outcome.issues[0] as { code: string }).code;
    });
    // The deep array: past the stack where the serializer has one (V8), else too deep a frame.
    assert.deepEqual(codes.slice(0, 4), ["not_json", "not_json", "not_json", "not_json"]);
    assert.ok(["not_json", "too_deep"].includes(codes[4]), codes[4]);
    assert.equal((outcomes.at(-1) as EmittedEvent).sequence, 2);
    const records = executor.sessions.get("ses_json")!.eventRecords;
    assert.deepEqual(records.map((r) => r.sequence), [1, 2, 3]);
  });

  /**
   * A harness taking frames of at most 128 KiB (the executor sends up to 16 MiB): a 192 KiB
   * event is numbered, sent, and the harness closes the connection over it (1009); after the
   * reconnect the client sends no frame that large, so the event cannot be resent.
   */
  const HARNESS_MAX_FRAME = 128 * 1024;
  const bigMessage = (label: string): AgentEvent => ({
    type: "agent.message",
    content: [text(label + "z".repeat(192 * 1024))],
  });
  /**
   * Resolves once `predicate` holds; fails within `ms` showing the session's events (a gap
   * leaves the turn running for good: no waiting out the suite's timeout for it).
   */
  async function within(
    predicate: () => boolean,
    what: string,
    records: () => readonly SessionEventRecord[] | undefined,
    ms = 10_000,
  ): Promise<void> {
    const deadline = performance.now() + ms;
    while (!predicate()) {
      if (performance.now() > deadline) {
        const held = (records() ?? []).map((r) => `${r.sequence} ${r.event.type}`);
        assert.fail(`${what}: not within ${ms} ms; the harness holds [${held.join(", ")}]`);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
  const messageTexts = (records: readonly SessionEventRecord[]) =>
    records.map((r) =>
      r.event.type === "agent.message"
        ? (r.event as unknown as { content: { text: string }[] }).content[0].text
        : r.event.type
    );

  it("sends a session.error under the sequence of an event the harness's frame limit refused after it was numbered: the turn and the next one go on", async () => {
    const h = await fx.harness({ harness: { maxFrameBytes: HARNESS_MAX_FRAME } });
    const outcomes: unknown[] = [];
    const { executor, logger } = await fx.executor(h, {
      async runTurn(turn) {
        if (turn.turnId === "t2") {
          await turn.emit({ type: "agent.message", content: [text("second turn")] });
          return;
        }
        const settle = (p: Promise<EmittedEvent>) => p.then((ack) => ack, (e) => e);
        outcomes.push(await settle(turn.emit(bigMessage("big"), { eventId: "evt_big" })));
        // The lower limit is known now: one as large is refused before it takes a sequence.
        outcomes.push(await settle(turn.emit(bigMessage("big again"))));
        outcomes.push(await settle(turn.emit({ type: "agent.message", content: [text("after")] })));
      },
    });
    await executor.startTurn({ session_id: "ses_big", turn_id: "t1", input: [text("go")] });
    const held = () => executor.sessions.get("ses_big")?.eventRecords;
    await within(
      () => h.platform.turn("ses_big")?.state === "completed",
      "turn t1 completes",
      held,
    );
    assert.ok(outcomes[0] instanceof FrameTooLargeError, `the big event: ${outcomes[0]}`);
    assert.ok(outcomes[1] instanceof FrameTooLargeError, `the second big event: ${outcomes[1]}`);
    assert.equal((outcomes[2] as EmittedEvent).sequence, 3, String(outcomes[2]));
    const session = executor.sessions.get("ses_big")!;
    let records = session.eventRecords;
    assert.deepEqual(records.map((r) => r.sequence), [1, 2, 3, 4]);
    assert.deepEqual(eventTypes(records), [
      "session.status_running",
      "session.error",
      "agent.message",
      "session.status_idle",
    ]);
    assert.equal(records[1].event_id, "evt_big", "the error takes the event's id");
    const error = (records[1].event as unknown as { error: { code: string; message: string } })
      .error;
    assert.equal(error.code, "event_too_large");
    assert.match(error.message, /^agent\.message event not delivered/);
    assert.equal(
      (records[3].event as unknown as { turn_outcome: string }).turn_outcome,
      "completed",
    );
    assert.ok(
      logger.records.some((r) =>
        r.level === "warn" && r.fields?.event_id === "evt_big" &&
        r.message === "agent event too large for the harness: a session.error took its place"
      ),
      "the loss is logged",
    );

    await executor.startTurn({ session_id: "ses_big", turn_id: "t2", input: [text("again")] });
    await within(
      () => h.platform.turnById("ses_big", "t2")?.state === "completed",
      "turn t2 completes",
      held,
    );
    records = session.eventRecords;
    assert.deepEqual(records.map((r) => r.sequence), [1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(messageTexts(records.slice(4)), [
      "session.status_running",
      "second turn",
      "session.status_idle",
    ]);
  });

  it("keeps the events queued behind one the harness's frame limit refused in order, after the session.error that takes its sequence", async () => {
    const h = await fx.harness({ harness: { maxFrameBytes: HARNESS_MAX_FRAME } });
    let settled: PromiseSettledResult<EmittedEvent>[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        // Not awaited: ten events are queued (and pipelined) behind the big one.
        const emitted = [turn.emit(bigMessage("big"))];
        for (let i = 1; i <= 10; i++) {
          emitted.push(turn.emit({ type: "agent.message", content: [text(`${i}`)] }));
        }
        settled = await Promise.allSettled(emitted);
      },
    });
    await executor.startTurn({ session_id: "ses_pipe", turn_id: "t1", input: [text("go")] });
    await within(
      () => h.platform.turn("ses_pipe")?.state === "completed",
      "the turn completes",
      () => executor.sessions.get("ses_pipe")?.eventRecords,
    );
    assert.equal(settled[0].status, "rejected");
    assert.ok((settled[0] as PromiseRejectedResult).reason instanceof FrameTooLargeError);
    assert.deepEqual(
      settled.slice(1).map((s) => s.status === "fulfilled" ? s.value.sequence : String(s.reason)),
      Array.from({ length: 10 }, (_, i) => i + 3),
    );
    const records = executor.sessions.get("ses_pipe")!.eventRecords;
    assert.deepEqual(records.map((r) => r.sequence), Array.from({ length: 13 }, (_, i) => i + 1));
    assert.deepEqual(messageTexts(records), [
      "session.status_running",
      "session.error",
      ...Array.from({ length: 10 }, (_, i) => `${i + 1}`),
      "session.status_idle",
    ]);
  });

  it("gives up, without a resend loop, on the events behind one the harness's frame limit refused when more wait than the outbox sends at once", async () => {
    const h = await fx.harness({ harness: { maxFrameBytes: HARNESS_MAX_FRAME } });
    let outcome: { settled: PromiseSettledResult<EmittedEvent>[]; reason: unknown } | undefined;
    const { executor, logger } = await fx.executor(h, {
      async runTurn(turn) {
        // The replacement would queue behind SEQUENCED_WINDOW events the harness refuses until
        // it arrives, resent from the first for ever: none is sent, the turn cannot go on.
        const emitted = [turn.emit(bigMessage("big"))];
        for (let i = 1; i <= SEQUENCED_WINDOW; i++) {
          emitted.push(turn.emit({ type: "agent.message", content: [text(`${i}`)] }));
        }
        const settled = await Promise.allSettled(emitted);
        await new Promise((resolve) => setTimeout(resolve, 0));
        outcome = { settled, reason: turn.signal.reason };
      },
    });
    await executor.startTurn({ session_id: "ses_many", turn_id: "t1", input: [text("go")] });
    await within(
      () => outcome !== undefined,
      "the turn's events settle (no resend loop)",
      () => executor.sessions.get("ses_many")?.eventRecords,
    );
    const { settled, reason } = outcome!;
    assert.ok((settled[0] as PromiseRejectedResult).reason instanceof FrameTooLargeError);
    for (const s of settled.slice(1)) {
      assert.ok(s.status === "rejected" && s.reason instanceof ConflictError, String(s.status));
    }
    assert.ok(
      reason instanceof TurnCanceledError && reason.reason === "events_refused",
      `${reason}`,
    );
    assert.ok(
      logger.records.some((r) =>
        r.message ===
          "agent event too large for the harness, too many events behind it to take its place"
      ),
    );
  });

  it("gives up on events behind a gap no resend can fill, and ends the turn, without resending in a loop", async () => {
    const scripted = await ScriptedHarness.start({ heartbeatIntervalMs: 3_600_000 });
    fx.defer(() => scripted.close());
    // A harness that expects a sequence this executor never holds (it lost its state).
    scripted.on("session.event", () => {
      throw new ConflictError("sequence gap", { reason: "sequence_gap", expected_sequence: 7 });
    });
    const { client } = fx.client(scripted.url);
    const outcome = gate<{ emitted: unknown; canceled: boolean }>();
    serveAgent(client, {
      async runTurn(turn) {
        const emitted = await turn.emit({ type: "agent.message", content: [text("x")] })
          .then((a) => a, (e) => e);
        // The rejection reaches the turn's own handlers first: let them run.
        await new Promise((resolve) => setTimeout(resolve, 0));
        outcome.open({ emitted, canceled: turn.signal.aborted });
      },
    });
    await client.start();
    await scripted.last.peer.call("turn.start", {
      session_id: "ses_gap",
      turn_id: "t1",
      input: [text("go")],
    });
    const { emitted, canceled } = await outcome.promise;
    assert.ok(emitted instanceof ConflictError, String(emitted));
    assert.equal(canceled, true, "the turn cannot go on: it is canceled");
    // Let any resend loop show itself: a few turns of the event loop.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 0));
    const sent = scripted.requests("session.event").length;
    assert.ok(sent <= 3, `sent ${sent} session.event requests: no resend loop`);
  });

  it("resends unacknowledged events in order after a reconnect, before newer ones", async () => {
    const held = gate();
    const reached = gate();
    let holds = 0;
    const h = await fx.harness({
      harness: {
        // The harness stalls on sequence 5 while the connection is cut.
        onSessionEvent: async (record) => {
          if (record.sequence === 5 && holds++ === 0) {
            reached.open();
            await held.promise;
          }
        },
      },
    });
    const proxy = await fx.proxy(h.server.url);
    const resume = gate();
    const acks: EmittedEvent[] = [];
    const { executor, logger } = await fx.executor(h, {
      async runTurn(turn) {
        const first = [];
        for (let i = 1; i <= 10; i++) {
          first.push(turn.emit({ type: "agent.message", content: [text(`${i}`)] }));
        }
        await resume.promise;
        const later = [];
        for (let i = 11; i <= 15; i++) {
          later.push(turn.emit({ type: "agent.message", content: [text(`${i}`)] }));
        }
        acks.push(...await Promise.all([...first, ...later]));
      },
    }, { url: proxy.url });
    await executor.startTurn({ session_id: "ses_re", turn_id: "t1", input: [text("go")] });
    await reached.promise;
    proxy.cut();
    await until(() => proxy.open > 0 && executor.connected, "the reconnect");
    held.open();
    resume.open();
    await until(() => h.platform.turn("ses_re")?.state === "completed", "the turn completes");
    const records = executor.sessions.get("ses_re")!.eventRecords;
    assert.deepEqual(records.map((r) => r.sequence), Array.from({ length: 17 }, (_, i) => i + 1));
    assert.deepEqual(
      records.slice(1, 16).map((r) =>
        (r.event as unknown as { content: { text: string }[] }).content[0].text
      ),
      Array.from({ length: 15 }, (_, i) => `${i + 1}`),
    );
    assert.deepEqual(acks.map((a) => a.sequence), Array.from({ length: 15 }, (_, i) => i + 2));
    assert.ok(
      logger.records.some((r) => r.message === "resending unacknowledged session events"),
      "the executor resent what was not acknowledged",
    );
  });

  it("streams 10,000 events with deltas through at least 20 random cuts: every durable event exactly once, in order", async () => {
    const EVENTS = 10_000;
    const CUTS = 25;
    const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
    const random = prng(seed);
    const cutAt = new Set<number>();
    while (cutAt.size < CUTS) cutAt.add(1 + Math.floor(random() * (EVENTS - 1)));
    // The session's log keeps every event, so all can be checked in it.
    const h = await fx.harness({ harness: { maxSessionEvents: EVENTS + 2 } });
    const proxy = await fx.proxy(h.server.url);
    const stream = collect(h.platform.stream("ses_chaos"));
    let deltasSent = 0;
    const { executor, logger } = await fx.executor(h, {
      async runTurn(turn) {
        let last: Promise<EmittedEvent> | undefined;
        for (let i = 1; i <= EVENTS; i++) {
          const id = turn.eventId();
          turn.delta(id, { type: "text_delta", text: `${i}.` });
          turn.delta(id, { type: "text_delta", text: `${i}..` });
          deltasSent += 2;
          last = turn.emit({ type: "agent.message", content: [text(`${i}`)] }, { eventId: id });
          // Yield now and then as a model loop would, and bound the backlog of unacknowledged
          // events (the outbox keeps every one until it is acknowledged).
          if (i % 1_000 === 0) await last;
          else if (i % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 0));
          if (cutAt.has(i)) {
            await until(() => proxy.open > 0, "a connection to cut");
            proxy.cut();
          }
        }
        await last;
      },
    }, {
      url: proxy.url,
      client: {
        reconnect: { initialDelayMs: 1, maxDelayMs: 20 },
        retry: { initialDelayMs: 1, maxDelayMs: 20 },
      },
    });
    const started = performance.now();
    await executor.startTurn({ session_id: "ses_chaos", turn_id: "t1", input: [text("go")] });
    await until(() => h.platform.turn("ses_chaos")?.state === "completed", "the turn completes");
    const seconds = (performance.now() - started) / 1000;
    const session = executor.sessions.get("ses_chaos")!;
    const records = session.eventRecords;
    assert.equal(records.length, EVENTS + 2, "every event once");
    assert.deepEqual(
      records.map((r) => r.sequence),
      Array.from({ length: EVENTS + 2 }, (_, i) => i + 1),
    );
    const messages = records.slice(1, -1).map((r) =>
      Number((r.event as unknown as { content: { text: string }[] }).content[0].text)
    );
    assert.deepEqual(messages, Array.from({ length: EVENTS }, (_, i) => i + 1), "in order");
    assert.equal(new Set(records.map((r) => r.event_id)).size, EVENTS + 2, "no event id twice");
    assert.deepEqual(eventTypes([records[0], records[EVENTS + 1]]), [
      "session.status_running",
      "session.status_idle",
    ]);
    assert.ok(proxy.cuts >= 20, `only ${proxy.cuts} cuts`);
    assert.equal(executor.gone, false, "resumed within the lease every time");

    // The subscriber saw each durable event once, in order, and no preview after its event.
    await until(
      () => stream.items.filter((i) => i.type === "event").length === EVENTS + 2,
      "stream",
    );
    const durable: SessionEventRecord[] = [];
    const final = new Set<string>();
    const startedIds = new Set<string>();
    let deltasSeen = 0;
    for (const item of stream.items) {
      if (item.type === "event") {
        durable.push(item.record);
        final.add(item.record.event_id!);
      } else {
        assert.equal(
          final.has(item.event_id),
          false,
          `a delta of ${item.event_id} after its event`,
        );
        if (item.type === "event_start") startedIds.add(item.event_id);
        else {
          deltasSeen++;
          assert.ok(
            startedIds.has(item.event_id),
            `event_start precedes the deltas of ${item.event_id}`,
          );
        }
      }
    }
    assert.deepEqual(durable.map((r) => r.sequence), records.map((r) => r.sequence));
    assert.ok(
      deltasSeen > 0 && deltasSeen <= deltasSent,
      `deltas are lossy: ${deltasSeen}/${deltasSent}`,
    );
    const resent = logger.records
      .filter((r) => r.message === "resending unacknowledged session events")
      .reduce((sum, r) => sum + Number(r.fields?.count ?? 0), 0);
    process.stdout.write(
      `# agent chaos (${RUNTIME}): seed ${seed}, ${proxy.cuts} cuts, ${proxy.accepted} connections, ` +
        `${EVENTS} events (${resent} resent), ${deltasSeen}/${deltasSent} deltas relayed, ` +
        `${seconds.toFixed(1)} s\n`,
    );
  });
});
