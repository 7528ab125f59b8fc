/**
 * Turns, both ends from this SDK over a real WebSocket: `turn.start` opens an agent session
 * without `session.assign` and is idempotent by `turn_id`; a running turn refuses another
 * (-32013); `max_sessions` (-32009); `executor_session_ref` resumes a conversation after an
 * executor restart; `turn.input` (idempotent, -32013 for a turn not running); `turn.cancel`;
 * `session.close`.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type AgentHandler,
  CapabilityNotAdvertisedError,
  ConflictError,
  ExecutorConfigError,
  MemoryHarnessStore,
  ResourceExhaustedError,
  serveAgent,
  SessionRefusedError,
  type Turn,
  TurnCanceledError,
  type TurnInput,
} from "../../mod.ts";
import {
  AgentFixtures,
  eventTypes,
  gate,
  text,
  until,
  whenAborted,
} from "../helpers/agent-fixture.ts";

describe("agent turns", { timeout: 30_000 }, () => {
  const fx = new AgentFixtures();
  afterEach(() => fx.cleanup());

  it("opens the session with turn.start (no session.assign), streams its events and ends idle", async () => {
    const h = await fx.harness();
    const opened: { first: boolean; ref: string | undefined }[] = [];
    const ran: string[] = [];
    const { client, executor } = await fx.executor(h, {
      openTurn(turn) {
        opened.push({ first: turn.first, ref: turn.executorSessionRef });
        return { executorSessionRef: `conv-${turn.sessionId}` };
      },
      async runTurn(turn) {
        ran.push(turn.turnId);
        const said = (turn.input[0] as { text: string }).text;
        await turn.emit({ type: "agent.message", content: [text(`you said ${said}`)] });
        return { stop_reason: "end_turn" };
      },
    });
    assert.deepEqual(executor.capabilities.agent, {}, "agent advertised");
    const result = await executor.startTurn({
      session_id: "ses_a",
      turn_id: "turn_1",
      input: [text("hi")],
    });
    assert.deepEqual(result, {
      turn_id: "turn_1",
      accepted: true,
      executor_session_ref: "conv-ses_a",
    });
    const session = executor.sessions.get("ses_a");
    assert.ok(session, "the harness holds the agent session");
    assert.equal(session.state, "ready");
    await until(() => h.platform.turn("ses_a")?.state === "completed", "the turn completes");
    assert.deepEqual(eventTypes(session.eventRecords), [
      "session.status_running",
      "agent.message",
      "session.status_idle",
    ]);
    assert.deepEqual(session.eventRecords.map((r) => r.sequence), [1, 2, 3]);
    assert.ok(session.eventRecords.every((r) => r.turn_id === "turn_1"), "events carry turn_id");
    assert.deepEqual(session.eventRecords[1].event, {
      type: "agent.message",
      content: [text("you said hi")],
    });
    assert.deepEqual(session.eventRecords[2].event, {
      type: "session.status_idle",
      turn_outcome: "completed",
      stop_reason: "end_turn",
    });
    assert.deepEqual(opened, [{ first: true, ref: undefined }]);
    assert.deepEqual(ran, ["turn_1"]);
    assert.deepEqual(client.sessions.map((s) => s.id), ["ses_a"], "held like an assigned one");
    assert.equal(h.platform.executorSessionRef("ses_a"), "conv-ses_a");
  });

  it("refuses options and handler hooks that are none when served, not at the first turn", async () => {
    const h = await fx.harness();
    const { client, agent } = await fx.executor(h, { runTurn() {} });
    await agent.dispose();
    const refused: [string, unknown, unknown][] = [
      ["a negative custom tool timeout", { runTurn() {} }, { customToolTimeoutMs: -1 }],
      ["a NaN cancel grace", { runTurn() {} }, { cancelGraceMs: NaN }],
      ["a timeout no timer takes", { runTurn() {} }, { customToolTimeoutMs: 2 ** 32 }],
      ["a lead that is text", { runTurn() {} }, { tokenRefreshLeadMs: "x" }],
      ["customTools as text", { runTurn() {} }, { customTools: "yes" }],
      ["options as text", { runTurn() {} }, "options"],
      ["an openTurn that is text", { runTurn() {}, openTurn: "x" }, {}],
    ];
    for (const [what, handler, options] of refused) {
      assert.throws(
        () => serveAgent(client, handler as never, options as never),
        ExecutorConfigError,
        what,
      );
    }
    // None of those served: the client still takes an agent.
    await serveAgent(client, { runTurn() {} }, { cancelGraceMs: 0 }).dispose();
  });

  it("serves one agent per client and withdraws the capability when disposed", async () => {
    const h = await fx.harness();
    const { client, agent, executor } = await fx.executor(h, { runTurn() {} }, {
      serve: { maxSessions: 3, customTools: true },
    });
    assert.deepEqual(executor.capabilities.agent, { max_sessions: 3, custom_tools: true });
    assert.throws(() => serveAgent(client, { runTurn() {} }), ExecutorConfigError);
    await executor.startTurn({ session_id: "ses_d", turn_id: "t1", input: [text("go")] });
    assert.deepEqual(agent.sessions, ["ses_d"]);
    await agent.dispose();
    await until(() => executor.capabilities.agent === undefined, "the capability is withdrawn");
    assert.equal(executor.sessions.has("ses_d"), false, "its sessions ended");
    const refused = await executor.startTurn({
      session_id: "ses_e",
      turn_id: "t1",
      input: [text("x")],
    })
      .then(() => undefined, (e) => e);
    assert.ok(
      refused instanceof CapabilityNotAdvertisedError,
      `expected a local refusal, got ${refused}`,
    );
    serveAgent(client, { runTurn() {} });
    await until(() => executor.capabilities.agent !== undefined, "served again");
  });

  it("is idempotent by turn_id and continues the conversation with the next turn", async () => {
    const h = await fx.harness();
    let opens = 0;
    const runs: { turn: string; first: boolean }[] = [];
    const release = gate();
    const { executor } = await fx.executor(h, {
      openTurn() {
        opens++;
      },
      async runTurn(turn) {
        runs.push({ turn: turn.turnId, first: turn.first });
        if (turn.turnId === "turn_1") await release.promise;
        await turn.emit({ type: "agent.message", content: [text(turn.turnId)] });
      },
    });
    const start = { session_id: "ses_i", turn_id: "turn_1", input: [text("go")] };
    const first = await executor.startTurn(start);
    const again = await executor.startTurn(start);
    assert.deepEqual(first, { turn_id: "turn_1", accepted: true });
    assert.deepEqual(again, { turn_id: "turn_1", accepted: true, duplicate: true });
    release.open();
    await until(() => h.platform.turn("ses_i")?.state === "completed", "turn_1 completes");
    const late = await executor.startTurn(start);
    assert.deepEqual(
      late,
      { turn_id: "turn_1", accepted: true, duplicate: true },
      "ended: still a repeat",
    );
    await executor.startTurn({ session_id: "ses_i", turn_id: "turn_2", input: [text("more")] });
    await until(() => h.platform.turnById("ses_i", "turn_2")?.state === "completed", "turn_2");
    assert.equal(opens, 1, "the conversation opened once");
    assert.deepEqual(runs, [{ turn: "turn_1", first: true }, { turn: "turn_2", first: false }]);
    const records = executor.sessions.get("ses_i")!.eventRecords;
    assert.deepEqual(
      records.map((r) => r.sequence),
      [1, 2, 3, 4, 5, 6],
      "one sequence per session",
    );
    assert.deepEqual(records.map((r) => r.turn_id), [
      "turn_1",
      "turn_1",
      "turn_1",
      "turn_2",
      "turn_2",
      "turn_2",
    ]);
  });

  it("refuses a second turn while one runs (-32013 turn_running) and sessions beyond max_sessions (-32009)", async () => {
    const h = await fx.harness();
    const release = gate();
    const { executor } = await fx.executor(h, {
      async runTurn() {
        await release.promise;
      },
    }, { serve: { maxSessions: 2 } });
    assert.deepEqual(executor.capabilities.agent, { max_sessions: 2 });
    await executor.startTurn({ session_id: "ses_1", turn_id: "t1", input: [text("a")] });
    const busy = await executor.startTurn({
      session_id: "ses_1",
      turn_id: "t2",
      input: [text("b")],
    })
      .then(() => undefined, (error) => error);
    assert.ok(busy instanceof ConflictError, `expected ConflictError, got ${busy}`);
    assert.deepEqual(busy.data, { reason: "turn_running", turn_id: "t1" });
    assert.equal(h.platform.turn("ses_1")?.turn_id, "t1", "the running turn stays current");
    assert.equal(h.platform.turnById("ses_1", "t2"), undefined, "the refused turn is not tracked");

    await executor.startTurn({ session_id: "ses_2", turn_id: "t1", input: [text("a")] });
    const full = await executor.startTurn({
      session_id: "ses_3",
      turn_id: "t1",
      input: [text("a")],
    })
      .then(() => undefined, (error) => error);
    assert.ok(full instanceof ResourceExhaustedError, `expected -32009, got ${full}`);
    assert.equal(full.reason, "max_sessions");
    assert.equal(executor.sessions.has("ses_3"), false, "no harness session left behind");
    release.open();
  });

  it("resumes the local conversation from executor_session_ref after an executor restart", async () => {
    const h = await fx.harness();
    const conversations = new Map<string, string[]>(); // what a brain would keep on disk
    const seen: { ref: string | undefined; first: boolean; history: string[] }[] = [];
    const handler: AgentHandler = {
      openTurn(turn) {
        const ref = turn.executorSessionRef ?? `conv_${conversations.size + 1}`;
        if (!conversations.has(ref)) conversations.set(ref, []);
        seen.push({
          ref: turn.executorSessionRef,
          first: turn.first,
          history: [...conversations.get(ref)!],
        });
        return { executorSessionRef: ref };
      },
      async runTurn(turn) {
        conversations.get(`conv_1`)!.push((turn.input[0] as { text: string }).text);
        await turn.emit({ type: "agent.message", content: [text("ok")] });
      },
    };
    const proxy = await fx.proxy(h.server.url);
    const a = await fx.executor(h, handler, { url: proxy.url, client: { machineId: "m_restart" } });
    const first = await a.executor.startTurn({
      session_id: "ses_r",
      turn_id: "t1",
      input: [text("one")],
    });
    assert.equal(first.executor_session_ref, "conv_1");
    await until(() => h.platform.turn("ses_r")?.state === "completed", "t1 completes");
    // The executor process dies: its connection goes, and it never comes back.
    await proxy.close();
    await a.client.stop();
    const b = await fx.executor(h, handler, { client: { machineId: "m_restart" } });
    assert.equal(b.executor, a.executor, "the same executor (exec_<machine_id>) registered again");
    await until(() => !b.executor.sessions.has("ses_r"), "the old session is lost");
    const ref = h.platform.executorSessionRef("ses_r");
    assert.equal(ref, "conv_1", "the harness keeps the ref to send back");
    const second = await b.executor.startTurn({
      session_id: "ses_r",
      turn_id: "t2",
      input: [text("two")],
      executor_session_ref: ref,
    });
    assert.equal(second.executor_session_ref, "conv_1");
    await until(() => h.platform.turnById("ses_r", "t2")?.state === "completed", "t2 completes");
    assert.deepEqual(seen, [
      { ref: undefined, first: true, history: [] },
      { ref: "conv_1", first: true, history: ["one"] },
    ]);
    const records = b.executor.sessions.get("ses_r")!.eventRecords;
    assert.deepEqual(
      records.map((r) => r.sequence),
      [1, 2, 3],
      "the new session's log starts at 1",
    );
  });

  it("delivers turn.input once per input_id and refuses input for a turn that is not running (-32013)", async () => {
    const h = await fx.harness();
    const inputs: TurnInput[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        for await (const input of turn.inputs) {
          inputs.push(input);
          if ((input.input[0] as { text: string }).text === "stop") break;
        }
        // Later inputs are still read after leaving a for-await early.
        await turn.emit({ type: "agent.message", content: [text(`${turn.takeInputs().length}`)] });
      },
    });
    await executor.startTurn({ session_id: "ses_in", turn_id: "t1", input: [text("start")] });
    const base = { session_id: "ses_in", turn_id: "t1" };
    assert.deepEqual(
      await executor.sendTurnInput({ ...base, input_id: "in_1", input: [text("a")] }),
      { ok: true },
    );
    assert.deepEqual(
      await executor.sendTurnInput({ ...base, input_id: "in_1", input: [text("a")] }),
      { ok: true, duplicate: true },
    );
    const wrong = await executor.sendTurnInput({ ...base, turn_id: "t9", input: [text("x")] })
      .then(() => undefined, (error) => error);
    assert.ok(wrong instanceof ConflictError, `expected -32013, got ${wrong}`);
    assert.deepEqual(wrong.data, { reason: "turn_not_running", turn_id: "t1" });
    await executor.sendTurnInput({ ...base, input: [text("stop")] });
    await until(() => h.platform.turn("ses_in")?.state === "completed", "the turn completes");
    assert.deepEqual(inputs.map((i) => (i.input[0] as { text: string }).text), ["a", "stop"]);
    assert.equal(inputs[0].input_id, "in_1");
    const after = await executor.sendTurnInput({ ...base, input: [text("late")] })
      .then(() => undefined, (error) => error);
    assert.ok(after instanceof ConflictError, "the ended turn takes no input");
    assert.deepEqual(after.data, { reason: "turn_not_running" });
  });

  it("tells the brain, before the idle event, of inputs acknowledged that the turn ended without reading", async () => {
    const h = await fx.harness();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        await gate; // never reads turn.inputs
        await turn.emit({ type: "agent.message", content: [text("done")] });
      },
    });
    await executor.startTurn({ session_id: "ses_unread", turn_id: "t1", input: [text("go")] });
    const base = { session_id: "ses_unread", turn_id: "t1" };
    for (const id of ["in_a", "in_b"]) {
      assert.deepEqual(
        await executor.sendTurnInput({ ...base, input_id: id, input: [text(id)] }),
        { ok: true },
      );
    }
    release();
    await until(() => h.platform.turn("ses_unread")?.state === "completed", "the turn completes");
    const records = executor.sessions.get("ses_unread")!.eventRecords;
    const types = records.map((r) => r.event.type);
    assert.deepEqual(types, [
      "session.status_running",
      "agent.message",
      "session.error",
      "session.status_idle",
    ]);
    const error = (records[2].event as unknown as { error: { code: string; message: string } })
      .error;
    assert.equal(error.code, "input_not_read");
    assert.match(error.message, /2 input\(s\): in_a, in_b$/);
  });

  it("cancels a turn: the loop stops, it ends idle with turn_outcome canceled, the session stays open", async () => {
    const h = await fx.harness();
    const stopped: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn: Turn) {
        if (turn.turnId === "t2") {
          await turn.emit({ type: "agent.message", content: [text("second")] });
          return;
        }
        await turn.emit({ type: "agent.thinking", thinking: "working" });
        await whenAborted(turn.signal);
        stopped.push(turn.signal.reason);
      },
    });
    await executor.startTurn({ session_id: "ses_c", turn_id: "t1", input: [text("go")] });
    const session = executor.sessions.get("ses_c")!;
    await until(() => session.eventRecords.length === 2, "the turn is working");
    assert.deepEqual(await executor.cancelTurn({ session_id: "ses_c", turn_id: "t9" }), {
      canceled: false,
    }, "another turn id cancels nothing");
    assert.deepEqual(await executor.cancelTurn({ session_id: "ses_c", reason: "user_stop" }), {
      canceled: true,
    });
    assert.equal(h.platform.turn("ses_c")?.state, "canceled", "canceled at once on the platform");
    await until(() => session.eventRecords.length === 3, "the idle event");
    assert.deepEqual(session.eventRecords[2].event, {
      type: "session.status_idle",
      turn_outcome: "canceled",
      stop_reason: "user_stop",
    });
    assert.equal(stopped.length, 1);
    assert.ok(
      stopped[0] instanceof TurnCanceledError,
      "the signal's reason is a TurnCanceledError",
    );
    assert.equal((stopped[0] as TurnCanceledError).reason, "user_stop");
    assert.deepEqual(await executor.cancelTurn({ session_id: "ses_c" }), { canceled: false });
    assert.equal(session.state, "ready", "the session stays open");
    await executor.startTurn({ session_id: "ses_c", turn_id: "t2", input: [text("again")] });
    await until(() => h.platform.turnById("ses_c", "t2")?.state === "completed", "t2 completes");
    assert.deepEqual(eventTypes(session.eventRecords).slice(3), [
      "session.status_running",
      "agent.message",
      "session.status_idle",
    ]);
  });

  it("closes a session: cancels the turn, delivers its events, releases, then session.ended; a new turn starts a new conversation", async () => {
    const h = await fx.harness();
    const log: string[] = [];
    const { client, executor } = await fx.executor(h, {
      openTurn(turn) {
        log.push(`open ${turn.turnId} first=${turn.first}`);
      },
      async runTurn(turn) {
        await turn.emit({ type: "agent.message", content: [text("started")] });
        if (turn.turnId === "t2") return;
        await whenAborted(turn.signal);
        log.push(`canceled ${(turn.signal.reason as TurnCanceledError).reason}`);
        // Emitting while the cancel is handled is still part of the turn.
        await turn.emit({ type: "agent.message", content: [text("cleanup")] });
      },
      closeSession(sessionId, info) {
        log.push(`close ${sessionId} ${info.reason}`);
      },
    });
    await executor.startTurn({ session_id: "ses_x", turn_id: "t1", input: [text("go")] });
    const session = executor.sessions.get("ses_x")!;
    await until(() => session.eventRecords.length === 2, "the turn is running");
    const closed = await executor.closeAgentSession("ses_x", { reason: "user_closed" });
    assert.deepEqual(closed, { closed: true });
    assert.equal(session.state, "ended", "resolved after session.ended");
    assert.deepEqual((await session.ended).reason, "user_closed");
    assert.deepEqual(eventTypes(session.eventRecords), [
      "session.status_running",
      "agent.message",
      "agent.message",
      "session.status_idle",
    ], "every event of the turn arrived before the end");
    assert.equal(
      (session.eventRecords[3].event as unknown as { turn_outcome: string }).turn_outcome,
      "canceled",
    );
    assert.deepEqual(log, [
      "open t1 first=true",
      "canceled session_closed",
      "close ses_x user_closed",
    ]);
    assert.equal(client.session("ses_x"), undefined, "the executor released it");
    assert.equal(h.platform.turn("ses_x")?.active, false, "the closed session's turn is over");

    assert.deepEqual(await executor.closeAgentSession("ses_unknown"), { closed: false });

    // The closed conversation's turn_id is a repeat: answered, never run again.
    assert.deepEqual(
      await executor.startTurn({ session_id: "ses_x", turn_id: "t1", input: [text("go")] }),
      { turn_id: "t1", accepted: true, duplicate: true },
    );
    assert.equal(client.session("ses_x"), undefined, "nothing was opened for the repeat");
    // A new turn_id starts a new conversation under the id (the harness has no store: it forgot
    // the closed session, whose events nothing can read any more).
    await executor.startTurn({ session_id: "ses_x", turn_id: "t3", input: [text("go")] });
    await until(() => executor.sessions.get("ses_x")?.eventRecords.length === 2, "running again");
    // A turn started while the close is still under way waits for it: a new conversation.
    const closing = executor.closeAgentSession("ses_x");
    await executor.startTurn({ session_id: "ses_x", turn_id: "t2", input: [text("again")] });
    assert.deepEqual(await closing, { closed: true });
    const fresh = executor.sessions.get("ses_x")!;
    assert.notEqual(fresh, session, "a new harness session");
    await until(() => h.platform.turn("ses_x")?.state === "completed", "t2 completes");
    assert.deepEqual(fresh.eventRecords.map((r) => r.sequence), [1, 2, 3], "a new conversation");
    assert.deepEqual(log.slice(3), [
      "open t3 first=true",
      "canceled session_closed",
      "close ses_x closed",
      "open t2 first=true",
    ]);
  });

  it("answers a repeat of a turn whose executor died mid-turn as a duplicate, never running it again; the ended session keeps its events, and a new turn under its id is refused (session_exists)", async () => {
    const h = await fx.harness({ harness: { store: new MemoryHarnessStore() } });
    const runs: string[] = [];
    const handler: AgentHandler = {
      async runTurn(turn) {
        runs.push(turn.turnId);
        for (const word of ["one", "two", "three"]) {
          await turn.emit({ type: "agent.message", content: [text(word)] });
        }
        await whenAborted(turn.signal); // it runs until its process dies
      },
    };
    const proxy = await fx.proxy(h.server.url);
    const a = await fx.executor(h, handler, { url: proxy.url, client: { machineId: "m_died" } });
    await a.executor.startTurn({ session_id: "ses_d", turn_id: "t1", input: [text("go")] });
    const session = a.executor.sessions.get("ses_d")!;
    await until(() => session.eventRecords.length === 4, "the turn is running");
    // The executor process dies mid-turn; a new process of the same machine registers.
    await proxy.close();
    await a.client.stop();
    const b = await fx.executor(h, handler, { client: { machineId: "m_died" } });
    assert.deepEqual(await session.ended, { reason: "lost" });
    assert.equal(h.platform.turnById("ses_d", "t1")?.state, "failed");

    assert.deepEqual(
      await b.executor.startTurn({ session_id: "ses_d", turn_id: "t1", input: [text("go")] }),
      { turn_id: "t1", accepted: true, duplicate: true },
      "idempotent by turn_id",
    );
    assert.deepEqual(runs, ["t1"], "the repeat did not run the turn again");
    assert.equal(b.client.session("ses_d"), undefined, "nor open the session on the new process");
    assert.equal(h.platform.turnById("ses_d", "t1")?.state, "failed", "the turn's record stays");

    const refused = await b.executor.startTurn({
      session_id: "ses_d",
      turn_id: "t2",
      input: [text("go")],
    }).then(() => undefined, (error) => error);
    assert.ok(refused instanceof SessionRefusedError, `expected session_exists, got ${refused}`);
    assert.equal(refused.reason, "session_exists");
    assert.deepEqual(runs, ["t1"]);
    // The ended session is readable as it was: its events, numbered as they came.
    const ended = h.harness.session("ses_d");
    assert.equal(ended?.state, "ended");
    const records = [];
    for await (const record of ended!.events()) records.push(record);
    assert.deepEqual(
      records.map((r) => [r.sequence, r.turn_id, r.event.type]),
      [
        [1, "t1", "session.status_running"],
        [2, "t1", "agent.message"],
        [3, "t1", "agent.message"],
        [4, "t1", "agent.message"],
      ],
    );
  });

  it("without a store, starts a new conversation under the id of a session lost with its executor; a repeat of the lost turn stays a duplicate and leaves the current turn", async () => {
    const h = await fx.harness();
    const runs: string[] = [];
    const handler: AgentHandler = {
      async runTurn(turn) {
        runs.push(turn.turnId);
        await turn.emit({ type: "agent.message", content: [text("working")] });
        await whenAborted(turn.signal);
      },
    };
    const proxy = await fx.proxy(h.server.url);
    const a = await fx.executor(h, handler, { url: proxy.url, client: { machineId: "m_gone" } });
    await a.executor.startTurn({ session_id: "ses_n", turn_id: "t1", input: [text("go")] });
    const lost = a.executor.sessions.get("ses_n")!;
    await until(() => lost.eventRecords.length === 2, "t1 is running");
    await proxy.close();
    await a.client.stop();
    const b = await fx.executor(h, handler, { client: { machineId: "m_gone" } });
    assert.deepEqual(await lost.ended, { reason: "lost" });

    // The harness forgot the lost session (no store): the id takes a new conversation.
    await b.executor.startTurn({ session_id: "ses_n", turn_id: "t2", input: [text("go")] });
    await until(() => b.executor.sessions.get("ses_n")?.eventRecords.length === 2, "t2 runs");
    assert.deepEqual(
      await b.executor.startTurn({ session_id: "ses_n", turn_id: "t1", input: [text("go")] }),
      { turn_id: "t1", accepted: true, duplicate: true },
    );
    assert.deepEqual(runs, ["t1", "t2"], "t1 did not run again");
    assert.equal(h.platform.turnById("ses_n", "t1")?.state, "failed");
    const current = h.platform.turn("ses_n");
    assert.equal(current?.turn_id, "t2", "the current turn is still the running one");
    assert.equal(current?.state, "running");
  });

  it("keeps a turn as its idle event says when the cancel reaches the executor after the turn ended (canceled: false)", async () => {
    const idle = gate();
    let idleArrived = false;
    const h = await fx.harness({
      platform: {
        // Holds the turn's idle event on the platform: the turn ended, the platform has not heard.
        async onEvent(record) {
          if (record.event.type !== "session.status_idle") return;
          idleArrived = true;
          await idle.promise;
        },
      },
    });
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        await turn.emit({ type: "agent.message", content: [text("done")] });
      },
    });
    await executor.startTurn({ session_id: "ses_cr", turn_id: "t1", input: [text("go")] });
    await until(() => idleArrived, "the turn ended on the executor");
    assert.equal(h.platform.turnById("ses_cr", "t1")?.state, "running");
    assert.deepEqual(
      await executor.cancelTurn({ session_id: "ses_cr", turn_id: "t1" }),
      { canceled: false },
    );
    assert.equal(
      h.platform.turnById("ses_cr", "t1")?.state,
      "running",
      "not canceled: the executor said so",
    );
    idle.open();
    await until(() => !h.platform.turnById("ses_cr", "t1")!.active, "the idle event arrived");
    assert.equal(
      h.platform.turnById("ses_cr", "t1")?.state,
      "completed",
      "as the executor ended it",
    );
  });

  it("leaves the current turn where it is when a repeat names a turn that ended while another runs", async () => {
    const h = await fx.harness();
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        await turn.emit({ type: "agent.message", content: [text(turn.turnId)] });
        if (turn.turnId === "t2") await whenAborted(turn.signal);
      },
    });
    await executor.startTurn({ session_id: "ses_cur", turn_id: "t1", input: [text("go")] });
    await until(() => h.platform.turn("ses_cur")?.state === "completed", "t1 completes");
    await executor.startTurn({ session_id: "ses_cur", turn_id: "t2", input: [text("go")] });
    assert.deepEqual(
      await executor.startTurn({ session_id: "ses_cur", turn_id: "t1", input: [text("go")] }),
      { turn_id: "t1", accepted: true, duplicate: true },
    );
    const current = h.platform.turn("ses_cur");
    assert.equal(current?.turn_id, "t2", "the latest started turn");
    assert.equal(current?.state, "running");
    assert.equal(h.platform.turnById("ses_cur", "t1")?.state, "completed");
  });
});
