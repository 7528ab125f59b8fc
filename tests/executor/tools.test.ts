/**
 * Tool calls: refusals before any ack, the immediate ack, idempotency by tool_call_id,
 * cancellation, outcomes, progress, retried and lost results, the typed slots, and the
 * capabilities they advertise. The project's Harness drives the calls; a scripted harness sends
 * the frames a correct harness never sends and refuses results on purpose.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CapabilityMissingError,
  ConflictError,
  type ExecutorClient,
  InvalidParamsError,
  ManualClock,
  NotFoundError,
  ResourceExhaustedError,
  ToolError,
  ToolResult,
  type ToolResultParams,
  UnavailableError,
} from "../../executor/node.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

const BASH = { session_id: "ses_1", tool: "bash", input: { command: "ls" } };

/** A promise the test opens by hand. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe("ExecutorClient: tool calls", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  /** A scripted harness with a registered client holding session ses_1. */
  async function scriptedSession(
    setup: (client: ExecutorClient) => void,
    options: Parameters<Fixtures["client"]>[1] = {},
  ) {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    const { client } = fx.client(harness, options);
    setup(client);
    await client.start();
    const peer = harness.last.peer;
    await peer.call("session.assign", { session_id: "ses_1", metadata: { source: "harness" } });
    await harness.waitForRequests("session.ready");
    return { harness, client, peer };
  }

  /** The project's harness with a registered client and a ready session. */
  async function harnessSession(setup: (client: ExecutorClient) => void, options = {}) {
    const { harness, server } = await fx.harness();
    const { client, logger } = fx.client(server, options);
    setup(client);
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    return { harness, executor, session, client, logger };
  }

  it("refuses a tool without a handler with -32012 tool:<name> before any ack", async () => {
    const { harness, peer } = await scriptedSession((c) => c.tools.bash.handle(() => "ok"));
    const error = await peer.call("tool.call", {
      ...BASH,
      tool_call_id: "c1",
      tool: "grep",
      input: { pattern: "x" },
    })
      .then(() => undefined, (e) => e);
    assert.ok(error instanceof CapabilityMissingError, String(error));
    assert.deepEqual(error.data, { reason: "capability_missing", capability: "tool:grep" });
    // A tool of nobody's x-tools either.
    const custom = await peer.call("tool.call", {
      ...BASH,
      tool_call_id: "c2",
      tool: "deploy",
      input: {},
    })
      .then(() => undefined, (e) => e);
    assert.deepEqual(custom.data, { reason: "capability_missing", capability: "tool:deploy" });
    assert.equal(harness.requests("tool.result").length, 0);
  });

  it("fails input missing a required member with -32602 before the handler runs", async () => {
    let ran = 0;
    const { harness, peer } = await scriptedSession((c) =>
      c.tools.bash.handle(() => {
        ran++;
        return "ok";
      })
    );
    const error = await peer.call("tool.call", { ...BASH, tool_call_id: "c1", input: {} })
      .then(() => undefined, (e) => e);
    assert.ok(error instanceof InvalidParamsError, String(error));
    const issues = (error.data as { issues: { path: unknown[] }[] }).issues;
    assert.deepEqual(issues[0].path, ["input", "command"]);
    assert.equal(ran, 0);
    assert.equal(harness.requests("tool.result").length, 0);
  });

  it("acknowledges at once and reports the outcome later with tool.result", async () => {
    const running = gate();
    const release = gate();
    const { harness, peer } = await scriptedSession((c) =>
      c.tools.bash.handle(async (input) => {
        running.open();
        await release.opened;
        return { stdout: input.command, stderr: "", exit_code: 0 };
      })
    );
    const ack = await peer.call("tool.call", { ...BASH, tool_call_id: "c1" });
    assert.deepEqual(ack, { ok: true });
    await running.opened;
    assert.equal(harness.requests("tool.result").length, 0, "no result while the handler runs");
    release.open();
    await harness.waitForRequests("tool.result");
    const [result] = harness.requests("tool.result");
    assert.equal(result.params.tool_call_id, "c1");
    assert.equal(result.params.outcome, "completed");
    assert.deepEqual(result.params.structured_content, { stdout: "ls", stderr: "", exit_code: 0 });
  });

  it("acknowledges a duplicate tool_call_id without running it again", async () => {
    let ran = 0;
    const release = gate();
    const { harness, peer } = await scriptedSession((c) =>
      c.tools.bash.handle(async () => {
        ran++;
        await release.opened;
        return "once";
      })
    );
    assert.deepEqual(await peer.call("tool.call", { ...BASH, tool_call_id: "c1" }), { ok: true });
    // While it runs ...
    assert.deepEqual(await peer.call("tool.call", { ...BASH, tool_call_id: "c1" }), {
      ok: true,
      duplicate: true,
    });
    release.open();
    await harness.waitForRequests("tool.result");
    // ... and after it finished.
    assert.deepEqual(await peer.call("tool.call", { ...BASH, tool_call_id: "c1" }), {
      ok: true,
      duplicate: true,
    });
    await until(() => harness.requests("tool.result").length >= 1);
    assert.equal(ran, 1);
    assert.equal(harness.requests("tool.result").length, 1);
  });

  it("refuses a tool_call_id of another session's call (-32013), running or finished", async () => {
    let ran = 0;
    const release = gate();
    const { harness, peer } = await scriptedSession((c) =>
      c.tools.bash.handle(async () => {
        ran++;
        await release.opened;
        return "once";
      })
    );
    await peer.call("session.assign", { session_id: "ses_2", metadata: { source: "harness" } });
    await until(() => harness.requests("session.ready").length >= 2);
    const other = { ...BASH, session_id: "ses_2", tool_call_id: "c1" };
    const reused = async () => {
      const error = await peer.call("tool.call", other).then(() => undefined, (e) => e);
      assert.ok(error instanceof ConflictError, String(error));
      assert.equal((error.data as { reason: string }).reason, "tool_call_id_reused");
    };
    assert.deepEqual(await peer.call("tool.call", { ...BASH, tool_call_id: "c1" }), { ok: true });
    await reused(); // while it runs
    release.open();
    await harness.waitForRequests("tool.result");
    await reused(); // after it finished
    // Its own session's repeat is still a duplicate, and a fresh id in the other session runs.
    assert.deepEqual(await peer.call("tool.call", { ...BASH, tool_call_id: "c1" }), {
      ok: true,
      duplicate: true,
    });
    assert.deepEqual(await peer.call("tool.call", { ...other, tool_call_id: "c2" }), { ok: true });
    await until(() => harness.requests("tool.result").length >= 2);
    assert.equal(ran, 2);
  });

  it("tool.cancel aborts ctx.signal and reports canceled; canceled: false when unknown or finished", async () => {
    let sawAbort: unknown;
    const started = gate();
    const { session } = await harnessSession((c) =>
      c.tools.bash.handle((_input, ctx) =>
        new Promise((_resolve, reject) => {
          started.open();
          ctx.signal.addEventListener("abort", () => {
            sawAbort = ctx.signal.reason;
            reject(new Error("killed"));
          });
        })
      )
    );
    const call = session.tools.bash.call({ command: "sleep 100" }, { toolCallId: "c1" });
    await started.opened;
    assert.deepEqual(await session.cancelTool("c1", "user"), { canceled: true });
    const result = await call;
    assert.equal(result.outcome, "canceled");
    assert.ok(sawAbort instanceof Error);
    assert.deepEqual(await session.cancelTool("c1"), { canceled: false }, "finished");
    assert.deepEqual(await session.cancelTool("c_unknown"), { canceled: false }, "unknown");
  });

  it("ToolError gives is_error with outcome completed; any other exception gives failed", async () => {
    const { session } = await harnessSession((c) =>
      c.tools.bash.handle((input) => {
        if (input.command === "tool-error") throw new ToolError("no such file: x.txt");
        throw new TypeError("handler bug");
      })
    );
    const toolError = await session.tools.bash.call({ command: "tool-error" });
    assert.equal(toolError.outcome, "completed");
    assert.equal(toolError.is_error, true);
    assert.deepEqual(toolError.content, [{ type: "text", text: "no such file: x.txt" }]);
    const failed = await session.tools.bash.call({ command: "crash" });
    assert.equal(failed.outcome, "failed");
    assert.deepEqual(failed.error, { message: "handler bug", code: "handler_failed" });
  });

  it("timeout_ms ends the call with timed_out (on the injected clock)", async () => {
    const clock = new ManualClock();
    const started = gate();
    const { session } = await harnessSession((c) =>
      c.tools.bash.handle(() => {
        started.open();
        return new Promise(() => {});
      }), { clock });
    const call = session.tools.bash.call({ command: "hang" }, { timeoutMs: 5_000 });
    await started.opened;
    await clock.advance(5_000);
    const result = await call;
    assert.equal(result.outcome, "timed_out");
    assert.equal(result.error?.code, "timeout");
  });

  it("ctx.progress sends tool.progress", async () => {
    const { session } = await harnessSession((c) =>
      c.tools.bash.handle((_input, ctx) => {
        ctx.progress("starting");
        ctx.progress({ progress: 1, total: 2, output: { stream: "stdout", text: "half" } });
        return "done";
      })
    );
    const seen: unknown[] = [];
    const result = await session.tools.bash.call({ command: "x" }, {
      toolCallId: "c_progress",
      onProgress: (p) => seen.push(p),
    });
    assert.equal(result.outcome, "completed");
    await until(() => seen.length === 2, "two progress notifications");
    assert.deepEqual(seen, [
      { session_id: "ses_1", tool_call_id: "c_progress", message: "starting" },
      {
        session_id: "ses_1",
        tool_call_id: "c_progress",
        progress: 1,
        total: 2,
        output: { stream: "stdout", text: "half" },
      },
    ]);
  });

  it("retries tool.result on -32009 and -32004 until accepted", async () => {
    const lost: ToolResultParams[] = [];
    const { harness, peer } = await scriptedSession(
      (c) => c.tools.bash.handle(() => "ok"),
      { onToolResultLost: (r) => lost.push(r) },
    );
    let attempts = 0;
    harness.on("tool.result", () => {
      attempts++;
      if (attempts === 1) throw new ResourceExhaustedError("busy", { reason: "overloaded" });
      if (attempts === 2) {
        throw new UnavailableError("later", { reason: "backend_unavailable", retry_after_ms: 1 });
      }
      return { ok: true };
    });
    await peer.call("tool.call", { ...BASH, tool_call_id: "c1" });
    await harness.waitForRequests("tool.result", 3);
    const results = harness.requests("tool.result");
    assert.equal(results.length, 3);
    assert.deepEqual(results[0].params, results[2].params, "the same result each time");
    assert.deepEqual(lost, []);
  });

  it("a retry_after_ms of a harness that then went away does not hold the result back from the next connection", async () => {
    const { harness, peer } = await scriptedSession((c) => c.tools.bash.handle(() => "ok"));
    let attempts = 0;
    harness.on("tool.result", () => {
      attempts++;
      // The harness asks for a minute (or for ever), then restarts: its hint was its own.
      if (attempts === 1) {
        throw new UnavailableError("later", {
          reason: "backend_unavailable",
          retry_after_ms: 1e308,
        });
      }
      return { ok: true };
    });
    await peer.call("tool.call", { ...BASH, tool_call_id: "c_hint" });
    await harness.waitForRequests("tool.result", 1);
    harness.last.peer.close(1012, "service restart");
    await harness.waitForConnections(2);
    await harness.waitForRequests("tool.result", 2);
    const [first, second] = harness.requests("tool.result");
    assert.equal(second.connection, first.connection + 1, "sent again on the new connection");
    assert.deepEqual(second.params, first.params);
  });

  it("hands a result refused for good to onToolResultLost", async () => {
    const lost: [ToolResultParams, unknown][] = [];
    const { harness, peer, client } = await scriptedSession((c) => c.tools.bash.handle(() => "ok"));
    harness.on("tool.result", () => {
      throw new NotFoundError("unknown tool call", { reason: "unknown_tool_call" });
    });
    client.onToolResultLost((result, error) => lost.push([result, error]));
    await peer.call("tool.call", { ...BASH, tool_call_id: "c1" });
    await until(() => lost.length === 1, "the result to be given up");
    assert.equal(lost[0][0].tool_call_id, "c1");
    assert.ok(lost[0][1] instanceof NotFoundError);
    assert.equal(harness.requests("tool.result").length, 1, "not retried");
  });

  it("serves typed slots for bash, read, write, edit, glob and grep", async () => {
    const { session } = await harnessSession((c) => {
      c.tools.bash.handle((i) => ({ stdout: `$ ${i.command}\n`, stderr: "warn", exit_code: 2 }));
      c.tools.read.handle((i) => ({ content: `contents of ${i.path}`, start_line: i.offset ?? 1 }));
      c.tools.write.handle((i) => ({
        path: `/w/${i.path}`,
        bytes_written: i.content.length,
        created: true,
      }));
      c.tools.edit.handle((i) => ({ path: `/w/${i.path}`, replacements: i.replace_all ? 3 : 1 }));
      c.tools.glob.handle((i) => ({ files: [`a${i.pattern}`, `b${i.pattern}`] }));
      c.tools.grep.handle((i) => ({ matches: [{ path: "a.ts", line: 4, text: i.pattern }] }));
    });
    const bash = await session.tools.bash.call({ command: "make" });
    assert.deepEqual(bash.structured_content, { stdout: "$ make\n", stderr: "warn", exit_code: 2 });
    assert.deepEqual(bash.content, [{
      type: "text",
      text: "$ make\n\n[stderr]\nwarn\n[exit code 2]",
    }]);
    const read = await session.tools.read.call({ path: "x.txt", offset: 3 });
    assert.deepEqual(read.structured_content, { content: "contents of x.txt", start_line: 3 });
    assert.deepEqual(read.content, [{ type: "text", text: "contents of x.txt" }]);
    const write = await session.tools.write.call({ path: "y.txt", content: "hello" });
    assert.deepEqual(write.structured_content, {
      path: "/w/y.txt",
      bytes_written: 5,
      created: true,
    });
    const edit = await session.tools.edit.call({
      path: "z.txt",
      old_string: "a",
      new_string: "b",
      replace_all: true,
    });
    assert.deepEqual(edit.content, [{ type: "text", text: "Replaced 3 occurrences in /w/z.txt" }]);
    const glob = await session.tools.glob.call({ pattern: ".ts" });
    assert.deepEqual(glob.content, [{ type: "text", text: "a.ts\nb.ts" }]);
    const grep = await session.tools.grep.call({ pattern: "TODO" });
    assert.deepEqual(grep.content, [{ type: "text", text: "a.ts:4:TODO" }]);
  });

  it("renders strings, content blocks and ToolResult from handlers of your own tools", async () => {
    const { session } = await harnessSession((c) => {
      c.tool("echo").handle((input) => String(input.text));
      c.tool("blocks").handle(() => [{ type: "text", text: "a" }, { type: "text", text: "b" }]);
      c.tool("full").handle(() =>
        new ToolResult({ content: "partial", isError: true, structuredContent: { n: 1 } })
      );
    });
    const echo = await session.callTool({ tool: "echo", input: { text: "hi" } });
    assert.deepEqual(echo.content, [{ type: "text", text: "hi" }]);
    const blocks = await session.callTool({ tool: "blocks", input: {} });
    assert.deepEqual(blocks.content, [{ type: "text", text: "a" }, { type: "text", text: "b" }]);
    const full = await session.callTool({ tool: "full", input: {} });
    assert.equal(full.is_error, true);
    assert.equal(full.outcome, "completed");
    assert.deepEqual(full.structured_content, { n: 1 });
  });

  it("advertises only tools with a handler; enabled: false withdraws a group; later handlers send executor.capabilities.update", async () => {
    const { executor, client } = await harnessSession(
      (c) => c.tools.read.handle(() => ({ content: "" })),
      { capabilities: { shell: { enabled: false } } },
    );
    assert.deepEqual(executor.capabilities, {
      tools: ["read"],
      files: { enabled: true },
      shell: { enabled: false },
    });
    // bash is withdrawn with its group even with a handler.
    client.tools.bash.handle(() => "x");
    const grep = client.tools.grep.handle(() => ({ matches: [] }));
    await until(() => executor.capabilities.tools?.includes("grep") === true, "the update");
    assert.deepEqual(executor.capabilities.tools, ["read", "grep"]);
    grep.dispose();
    await until(() => executor.capabilities.tools?.includes("grep") === false, "the withdrawal");
    assert.deepEqual(executor.capabilities.tools, ["read"]);
  });
});
