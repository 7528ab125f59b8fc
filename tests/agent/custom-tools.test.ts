/**
 * Custom tools over a real WebSocket: `agent.custom_tool_result` goes only to an executor that
 * declared `agent.custom_tools`; the first result per `tool_use_id` counts; the executor owns
 * the wait (its timeout ends the call with a failed `agent.tool_result`, the turn goes on, and a
 * later result is refused); `turn.cancel` ends a waiting call as canceled.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CapabilityNotAdvertisedError,
  type CustomToolOutcome,
  CustomToolsDisabledError,
  ManualClock,
  TurnCanceledError,
} from "../../mod.ts";
import { AgentFixtures, eventTypes, text, until } from "../helpers/agent-fixture.ts";

describe("agent custom tools", { timeout: 30_000 }, () => {
  const fx = new AgentFixtures();
  afterEach(() => fx.cleanup());

  it("sends a custom tool result only to an executor that declared agent.custom_tools", async () => {
    const h = await fx.harness();
    const outcomes: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        outcomes.push(await turn.customTool("lookup", { q: "x" }).catch((e) => e));
      },
    });
    assert.deepEqual(executor.capabilities.agent, {}, "no custom_tools declared");
    const refused = await executor.sendCustomToolResult({
      session_id: "ses_nt",
      tool_use_id: "toolu_1",
      content: [text("r")],
    }).then(() => undefined, (e) => e);
    assert.ok(
      refused instanceof CapabilityNotAdvertisedError,
      `expected a local refusal, got ${refused}`,
    );
    assert.equal(refused.capability, "agent.custom_tools");
    await executor.startTurn({ session_id: "ses_nt", turn_id: "t1", input: [text("go")] });
    await until(() => outcomes.length === 1, "the turn tried");
    assert.ok(outcomes[0] instanceof CustomToolsDisabledError, `got ${outcomes[0]}`);
  });

  it("takes the first result per tool_use_id and refuses repeats and unknown calls", async () => {
    const h = await fx.harness();
    const outcomes: CustomToolOutcome[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        const outcome = await turn.customTool("get_weather", { city: "Oslo" });
        outcomes.push(outcome);
        await turn.emit({
          type: "agent.message",
          content: [text(`weather: ${(outcome.content[0] as { text: string }).text}`)],
        });
      },
    }, { serve: { customTools: true } });
    assert.deepEqual(executor.capabilities.agent, { custom_tools: true });
    await executor.startTurn({ session_id: "ses_ct", turn_id: "t1", input: [text("weather?")] });
    const session = executor.sessions.get("ses_ct")!;
    await until(() => session.eventRecords.length === 2, "the custom tool use");
    const use = session.eventRecords[1];
    assert.deepEqual(use.event, {
      type: "agent.custom_tool_use",
      name: "get_weather",
      input: { city: "Oslo" },
    });
    const result = { session_id: "ses_ct", tool_use_id: use.event_id!, content: [text("sunny")] };
    const [first, second] = await Promise.all([
      executor.sendCustomToolResult(result),
      executor.sendCustomToolResult({ ...result, content: [text("rain")] }),
    ]);
    assert.deepEqual(first, { accepted: true });
    assert.deepEqual(second, { accepted: false }, "only the first result counts");
    assert.deepEqual(
      await executor.sendCustomToolResult({ ...result, tool_use_id: "toolu_unknown" }),
      { accepted: false },
      "the executor refuses a call it does not wait for",
    );
    await until(() => h.platform.turn("ses_ct")?.state === "completed", "the turn completes");
    assert.deepEqual(outcomes, [{
      tool_use_id: use.event_id,
      content: [text("sunny")],
      is_error: false,
      timed_out: false,
    }]);
    assert.deepEqual(
      (session.eventRecords[2].event as unknown as { content: unknown }).content,
      [text("weather: sunny")],
    );
  });

  it("ends a call with a failed agent.tool_result when its wait times out, continues the turn, and refuses the late result (ManualClock)", async () => {
    const h = await fx.harness();
    const clock = new ManualClock(Date.now());
    const outcomes: CustomToolOutcome[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        outcomes.push(await turn.customTool("slow_tool", {}, { timeoutMs: 30_000 }));
        await turn.emit({ type: "agent.message", content: [text("carried on")] });
      },
    }, { client: { clock }, serve: { customTools: true } });
    await executor.startTurn({ session_id: "ses_to", turn_id: "t1", input: [text("go")] });
    const session = executor.sessions.get("ses_to")!;
    await until(() => session.eventRecords.length === 2, "the custom tool use");
    const toolUseId = session.eventRecords[1].event_id!;
    await clock.advance(29_999);
    assert.equal(outcomes.length, 0, "still waiting");
    await clock.advance(1);
    await until(() => h.platform.turn("ses_to")?.state === "completed", "the turn went on");
    assert.deepEqual(eventTypes(session.eventRecords), [
      "session.status_running",
      "agent.custom_tool_use",
      "agent.tool_result",
      "agent.message",
      "session.status_idle",
    ]);
    const failed = session.eventRecords[2].event as unknown as {
      tool_use_id: string;
      is_error: boolean;
    };
    assert.equal(failed.tool_use_id, toolUseId);
    assert.equal(failed.is_error, true);
    assert.equal(outcomes[0].timed_out, true);
    assert.equal(outcomes[0].is_error, true);
    assert.deepEqual(
      await executor.sendCustomToolResult({
        session_id: "ses_to",
        tool_use_id: toolUseId,
        content: [text("too late")],
      }),
      { accepted: false },
    );
  });

  it("ends a waiting call as canceled on turn.cancel; a result for the ended turn is dropped", async () => {
    const h = await fx.harness();
    const outcomes: unknown[] = [];
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        outcomes.push(await turn.customTool("approve_payment", { amount: 10 }).catch((e) => e));
      },
    }, { serve: { customTools: true } });
    await executor.startTurn({ session_id: "ses_cc", turn_id: "t1", input: [text("pay")] });
    const session = executor.sessions.get("ses_cc")!;
    await until(() => session.eventRecords.length === 2, "the custom tool use");
    await executor.cancelTurn({ session_id: "ses_cc" });
    await until(() => outcomes.length === 1, "the wait ended");
    assert.ok(
      outcomes[0] instanceof TurnCanceledError,
      `expected TurnCanceledError, got ${outcomes[0]}`,
    );
    await until(() => session.eventRecords.length === 3, "the idle event");
    assert.equal(
      (session.eventRecords[2].event as unknown as { turn_outcome: string }).turn_outcome,
      "canceled",
    );
    assert.deepEqual(
      await executor.sendCustomToolResult({
        session_id: "ses_cc",
        tool_use_id: session.eventRecords[1].event_id!,
        content: [text("ok")],
      }),
      { accepted: false },
    );
  });
});
