/**
 * A wide invalid tool input is refused with bounded work: a `tool.call` whose `input.env` holds
 * 20,000 numbers (env values are strings) is answered -32602 with the contract's ErrorData
 * (`reason: "invalid_params"`, `field`: a JSON pointer to the first issue), the first issues and
 * their count (`truncated: true`), and the connection goes on. The bound is shown by counting
 * work, not time: the issues zod's parse of tool.call's params holds (it held one per member),
 * and the messages a custom tool's schema builds through its error map (one per member, too).
 *
 * Real parts: a `Peer` over a linked transport pair for the raw frames of the contract's check;
 * an `ExecutorClient` with a `bash` handler and a tool of its own, registered over a real
 * WebSocket on 127.0.0.1 with a scripted harness that sends what a correct harness never would.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as z from "zod";
import { type ExecutorClient, InvalidParamsError } from "../../executor/node.ts";
import { type ToolCallParams, ToolCallParamsSchema } from "../../protocol/mod.ts";
import type { Peer } from "../../mod.ts";
import {
  MAX_COUNTED_ISSUES,
  MAX_ECHOED_CHARS,
  MAX_REPORTED_ISSUES,
} from "../../protocol/issues.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";
import { peerWithRawEnd, type RawEnd } from "../helpers/raw.ts";

const WIDTH = 20_000;

/** An env of `width` members whose values are numbers, `K0`, `K1`, ... */
function numericEnv(width: number): Record<string, unknown> {
  const env: Record<string, unknown> = {};
  for (let i = 0; i < width; i++) env[`K${i}`] = i;
  return env;
}

function bashCall(id: string, env: Record<string, unknown>): ToolCallParams {
  return { session_id: "ses_1", tool_call_id: id, tool: "bash", input: { command: "env", env } };
}

describe("the contract's check of a built-in tool's input", { timeout: 60_000 }, () => {
  const open: Peer[] = [];
  afterEach(async () => {
    for (const peer of open.splice(0)) await peer.close();
  });
  function served(): { raw: RawEnd; ran: () => number } {
    const { peer, raw } = peerWithRawEnd();
    open.push(peer);
    let ran = 0;
    peer.onRequest("tool.call", () => {
      ran++;
      return { ok: true };
    });
    return { raw, ran: () => ran };
  }
  async function request(raw: RawEnd, id: number, params: unknown): Promise<any> {
    raw.sendJson({ jsonrpc: "2.0", id, method: "tool.call", params });
    return await raw.next();
  }

  it("collects a bounded number of issues of a wide input, not one per member", () => {
    const parsed = ToolCallParamsSchema.safeParse(bashCall("c1", numericEnv(WIDTH)));
    assert.equal(parsed.success, false);
    // One more than counted, so that the report can tell there are more (it was 20,000).
    assert.equal(parsed.error!.issues.length, MAX_COUNTED_ISSUES + 1);
    assert.deepEqual(parsed.error!.issues[0].path, ["input", "env", "K0"]);
    assert.equal(
      parsed.error!.issues[0].message,
      "Invalid input: expected string, received number",
    );
  });

  it("answers a wide invalid input -32602 with ErrorData, the first issues and truncated", async () => {
    const { raw, ran } = served();
    const answer = await request(raw, 1, bashCall("c1", numericEnv(WIDTH)));
    assert.equal(answer.error.code, -32602);
    const { issues, ...rest } = answer.error.data;
    assert.deepEqual(rest, {
      reason: "invalid_params",
      field: "/input/env/K0",
      issue_count: MAX_COUNTED_ISSUES,
      truncated: true,
    });
    assert.equal(issues.length, MAX_REPORTED_ISSUES);
    assert.deepEqual(issues[9], {
      path: ["input", "env", "K9"],
      message: "Invalid input: expected string, received number",
      code: "custom",
    });
    assert.equal(ran(), 0);
  });

  it("says truncated only when there are more issues than it counts", async () => {
    const { raw } = served();
    const exactly = await request(raw, 1, bashCall("c1", numericEnv(MAX_COUNTED_ISSUES)));
    assert.equal(exactly.error.data.issue_count, MAX_COUNTED_ISSUES);
    assert.equal(exactly.error.data.truncated, undefined);
    const more = await request(raw, 2, bashCall("c2", numericEnv(MAX_COUNTED_ISSUES + 1)));
    assert.equal(more.error.data.issue_count, MAX_COUNTED_ISSUES);
    assert.equal(more.error.data.truncated, true);
  });

  it("points field at the first issue, escaping ~ and / (RFC 6901)", async () => {
    const { raw } = served();
    const answer = await request(raw, 1, bashCall("c1", { "a/b~c": 1 }));
    assert.deepEqual(answer.error.data, {
      reason: "invalid_params",
      field: "/input/env/a~1b~0c",
      issues: [{
        path: ["input", "env", "a/b~c"],
        message: "Invalid input: expected string, received number",
        code: "custom",
      }],
      issue_count: 1,
    });
  });

  it("answers params by position -32602 with reason invalid_params and no issue", async () => {
    const { raw } = served();
    const answer = await request(raw, 1, ["ses_1"]);
    assert.equal(answer.error.code, -32602);
    assert.deepEqual(answer.error.data, { reason: "invalid_params", issues: [], issue_count: 0 });
  });
});

describe("ExecutorClient: a wide invalid tool input", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  /** A scripted harness with a registered client holding session ses_1. */
  async function scriptedSession(setup: (client: ExecutorClient) => void) {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    const { client } = fx.client(harness);
    setup(client);
    await client.start();
    const peer = harness.last.peer;
    await peer.call("session.assign", { session_id: "ses_1", metadata: { source: "harness" } });
    await harness.waitForRequests("session.ready");
    return { harness, peer };
  }

  it("refuses a built-in tool's wide invalid input and answers the next call on the same connection", async () => {
    let ran = 0;
    const { harness, peer } = await scriptedSession((c) =>
      c.tools.bash.handle(() => {
        ran++;
        return "done";
      })
    );
    const refused = await peer.call("tool.call", bashCall("c1", numericEnv(WIDTH)))
      .then(() => undefined, (e) => e);
    assert.ok(refused instanceof InvalidParamsError, String(refused));
    const { issues, ...rest } = refused.data as { issues: unknown[] };
    assert.deepEqual(rest, {
      reason: "invalid_params",
      field: "/input/env/K0",
      issue_count: MAX_COUNTED_ISSUES,
      truncated: true,
    });
    assert.equal(issues.length, MAX_REPORTED_ISSUES);
    assert.equal(ran, 0);
    assert.deepEqual(await peer.call("tool.call", bashCall("c2", { A: "1" })), { ok: true });
    await harness.waitForRequests("tool.result");
    const [result] = harness.requests("tool.result");
    assert.equal(result.params.tool_call_id, "c2");
    assert.equal(result.params.outcome, "completed");
    assert.equal(ran, 1);
  });

  it("refuses a tool it does not serve repeating at most 200 characters of a long name", async () => {
    const { peer } = await scriptedSession((c) => c.tools.bash.handle(() => "done"));
    const name = "t".repeat(1_000_000);
    const refused = await peer.call("tool.call", {
      session_id: "ses_1",
      tool_call_id: "c_long",
      tool: name,
      input: {},
    }).then(() => undefined, (e) => e);
    assert.equal(refused?.code, -32012, String(refused));
    assert.equal(refused.data.reason, "capability_missing");
    assert.equal(refused.data.capability, `tool:${"t".repeat(MAX_ECHOED_CHARS)}…`);
    assert.ok(refused.message.length < 2 * MAX_ECHOED_CHARS, `${refused.message.length} chars`);
  });

  it("refuses a custom tool's wide invalid input building a bounded number of messages", async () => {
    // zod builds an issue's message through the schema's error map: one call per issue reported
    // from the parse's error (it was one per member, 20,000).
    let messages = 0;
    const value = z.string({
      error: () => {
        messages++;
        return "not a string";
      },
    });
    const { peer } = await scriptedSession((c) =>
      c.tool("deploy", {
        description: "Deploys with an environment",
        input: z.object({ target: z.string(), env: z.record(z.string(), value) }),
      }, () => "deployed")
    );
    const refused = await peer.call("tool.call", {
      session_id: "ses_1",
      tool_call_id: "c1",
      tool: "deploy",
      input: { target: "prod", env: numericEnv(WIDTH) },
    }).then(() => undefined, (e) => e);
    assert.ok(refused instanceof InvalidParamsError, String(refused));
    const { issues, ...rest } = refused.data as { issues: { path: unknown[] }[] };
    assert.deepEqual(rest, {
      reason: "invalid_params",
      field: "/input/env/K0",
      issue_count: MAX_COUNTED_ISSUES,
      truncated: true,
    });
    assert.deepEqual(issues[0].path, ["input", "env", "K0"]);
    assert.ok(messages <= MAX_COUNTED_ISSUES + 1, `${messages} messages built`);
    // A valid call on the same connection is served.
    assert.deepEqual(
      await peer.call("tool.call", {
        session_id: "ses_1",
        tool_call_id: "c2",
        tool: "deploy",
        input: { target: "prod", env: { A: "1" } },
      }),
      { ok: true },
    );
  });
});
