/**
 * The example agent executor (`agent/examples/bash-agent.node.ts`) end to end: a harness with an
 * `AgentPlatform` whose "user" approves `echo` commands and denies everything else; the agent
 * runs what was approved with bash in its workdir, never runs what was denied, reports both as
 * tool results, and resumes its conversation from `executor_session_ref` after a restart.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBashAgent } from "../../agent/examples/bash-agent.node.ts";
import { APPROVAL_ID_PATTERN, approvalId } from "../../mod.ts";
import { AgentFixtures, collect, eventTypes, text, until } from "../helpers/agent-fixture.ts";

describe("example: bash agent with platform approvals", { timeout: 30_000 }, () => {
  const fx = new AgentFixtures();
  afterEach(() => fx.cleanup());

  it("runs approved commands, skips denied ones, and resumes its conversation after a restart", async () => {
    const workdir = mkdtempSync(join(tmpdir(), "bma-agent-example-"));
    fx.defer(() => rmSync(workdir, { recursive: true, force: true }));
    const h = await fx.harness();
    // The platform's user: approves echo, denies the rest.
    h.platform.onInteraction(({ type, interaction }) => {
      if (type !== "opened") return;
      const allowed = interaction.prompt?.startsWith("echo ") ?? false;
      h.platform.respond(
        interaction.id,
        allowed ? { outcome: "approved" } : { outcome: "denied", message: "not on the allowlist" },
      );
    });
    const stream = collect(h.platform.stream("ses_demo"));
    const agent = createBashAgent({ workdir });
    const a = await fx.executor(h, agent, { client: { machineId: "m_demo" } });
    const started = await a.executor.startTurn({
      session_id: "ses_demo",
      turn_id: "t1",
      input: [text("please\n$ echo hello from the agent\n$ touch should-not-exist")],
    });
    assert.equal(started.executor_session_ref, "conv_ses_demo");
    await until(() => h.platform.turn("ses_demo")?.state === "completed", "the turn completes");
    const records = a.executor.sessions.get("ses_demo")!.eventRecords;
    assert.deepEqual(eventTypes(records), [
      "session.status_running",
      "agent.message",
      "agent.tool_use",
      "agent.tool_result",
      "agent.message",
      "agent.tool_use",
      "agent.tool_result",
      "agent.message",
      "session.status_idle",
    ]);
    const [echoUse, echoResult, touchUse, touchResult] = [
      records[2],
      records[3],
      records[5],
      records[6],
    ];
    assert.deepEqual(echoUse.event, {
      type: "agent.tool_use",
      name: "bash",
      input: { command: "echo hello from the agent" },
      evaluated_permission: "ask",
    });
    assert.deepEqual(echoResult.event, {
      type: "agent.tool_result",
      tool_use_id: echoUse.event_id,
      is_error: false,
      content: [text("hello from the agent\n")],
    });
    assert.deepEqual(touchResult.event, {
      type: "agent.tool_result",
      tool_use_id: touchUse.event_id,
      is_error: true,
      content: [text("not run (denied: not on the allowlist)")],
    });
    assert.equal(
      existsSync(join(workdir, "should-not-exist")),
      false,
      "the denied command never ran",
    );
    const final = (records[7].event as unknown as { content: { text: string }[] }).content[0].text;
    assert.equal(
      final,
      "`echo hello from the agent`: done\n`touch should-not-exist`: not run (denied)",
    );

    // Two platform interactions, under the deterministic approval ids, tied to their tool uses.
    const interactions = h.platform.interactions;
    assert.deepEqual(interactions.map((i) => [i.status, i.outcome, i.tool_use_id]), [
      ["resolved", "approved", echoUse.event_id],
      ["resolved", "denied", touchUse.event_id],
    ]);
    assert.ok(interactions.every((i) => APPROVAL_ID_PATTERN.test(i.id)), "approval ids");
    assert.equal(
      interactions[0].id,
      await approvalId("ses_demo", "bash", "echo hello from the agent"),
    );

    // Subscribers saw the previews of the messages and every durable event once.
    await until(
      () => stream.items.filter((i) => i.type === "event").length === records.length,
      "stream",
    );
    assert.ok(stream.items.some((i) => i.type === "event_delta"), "the messages were previewed");

    // The executor restarts; the harness sends the ref back and the conversation goes on.
    await a.client.stop();
    const b = await fx.executor(h, createBashAgent({ workdir }), {
      client: { machineId: "m_demo" },
    });
    await b.executor.startTurn({
      session_id: "ses_demo",
      turn_id: "t2",
      input: [text("$ echo again")],
      executor_session_ref: h.platform.executorSessionRef("ses_demo"),
    });
    await until(() => h.platform.turnById("ses_demo", "t2")?.state === "completed", "t2 completes");
    const saved = JSON.parse(
      await import("node:fs/promises").then((fs) =>
        fs.readFile(join(workdir, ".conversations", "conv_ses_demo.json"), "utf8")
      ),
    ) as { turn_id: string; role: string }[];
    assert.deepEqual(saved.map((e) => `${e.turn_id}:${e.role}`), [
      "t1:user",
      "t1:agent",
      "t2:user",
      "t2:agent",
    ], "one conversation across the restart");
  });

  it("cancels a running command with the turn (turn.cancel ends the local tool call)", async () => {
    const workdir = mkdtempSync(join(tmpdir(), "bma-agent-example-"));
    fx.defer(() => rmSync(workdir, { recursive: true, force: true }));
    const h = await fx.harness();
    h.platform.onInteraction(({ type, interaction }) => {
      if (type === "opened") h.platform.respond(interaction.id, { outcome: "approved" });
    });
    const { executor } = await fx.executor(h, createBashAgent({ workdir }));
    await executor.startTurn({
      session_id: "ses_long",
      turn_id: "t1",
      input: [text("$ echo $$ > pid && sleep 30")],
    });
    const pidFile = join(workdir, "pid");
    await until(
      () => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "",
      "running",
    );
    const pid = Number(readFileSync(pidFile, "utf8"));
    await executor.cancelTurn({ session_id: "ses_long" });
    await until(() => !alive(pid), "the command's process is gone");
    const records = executor.sessions.get("ses_long")!.eventRecords;
    await until(() => records.at(-1)?.event.type === "session.status_idle", "the idle event");
    assert.equal(
      (records.at(-1)!.event as unknown as { turn_outcome: string }).turn_outcome,
      "canceled",
    );
    assert.equal(
      records.some((r) => r.event.type === "agent.tool_result"),
      false,
      "no result for the canceled call",
    );
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
