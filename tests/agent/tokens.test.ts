/**
 * Model and tools tokens over a real WebSocket, on the injected clock: the brain refreshes when
 * less than 10 minutes remain; the platform signs only for an active turn routed to the asking
 * executor (tools tokens: from the turn's current epoch); refusals carry `data.reason`
 * (`turn_inactive` -32007, `forbidden` -32001, `*_unavailable` -32012); a harness without the
 * method answers -32601 and the executor keeps its token. Tokens never reach a log.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type AgentTurnInfo,
  CapabilityMissingError,
  ForbiddenError,
  InternalError,
  ManualClock,
  type ModelCredential,
  serveAgent,
  TokenUnavailableError,
  type ToolsCredential,
  type Turn,
  TurnInactiveError,
} from "../../mod.ts";
import { AgentFixtures, text, until } from "../helpers/agent-fixture.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

const MINUTE = 60_000;

/** A brain that fetches its tokens whenever the test sends input "model" or "tools". */
function tokenBrain(got: (ModelCredential | ToolsCredential | Error)[], turns: Turn[] = []) {
  return {
    async runTurn(turn: Turn) {
      turns.push(turn);
      for await (const input of turn.inputs) {
        const what = (input.input[0] as { text: string }).text;
        if (what === "done") return;
        try {
          got.push(what === "model" ? await turn.modelToken() : await turn.toolsToken());
        } catch (error) {
          got.push(error as Error);
        }
      }
    },
  };
}

describe("agent tokens", { timeout: 30_000 }, () => {
  const fx = new AgentFixtures();
  afterEach(() => fx.cleanup());

  it("refreshes the model token when less than 10 minutes remain, and never logs it", async () => {
    const clock = new ManualClock(Date.now());
    const issued: AgentTurnInfo[] = [];
    const h = await fx.harness({
      platform: {
        modelTokens: (turn) => {
          issued.push(turn);
          return {
            model_token: `mt_fresh_${issued.length}_SECRET`,
            expires_at: clock.now() + 60 * MINUTE,
            model_base_url: "https://models.example/v2",
          };
        },
      },
    });
    const got: (ModelCredential | Error)[] = [];
    const { executor, logger } = await fx.executor(h, tokenBrain(got), { client: { clock } });
    const expiresAt = clock.now() + 60 * MINUTE;
    await executor.startTurn({
      session_id: "ses_tok",
      turn_id: "t1",
      input: [text("go")],
      metadata: {
        model_token: "mt_initial_SECRET",
        model_token_expires_at: new Date(expiresAt).toISOString(),
        model_base_url: "https://models.example/v1",
      },
    });
    const ask = (what: string) =>
      executor.sendTurnInput({ session_id: "ses_tok", turn_id: "t1", input: [text(what)] });
    await ask("model");
    await until(() => got.length === 1, "first token");
    assert.deepEqual(got[0], {
      token: "mt_initial_SECRET",
      expiresAt,
      baseUrl: "https://models.example/v1",
    });
    await clock.advance(49 * MINUTE);
    await ask("model");
    await until(() => got.length === 2, "still fresh");
    assert.equal((got[1] as ModelCredential).token, "mt_initial_SECRET", "11 minutes left: kept");
    assert.equal(issued.length, 0);
    await clock.advance(2 * MINUTE);
    await ask("model");
    await ask("model");
    await until(() => got.length === 4, "refreshed");
    assert.deepEqual(got[2], {
      token: "mt_fresh_1_SECRET",
      expiresAt: clock.now() + 60 * MINUTE,
      baseUrl: "https://models.example/v2",
    });
    assert.equal((got[3] as ModelCredential).token, "mt_fresh_1_SECRET", "fresh again: kept");
    assert.equal(issued.length, 1, "one refresh");
    assert.deepEqual(issued[0], {
      session_id: "ses_tok",
      turn_id: "t1",
      executor_id: executor.id,
      state: "running",
      epoch: 0,
      active: true,
    });
    for (const text of [logger.text(), h.logger.text()]) {
      assert.equal(text.includes("SECRET"), false, "no token in any log");
    }
  });

  it("signs tokens only for an active turn routed to the executor, tools tokens only for the current epoch", async () => {
    const h = await fx.harness({
      platform: {
        modelTokens: (turn) => {
          if (turn.session_id === "ses_denied") {
            throw new ForbiddenError("not entitled", { reason: "forbidden" });
          }
          return { model_token: "mt_x", expires_at: new Date(Date.now() + 3_600_000) };
        },
        toolsTokens: (turn) => ({
          tools_mcp_token: `tt_epoch_${turn.epoch}`,
          expires_at: "2030-01-01T00:00:00.000Z",
        }),
      },
    });
    const raw = await ExecutorPeer.dial(h.server.url);
    fx.defer(() => void raw.close());
    // A turn the executor does not run (accepted false) is never active.
    raw.peer.onRequest("turn.start", ({ turn_id }) => ({
      turn_id,
      accepted: turn_id !== "t_refused",
    }));
    raw.peer.onRequest("turn.cancel", () => ({ canceled: true }));
    await raw.start(registerParams({ capabilities: { agent: {} } }));
    const executor = await h.harness.waitExecutor();
    const start = (session_id: string, turn_id: string, epoch: number) =>
      executor.startTurn({ session_id, turn_id, input: [text("go")], metadata: { epoch } });
    await start("ses_t", "t1", 3);
    const model = (session_id: string, turn_id: string) =>
      raw.peer.call("model_token.refresh", { session_id, turn_id }).then((r) => r, (e) => e);
    const tools = (epoch: number) =>
      raw.peer.call("tools_token.refresh", { session_id: "ses_t", turn_id: "t1", epoch })
        .then((r) => r, (e) => e);
    assert.equal((await model("ses_t", "t1")).model_token, "mt_x");
    assert.deepEqual(await tools(3), {
      tools_mcp_token: "tt_epoch_3",
      expires_at: "2030-01-01T00:00:00.000Z",
    });
    // The same turn started again in a newer epoch: the old epoch gets nothing more.
    await start("ses_t", "t1", 4);
    const old = await tools(3);
    assert.ok(old instanceof TurnInactiveError, `expected -32007, got ${old}`);
    assert.deepEqual(old.data, { reason: "turn_inactive" });
    assert.equal((await tools(4)).tools_mcp_token, "tt_epoch_4");

    for (const [session, turn] of [["ses_t", "t_unknown"], ["ses_nowhere", "t1"]]) {
      const refused = await model(session, turn);
      assert.ok(refused instanceof ForbiddenError, `expected -32001 for ${session}/${turn}`);
      assert.equal(refused.reason, "forbidden");
    }
    const notRun = await start("ses_t", "t_refused", 4);
    assert.equal(notRun.accepted, false);
    assert.equal(h.platform.turn("ses_t")?.turn_id, "t1", "the running turn is still t1");
    assert.equal(h.platform.turnById("ses_t", "t_refused"), undefined, "not tracked");
    const refusedTurn = await model("ses_t", "t_refused");
    assert.ok(refusedTurn instanceof ForbiddenError, `expected -32001, got ${refusedTurn}`);
    await start("ses_denied", "t1", 0);
    const denied = await model("ses_denied", "t1");
    assert.ok(denied instanceof ForbiddenError, "the issuer's refusal is passed on");

    // Another executor may not take tokens for this executor's turn.
    const other = await ExecutorPeer.dial(h.server.url);
    fx.defer(() => void other.close());
    await other.start(
      registerParams({
        capabilities: { agent: {} },
        executor: { name: "other", os: "linux", arch: "amd64", version: "1" },
      }),
    );
    const stolen = await other.peer.call("model_token.refresh", {
      session_id: "ses_t",
      turn_id: "t1",
    })
      .then((r) => r, (e) => e);
    assert.ok(stolen instanceof ForbiddenError, `expected -32001, got ${stolen}`);

    // A canceled turn gets no further tokens.
    await executor.cancelTurn({ session_id: "ses_t" });
    const canceled = await model("ses_t", "t1");
    assert.ok(canceled instanceof TurnInactiveError, `expected -32007, got ${canceled}`);
    assert.equal(canceled.reason, "turn_inactive");
  });

  it("passes the harness's refusals to the brain as typed errors", async () => {
    const clock = new ManualClock(Date.now());
    const h = await fx.harness(); // no token issuers
    const got: (ModelCredential | ToolsCredential | Error)[] = [];
    const turns: Turn[] = [];
    const { executor } = await fx.executor(h, tokenBrain(got, turns), { client: { clock } });
    const soon = new Date(clock.now() + 5 * MINUTE).toISOString();
    await executor.startTurn({
      session_id: "ses_e",
      turn_id: "t1",
      input: [text("go")],
      metadata: {
        model_token: "mt_old",
        model_token_expires_at: soon,
        tools_mcp_token: "tt_old",
        tools_mcp_token_expires_at: soon,
      },
    });
    const ask = (what: string) =>
      executor.sendTurnInput({ session_id: "ses_e", turn_id: "t1", input: [text(what)] });
    await ask("model");
    await ask("tools");
    await until(() => got.length === 2, "both answered");
    assert.ok(got[0] instanceof CapabilityMissingError, `expected -32012, got ${got[0]}`);
    assert.deepEqual(got[0].data, { reason: "model_token_unavailable", capability: "agent" });
    assert.ok(got[1] instanceof CapabilityMissingError, `expected -32012, got ${got[1]}`);
    assert.equal(got[1].reason, "tools_token_unavailable");
    await ask("done");
    await until(() => h.platform.turn("ses_e")?.state === "completed", "the turn ended");
    // A brain that keeps the turn past its end gets turn_inactive.
    const late = await turns[0].modelToken().then((r) => r, (e) => e);
    assert.ok(late instanceof TurnInactiveError, `expected -32007, got ${late}`);
  });

  it("keeps its token when the harness does not serve the refresh (-32601)", async () => {
    const clock = new ManualClock(Date.now());
    const scripted = await ScriptedHarness.start({ heartbeatIntervalMs: 3_600_000 });
    fx.defer(() => scripted.close());
    const got: (ModelCredential | Error)[] = [];
    const { client, logger } = fx.client(scripted.url, { clock });
    serveAgent(client, tokenBrain(got));
    await client.start();
    const peer = scripted.last.peer;
    const expiresAt = clock.now() + 5 * MINUTE;
    await peer.call("turn.start", {
      session_id: "ses_s",
      turn_id: "t1",
      input: [text("go")],
      metadata: {
        model_token: "mt_kept_SECRET",
        model_token_expires_at: new Date(expiresAt).toISOString(),
      },
    });
    const ask = (input_id: string) =>
      peer.call("turn.input", {
        session_id: "ses_s",
        turn_id: "t1",
        input_id,
        input: [text("model")],
      });
    await ask("i1");
    await ask("i2");
    await until(() => got.length === 2, "two answers");
    assert.deepEqual(got, [
      { token: "mt_kept_SECRET", expiresAt },
      { token: "mt_kept_SECRET", expiresAt },
    ]);
    const notices = logger.records.filter((r) => r.message.includes("does not refresh tokens"));
    assert.equal(notices.length, 1, "asked once, then kept the token without asking again");
    await clock.advance(5 * MINUTE);
    await ask("i3");
    await until(() => got.length === 3, "the expired token");
    assert.ok(
      got[2] instanceof TokenUnavailableError,
      `expected TokenUnavailableError, got ${got[2]}`,
    );
    assert.equal(logger.text().includes("SECRET"), false, "no token in the log");
  });

  it("keeps its valid token when a refresh fails at the harness (-32603) or answers one already expired", async () => {
    const clock = new ManualClock(Date.now());
    const scripted = await ScriptedHarness.start({ heartbeatIntervalMs: 3_600_000 });
    fx.defer(() => scripted.close());
    let answer: "fail" | "expired" = "fail";
    let refreshes = 0;
    scripted.on("model_token.refresh", () => {
      refreshes++;
      if (answer === "fail") throw new InternalError("the issuer is down");
      return {
        model_token: "mt_stale_SECRET",
        expires_at: new Date(clock.now() - MINUTE).toISOString(),
      };
    });
    const got: (ModelCredential | Error)[] = [];
    const { client } = fx.client(scripted.url, { clock });
    serveAgent(client, tokenBrain(got));
    await client.start();
    const peer = scripted.last.peer;
    // One minute left: under the refresh lead, so each ask refreshes first.
    const expiresAt = clock.now() + MINUTE;
    await peer.call("turn.start", {
      session_id: "ses_k",
      turn_id: "t1",
      input: [text("go")],
      metadata: {
        model_token: "mt_valid_SECRET",
        model_token_expires_at: new Date(expiresAt).toISOString(),
      },
    });
    let inputs = 0;
    const ask = () =>
      peer.call("turn.input", {
        session_id: "ses_k",
        turn_id: "t1",
        input_id: `i${++inputs}`,
        input: [text("model")],
      });
    await ask();
    await until(() => got.length === 1, "the answer after -32603");
    assert.deepEqual(got[0], { token: "mt_valid_SECRET", expiresAt });
    answer = "expired";
    await ask();
    await until(() => got.length === 2, "the answer after an expired token");
    assert.deepEqual(got[1], { token: "mt_valid_SECRET", expiresAt });
    // Once its own token has expired too, nothing is left to give.
    await clock.advance(MINUTE);
    await ask();
    await until(() => got.length === 3, "the answer once nothing is valid");
    assert.ok(got[2] instanceof TokenUnavailableError, `expected none, got ${got[2]}`);
    assert.equal(refreshes, 3, "each ask asked the harness first");
  });
});
