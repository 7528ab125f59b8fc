/**
 * Interactions over a real WebSocket: `interaction.request` idempotent by `interaction_id`; an
 * `appr_` + 24 hex id is adopted as the platform id and names the same interaction after an
 * executor restart; a conflicting reuse is -32013 and leaves the interaction unchanged; other
 * ids get `int_…`; the executor keeps local authority (`expires_at` is a local deny, local
 * answers withdraw the request); `interaction.response` is resent until answered and the first
 * answer wins, and an answer is recorded as the executor took it; `interaction.cancel` is
 * idempotent; a canceled turn withdraws its interactions, and the platform withdraws those of a
 * session that ended (a lease that expired).
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  APPROVAL_ID_PATTERN,
  approvalId,
  ConflictError,
  ForbiddenError,
  type InteractionAnswer,
  type InteractionChange,
  InteractionMismatchError,
  ManualClock,
  type Turn,
  TurnCanceledError,
  TurnInactiveError,
} from "../../mod.ts";
import { AgentFixtures, text, until } from "../helpers/agent-fixture.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

/** Emits a bash tool use awaiting approval and asks for it under a deterministic approval id. */
async function askToRun(turn: Turn, command: string): Promise<InteractionAnswer> {
  const toolUseId = turn.eventId();
  await turn.emit({
    type: "agent.tool_use",
    name: "bash",
    input: { command },
    evaluated_permission: "ask",
  }, { eventId: toolUseId });
  return await turn.requestInteraction({
    kind: "permission",
    interaction_id: await approvalId(turn.sessionId, "bash", command),
    tool_use_id: toolUseId,
    title: `Run ${command}?`,
  });
}

describe("agent interactions", { timeout: 30_000 }, () => {
  const fx = new AgentFixtures();
  afterEach(() => fx.cleanup());

  it("an answer accepted while the turn is canceled reaches the turn: accepted everywhere, not withdrawn", async () => {
    const h = await fx.harness();
    const seen = new Map<string, string>();
    const asked = new Map<string, () => void>();
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        const answer = askToRun(turn, "rm");
        asked.get(turn.sessionId)?.();
        try {
          seen.set(turn.sessionId, `answer:${(await answer).outcome}`);
        } catch (error) {
          seen.set(turn.sessionId, `rejected:${(error as Error).name}`);
        }
      },
    });
    for (let i = 0; i < 5; i++) {
      const session = `ses_race_${i}`;
      const ready = new Promise<void>((resolve) => asked.set(session, resolve));
      await executor.startTurn({ session_id: session, turn_id: "t", input: [text("go")] });
      await ready;
      const id = await approvalId(session, "bash", "rm");
      await h.platform.waitInteraction({ filter: (x) => x.id === id });
      const [response, cancel] = await Promise.all([
        executor.respondInteraction({
          session_id: session,
          interaction_id: id,
          outcome: "approved",
        }),
        executor.cancelTurn({ session_id: session, turn_id: "t" }),
      ]);
      assert.equal(response.accepted, true);
      assert.equal(cancel.canceled, true);
      await until(() => seen.has(session));
      // Before, the turn's request rejected TurnCanceledError and the card was withdrawn.
      assert.equal(seen.get(session), "answer:approved", session);
      const record = h.platform.interaction(id);
      assert.equal(record?.status, "resolved", session);
      assert.equal(record?.outcome, "approved", session);
      await executor.closeAgentSession(session);
    }
  });

  it("adopts an approval id as the platform id; repeats name the same interaction; the first answer wins", async () => {
    const h = await fx.harness();
    const changes: InteractionChange[] = [];
    h.platform.onInteraction((change) => changes.push(change));
    const answers: InteractionAnswer[] = [];
    const refusals: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        const asked = askToRun(turn, "ls");
        await h.platform.waitInteraction();
        const { tool_use_id } = h.platform.interactions[0];
        const interaction_id = await approvalId(turn.sessionId, "bash", "ls");
        // The brain asks again (a retry): the same interaction; for another tool use: refused.
        const again = turn.requestInteraction({ kind: "permission", interaction_id, tool_use_id });
        refusals.push(
          await turn.requestInteraction({
            kind: "permission",
            interaction_id,
            tool_use_id: "toolu_other",
          }).catch((e) => e),
        );
        answers.push(await asked, await again);
      },
    });
    await executor.startTurn({ session_id: "ses_ap", turn_id: "t1", input: [text("go")] });
    const opened = await h.platform.waitInteraction();
    await until(() => refusals.length === 1, "the brain asked again");
    const id = await approvalId("ses_ap", "bash", "ls");
    assert.match(id, APPROVAL_ID_PATTERN);
    assert.equal(opened.id, id, "the approval id is the platform id");
    assert.equal(opened.interaction_id, id);
    assert.equal(opened.kind, "permission");
    assert.equal(opened.title, "Run ls?");
    assert.equal(opened.status, "open");
    const toolUse = executor.sessions.get("ses_ap")!.eventRecords.find((r) =>
      r.event.type === "agent.tool_use"
    );
    assert.equal(opened.tool_use_id, toolUse?.event_id, "it references the agent.tool_use event");
    assert.equal(h.platform.respond(id, { outcome: "approved", answer: "allow_once" }), true);
    assert.equal(h.platform.respond(id, { outcome: "denied" }), false, "the first answer wins");
    await until(() => answers.length === 2, "the turn got its answer");
    assert.ok(refusals[0] instanceof InteractionMismatchError, `got ${refusals[0]}`);
    // The second request of the same id was the same interaction: one card, one answer.
    assert.deepEqual(answers[0], answers[1]);
    assert.deepEqual(answers[0], {
      interaction_id: id,
      platform_interaction_id: id,
      outcome: "approved",
      answer: "allow_once",
      local: false,
    });
    assert.equal(h.platform.interactions.length, 1);
    assert.deepEqual(changes.map((c) => c.type), ["opened", "settled"]);
    assert.deepEqual(
      await executor.respondInteraction({
        session_id: "ses_ap",
        interaction_id: id,
        outcome: "denied",
      }),
      { accepted: false },
      "a repeat answer is refused",
    );
    assert.deepEqual(
      await executor.respondInteraction({
        session_id: "ses_ap",
        interaction_id: "ix_unknown",
        outcome: "approved",
      }),
      { accepted: false },
      "an unknown interaction is refused",
    );
  });

  it("names the same interaction when an approval id is repeated after an executor restart", async () => {
    const h = await fx.harness();
    const changes: InteractionChange[] = [];
    h.platform.onInteraction((change) => changes.push(change));
    const answers: { executor: string; answer: InteractionAnswer }[] = [];
    const handler = (label: string) => ({
      async runTurn(turn: Turn) {
        answers.push({ executor: label, answer: await askToRun(turn, "make deploy") });
      },
    });
    const proxy = await fx.proxy(h.server.url);
    const a = await fx.executor(h, handler("a"), { url: proxy.url, client: { machineId: "m_1" } });
    await a.executor.startTurn({ session_id: "ses_rs", turn_id: "t1", input: [text("deploy")] });
    const first = await h.platform.waitInteraction();
    // The executor process dies before the user answers; a new process takes over.
    await proxy.close();
    await a.client.stop();
    const b = await fx.executor(h, handler("b"), { client: { machineId: "m_1" } });
    await until(() => !b.executor.sessions.has("ses_rs"), "the old session is lost");
    // Withdrawn with it: no turn waits for the answer now.
    assert.equal(h.platform.interaction(first.id)?.status, "canceled");
    assert.equal(h.platform.interaction(first.id)?.cancel_reason, "session_ended");
    await b.executor.startTurn({ session_id: "ses_rs", turn_id: "t2", input: [text("deploy")] });
    await until(() => changes.some((c) => c.type === "repeated"), "the repeat arrived");
    const again = h.platform.interaction(first.id)!;
    assert.equal(h.platform.interactions.length, 1, "never a second interaction");
    assert.equal(again.status, "open", "asked again by a live turn: open again");
    assert.equal(again.cancel_reason, undefined);
    assert.equal(again.requests, 2);
    assert.equal(again.turn_id, "t2", "routed to the new turn");
    assert.notEqual(again.tool_use_id, first.tool_use_id, "the new process's tool use");
    assert.equal(h.platform.respond(first.id, { outcome: "approved" }), true);
    await until(() => answers.length === 1, "the restarted executor got the answer");
    assert.equal(answers[0].executor, "b");
    assert.equal(answers[0].answer.platform_interaction_id, first.id);
    assert.equal(answers[0].answer.outcome, "approved");

    // Answered, and the executor restarts once more: the repeat gets the stored answer again.
    const c = await fx.executor(h, handler("c"), { client: { machineId: "m_1" } });
    await until(() => !c.executor.sessions.has("ses_rs"), "the session is lost again");
    await c.executor.startTurn({ session_id: "ses_rs", turn_id: "t3", input: [text("deploy")] });
    await until(() => answers.length === 2, "the third process got the stored answer");
    assert.deepEqual(answers[1], {
      executor: "c",
      answer: {
        interaction_id: first.id,
        platform_interaction_id: first.id,
        outcome: "approved",
        local: false,
      },
    });
    assert.equal(h.platform.interactions.length, 1);
    assert.deepEqual(changes.map((ch) => ch.type), [
      "opened",
      "canceled", // its session was lost with the first process
      "repeated",
      "settled",
      "repeated",
    ]);
  });

  it("refuses an approval id reused for another tool use or kind (-32013); the interaction stays unchanged", async () => {
    const h = await fx.harness();
    const raw = await ExecutorPeer.dial(h.server.url);
    fx.defer(() => void raw.close());
    raw.peer.onRequest("turn.start", ({ turn_id }) => ({ turn_id, accepted: true }));
    await raw.start(registerParams({ capabilities: { agent: {} } }));
    const executor = await h.harness.waitExecutor();
    await executor.startTurn({ session_id: "ses_m", turn_id: "t1", input: [text("go")] });
    const id = await approvalId("ses_m", "x");
    const request = {
      session_id: "ses_m",
      turn_id: "t1",
      interaction_id: id,
      kind: "permission" as const,
      tool_use_id: "toolu_1",
    };
    assert.deepEqual(await raw.peer.call("interaction.request", request), {
      interaction_id: id,
      platform_interaction_id: id,
      status: "open",
    });
    for (const conflicting of [{ tool_use_id: "toolu_2" }, { kind: "question" as const }]) {
      const refused = await raw.peer.call("interaction.request", { ...request, ...conflicting })
        .then(() => undefined, (e) => e);
      assert.ok(
        refused instanceof ConflictError,
        `expected -32013 for ${JSON.stringify(conflicting)}`,
      );
      assert.equal(refused.reason, "interaction_mismatch");
    }
    const stored = h.platform.interaction(id)!;
    assert.equal(stored.tool_use_id, "toolu_1", "unchanged");
    assert.equal(stored.kind, "permission", "unchanged");
    assert.equal(stored.requests, 1, "the refusals did not count");
    assert.deepEqual(await raw.peer.call("interaction.request", request), {
      interaction_id: id,
      platform_interaction_id: id,
      status: "open",
    }, "the same request is a repeat");

    // Any other id is only the executor's key: the platform assigns int_…, stable on repeats.
    const own = { ...request, interaction_id: "my-question-1", kind: "question" as const };
    const assigned = await raw.peer.call("interaction.request", own);
    assert.match(assigned.platform_interaction_id, /^int_[0-9a-f]{24}$/);
    assert.equal(assigned.interaction_id, "my-question-1");
    assert.deepEqual(await raw.peer.call("interaction.request", own), assigned);

    // interaction.cancel is idempotent: a repeat, or an unknown id, is acknowledged as one.
    const cancel = {
      session_id: "ses_m",
      interaction_id: "my-question-1",
      reason: "resolved_locally",
    };
    assert.deepEqual(await raw.peer.call("interaction.cancel", cancel), { ok: true });
    assert.deepEqual(await raw.peer.call("interaction.cancel", cancel), {
      ok: true,
      duplicate: true,
    });
    assert.deepEqual(
      await raw.peer.call("interaction.cancel", { ...cancel, interaction_id: "nope" }),
      { ok: true, duplicate: true },
    );
    assert.equal(h.platform.interaction(assigned.platform_interaction_id)?.status, "canceled");
    assert.equal(
      h.platform.interaction(assigned.platform_interaction_id)?.cancel_reason,
      "resolved_locally",
    );

    // Only for an active turn of a session routed to this executor.
    const unknown = await raw.peer.call("interaction.request", {
      ...request,
      session_id: "ses_other",
    })
      .then(() => undefined, (e) => e);
    assert.ok(unknown instanceof ForbiddenError, `expected -32001, got ${unknown}`);
    await raw.peer.call("session.event", {
      session_id: "ses_m",
      turn_id: "t1",
      event_id: "ev_idle",
      sequence: 1,
      event: { type: "session.status_idle", turn_outcome: "completed" },
    });
    const inactive = await raw.peer.call("interaction.request", {
      ...request,
      interaction_id: "late",
    })
      .then(() => undefined, (e) => e);
    assert.ok(inactive instanceof TurnInactiveError, `expected -32007, got ${inactive}`);
  });

  it("forgets the oldest settled interactions beyond its limit, never an open one", async () => {
    const h = await fx.harness({ platform: { remember: 2 } });
    const raw = await ExecutorPeer.dial(h.server.url);
    fx.defer(() => void raw.close());
    raw.peer.onRequest("turn.start", ({ turn_id }) => ({ turn_id, accepted: true }));
    raw.peer.onRequest("interaction.response", () => ({ accepted: true }));
    await raw.start(registerParams({ capabilities: { agent: {} } }));
    const executor = await h.harness.waitExecutor();
    await executor.startTurn({ session_id: "ses_f", turn_id: "t1", input: [text("go")] });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const result = await raw.peer.call("interaction.request", {
        session_id: "ses_f",
        turn_id: "t1",
        interaction_id: `q${i}`,
        kind: "question",
      });
      ids.push(result.platform_interaction_id);
    }
    for (const id of ids.slice(0, 3)) h.platform.respond(id, { outcome: "answered", answer: "x" });
    assert.deepEqual(h.platform.interactions.map((i) => i.interaction_id), ["q1", "q2", "q3"]);
    assert.equal(h.platform.interaction(ids[3])?.status, "open", "open ones are kept");
  });

  it("surfaces a conflicting reuse to the brain as ConflictError", async () => {
    const h = await fx.harness();
    const id = await approvalId("shared");
    const outcomes: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        const kind = turn.sessionId === "ses_k1" ? "permission" : "question";
        outcomes.push(await turn.requestInteraction({ kind, interaction_id: id }).catch((e) => e));
      },
    });
    await executor.startTurn({ session_id: "ses_k1", turn_id: "t1", input: [text("a")] });
    await h.platform.waitInteraction();
    await executor.startTurn({ session_id: "ses_k2", turn_id: "t1", input: [text("b")] });
    await until(() => outcomes.length === 1, "the second turn was refused");
    const conflict = outcomes[0];
    assert.ok(conflict instanceof ConflictError, `expected ConflictError, got ${conflict}`);
    assert.equal(conflict.reason, "interaction_mismatch");
    assert.equal(h.platform.interaction(id)?.session_id, "ses_k1", "unchanged");
  });

  it("treats expires_at as a local deny and withdraws the request (ManualClock)", async () => {
    const h = await fx.harness();
    const clock = new ManualClock(Date.now());
    const answers: InteractionAnswer[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        answers.push(
          await turn.requestInteraction({
            kind: "question",
            prompt: "Proceed?",
            expires_at: new Date(clock.now() + 60_000),
          }),
        );
      },
    }, { client: { clock } });
    await executor.startTurn({ session_id: "ses_exp", turn_id: "t1", input: [text("go")] });
    const opened = await h.platform.waitInteraction();
    await clock.advance(59_999);
    assert.equal(answers.length, 0, "not before expires_at");
    await clock.advance(1);
    await until(() => answers.length === 1, "the local deny");
    assert.equal(answers[0].outcome, "expired");
    assert.equal(answers[0].local, true);
    await until(() => h.platform.interaction(opened.id)?.status === "canceled", "withdrawn");
    assert.equal(h.platform.interaction(opened.id)?.cancel_reason, "expired");
    assert.equal(h.platform.respond(opened.id, { outcome: "approved" }), false);
    assert.deepEqual(
      await executor.respondInteraction({
        session_id: "ses_exp",
        interaction_id: opened.interaction_id,
        outcome: "approved",
      }),
      { accepted: false },
      "the executor denied already",
    );
  });

  it("keeps local authority: a local answer settles the request and withdraws it", async () => {
    const h = await fx.harness();
    const answers: InteractionAnswer[] = [];
    const resolved: boolean[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        const asked = turn.requestInteraction({ kind: "question", interaction_id: "q-local" });
        await h.platform.waitInteraction();
        resolved.push(turn.resolveInteraction("q-local", { outcome: "answered", answer: "yes" }));
        answers.push(await asked);
        resolved.push(turn.resolveInteraction("q-local", { outcome: "denied" }));
      },
    });
    await executor.startTurn({ session_id: "ses_loc", turn_id: "t1", input: [text("go")] });
    await until(() => answers.length === 1, "answered locally");
    assert.deepEqual(resolved, [true, false], "settled once");
    const { platform_interaction_id: _, ...answer } = answers[0];
    assert.deepEqual(answer, {
      interaction_id: "q-local",
      outcome: "answered",
      answer: "yes",
      local: true,
    });
    await until(() => h.platform.interactions[0].status === "canceled", "withdrawn");
    assert.equal(h.platform.interactions[0].cancel_reason, "resolved_locally");
  });

  it("resends interaction.response until the executor answers, across a reconnect", async () => {
    const h = await fx.harness();
    const clock = new ManualClock(Date.now());
    const proxy = await fx.proxy(h.server.url);
    const answers: InteractionAnswer[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        answers.push(await turn.requestInteraction({ kind: "question", interaction_id: "q-1" }));
      },
    }, {
      url: proxy.url,
      // The reconnect waits for the test's clock: the answer is sent while the executor is away.
      client: { clock, reconnect: { initialDelayMs: 1_000, maxDelayMs: 1_000, jitter: 0 } },
    });
    await executor.startTurn({ session_id: "ses_rr", turn_id: "t1", input: [text("go")] });
    await h.platform.waitInteraction();
    const gone = new Promise((resolve) =>
      h.harness.onExecutor((e) => e.type === "disconnected" && resolve(e))
    );
    proxy.cut();
    await gone;
    const responded = executor.respondInteraction({
      session_id: "ses_rr",
      interaction_id: "q-1",
      outcome: "answered",
      answer: "blue",
    });
    let settled = false;
    responded.then(() => (settled = true), () => (settled = true));
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(settled, false, "waiting for the executor to come back");
    await clock.advance(1_000);
    assert.deepEqual(await responded, { accepted: true });
    await until(() => answers.length === 1, "the answer arrived");
    assert.equal(answers[0].answer, "blue");
    assert.equal(h.platform.interactions[0].status, "resolved", "the platform recorded it");
  });

  it("withdraws open interactions with turn_canceled when the turn is canceled", async () => {
    const h = await fx.harness();
    const outcomes: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        outcomes.push(await askToRun(turn, "rm -rf build").catch((e) => e));
      },
    });
    await executor.startTurn({ session_id: "ses_wc", turn_id: "t1", input: [text("go")] });
    const opened = await h.platform.waitInteraction();
    await executor.cancelTurn({ session_id: "ses_wc" });
    await until(() => h.platform.interaction(opened.id)?.status === "canceled", "withdrawn");
    assert.equal(h.platform.interaction(opened.id)?.cancel_reason, "turn_canceled");
    await until(() => outcomes.length === 1, "the wait ended");
    assert.ok(
      outcomes[0] instanceof TurnCanceledError,
      `expected TurnCanceledError, got ${outcomes[0]}`,
    );
    await until(() => h.platform.turn("ses_wc")?.state === "canceled", "the turn ended");
  });

  it("withdraws the open interactions of a session that ended with its executor's lease: an answer is refused (ManualClock)", async () => {
    const clock = new ManualClock();
    const h = await fx.harness({ harness: { clock, heartbeatIntervalMs: 1_000 } });
    const changes: InteractionChange[] = [];
    h.platform.onInteraction((change) => changes.push(change));
    const proxy = await fx.proxy(h.server.url);
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        await askToRun(turn, "make deploy");
      },
    }, { url: proxy.url });
    await executor.startTurn({ session_id: "ses_le", turn_id: "t1", input: [text("deploy")] });
    const card = await h.platform.waitInteraction();
    const session = executor.sessions.get("ses_le")!;
    // The executor's link dies and it never comes back: its lease runs out.
    await proxy.close();
    await until(() => !executor.connected, "the harness saw the link drop");
    await clock.advance(2_000);
    assert.deepEqual(await session.ended, { reason: "lease_expired" });
    assert.equal(h.platform.turnById("ses_le", "t1")?.state, "failed");
    // Withdrawn as the session ended, like its turn.
    const withdrawn = h.platform.interaction(card.id)!;
    assert.equal(withdrawn.status, "canceled");
    assert.equal(withdrawn.outcome, "canceled");
    assert.equal(withdrawn.cancel_reason, "session_ended");
    assert.equal(
      h.platform.respond(card.id, { outcome: "approved" }),
      false,
      "nothing would run what is approved",
    );
    assert.equal(h.platform.interaction(card.id)?.status, "canceled");
    assert.deepEqual(h.platform.interactions.filter((i) => i.status === "open"), []);
    assert.deepEqual(changes.map((c) => c.type), ["opened", "canceled"]);
  });

  it("records an answer sent through the executor handle as the executor took it: refused after a cancel withdrew the interaction, it is not recorded as the answer", async () => {
    const h = await fx.harness();
    const outcomes: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        outcomes.push(
          await turn.requestInteraction({
            kind: "question",
            interaction_id: `q_${turn.turnId}`,
            prompt: "Which one?",
          }).catch((e) => e),
        );
      },
    });
    const question = (turnId: string) => ({
      filter: (i: { turn_id: string }) => i.turn_id === turnId,
    });
    await executor.startTurn({ session_id: "ses_ra", turn_id: "t1", input: [text("go")] });
    const first = await h.platform.waitInteraction(question("t1"));
    assert.deepEqual(
      await executor.respondInteraction({
        session_id: "ses_ra",
        interaction_id: "q_t1",
        outcome: "answered",
        answer: "this one",
      }),
      { accepted: true },
    );
    assert.equal(h.platform.interaction(first.id)?.status, "resolved", "taken: recorded");
    assert.equal(h.platform.interaction(first.id)?.answer, "this one");
    await until(() => h.platform.turnById("ses_ra", "t1")?.state === "completed", "t1 ends");

    await executor.startTurn({ session_id: "ses_ra", turn_id: "t2", input: [text("go")] });
    const second = await h.platform.waitInteraction(question("t2"));
    // The cancel reaches the executor first: it withdraws the question, then refuses the answer.
    const canceled = executor.cancelTurn({ session_id: "ses_ra", turn_id: "t2" });
    const late = executor.respondInteraction({
      session_id: "ses_ra",
      interaction_id: "q_t2",
      outcome: "answered",
      answer: "late",
    });
    assert.deepEqual(await canceled, { canceled: true });
    assert.deepEqual(await late, { accepted: false });
    // The executor withdrew the question before its turn's idle event.
    const session = executor.sessions.get("ses_ra")!;
    await until(
      () =>
        session.eventRecords.some((r) =>
          r.turn_id === "t2" && r.event.type === "session.status_idle"
        ),
      "t2 ended",
    );
    const card = h.platform.interaction(second.id)!;
    assert.equal(card.status, "canceled", "withdrawn, as the executor did");
    assert.equal(card.cancel_reason, "turn_canceled");
    assert.equal(card.answer, undefined, "the refused answer is not the card's");
    await until(() => outcomes.length === 2, "t2's wait ended");
    assert.ok(outcomes[1] instanceof TurnCanceledError, `got ${outcomes[1]}`);
  });
});
