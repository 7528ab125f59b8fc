/**
 * The bash tool and the process capability (`process.*`) against real child processes, through
 * the public API: the project's Harness over a real WebSocket on 127.0.0.1, `serveMachine` on
 * an `ExecutorClient`. Each capability request keeps its contract: defaults, error codes and
 * reasons, and a refusal for a session the executor does not hold that starts nothing.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { NotFoundError, ProtocolError, type ToolProgressParams } from "../../harness/node.ts";
import { ManualClock } from "../../executor/node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { ECHO_SERVER, runScript } from "../helpers/mcp-stdio-servers.ts";
import { alive, startMachine, until } from "./machine-fixture.ts";

/** The reason of a protocol error (`data.reason`). */
const reasonOf = (error: unknown) =>
  error instanceof ProtocolError ? (error.data as { reason?: string })?.reason : undefined;

/** Processes whose command line is exactly `argv` (Linux), to prove nothing was started. */
function running(argv: string[]): number[] {
  const wanted = `${argv.join("\0")}\0`;
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8") === wanted) found.push(Number(entry));
    } catch { /* exited */ }
  }
  return found;
}

describe("bash tool", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("runs in the workdir and returns stdout, stderr and the exit code", async () => {
    const { dir, session } = await startMachine(fx);
    const result = await session.tools.bash.call({
      command: "pwd; echo err >&2; printf 'é'; exit 3",
    });
    assert.deepEqual(result.structured_content, {
      stdout: `${dir}\né`,
      stderr: "err\n",
      exit_code: 3,
    });
  });

  it("streams output as it arrives and applies env and cwd; a cwd outside is a tool error", async () => {
    const { session } = await startMachine(fx);
    const progress: ToolProgressParams[] = [];
    const result = await session.tools.bash.call(
      { command: "mkdir -p sub && cd sub && echo $GREETING; echo two", env: { GREETING: "hi" } },
      { onProgress: (p) => void progress.push(p) },
    );
    assert.equal(result.structured_content?.stdout, "hi\ntwo\n");
    const streamed = progress.map((p) => (p as { output?: { text: string } }).output?.text ?? "");
    assert.equal(streamed.join(""), "hi\ntwo\n");
    const outside = await session.tools.bash.call({ command: "true", cwd: "../.." });
    assert.equal(outside.is_error, true);
  });

  it("timeout_ms ends the group: outcome timed_out, with what was printed and exit code 124", async () => {
    // The timeout runs on an injected clock, struck once the command has printed.
    const clock = new ManualClock();
    const { session } = await startMachine(fx, { machine: { clock } });
    let printed = "";
    const call = session.tools.bash.call({ command: "echo started; sleep 30", timeout_ms: 500 }, {
      onProgress: (p) => void (printed += p.output?.text ?? ""),
    });
    await until(() => printed === "started\n");
    await clock.advance(500);
    const result = await call;
    assert.equal(result.outcome, "timed_out");
    assert.match(String(result.error?.message), /timed out after 500 ms/);
    assert.equal(result.structured_content?.stdout, "started\n");
    assert.equal(result.structured_content?.exit_code, 124);
    assert.match(result.structured_content?.stderr ?? "", /timed out after 500 ms/);
  });
});

describe("process capability", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("starts by argv, takes stdin, streams with offsets, reads back, and waits for the exit", async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    const started = await executor.request("process.start", {
      session_id: sid,
      process_id: "p_cat",
      argv: ["cat"],
    });
    assert.equal(started.process_id, "p_cat");
    const again = await executor.request("process.start", {
      session_id: sid,
      process_id: "p_cat",
      argv: ["cat"],
    });
    assert.deepEqual(again, { process_id: "p_cat", pid: started.pid, duplicate: true });
    await executor.request("process.write", {
      session_id: sid,
      process_id: "p_cat",
      data: "hello ",
    });
    await executor.request("process.write", {
      session_id: sid,
      process_id: "p_cat",
      data: "d29ybGQ=",
      encoding: "base64",
      eof: true,
    });
    const waited = await executor.request("process.wait", { session_id: sid, process_id: "p_cat" });
    assert.deepEqual(waited, { process_id: "p_cat", exited: true, exit_code: 0, signal: null });
    const read = await executor.request("process.read", {
      session_id: sid,
      process_id: "p_cat",
      stream: "stdout",
    });
    assert.equal(read.data, "hello world");
    assert.equal(read.next_offset, 11);
    assert.equal(read.eof, true);
    const partial = await executor.request("process.read", {
      session_id: sid,
      process_id: "p_cat",
      stream: "stdout",
      offset: 6,
      max_bytes: 3,
    });
    assert.deepEqual([partial.offset, partial.data, partial.next_offset, partial.eof], [
      6,
      "wor",
      9,
      false,
    ]);
  });

  it("process.wait answers exited once the program is gone, though a grandchild holds its pipes", async () => {
    const { executor, session } = await startMachine(fx);
    await executor.request("process.start", {
      session_id: session.id,
      process_id: "p_bg",
      argv: ["bash", "-c", "sleep 1000 & echo $!"],
    });
    const waited = await executor.request("process.wait", {
      session_id: session.id,
      process_id: "p_bg",
    });
    assert.deepEqual(waited, { process_id: "p_bg", exited: true, exit_code: 0, signal: null });
    const read = await executor.request("process.read", {
      session_id: session.id,
      process_id: "p_bg",
      stream: "stdout",
      wait_ms: 10_000,
    });
    const grandchild = Number(read.data.trim());
    assert.equal(alive(grandchild), true, "the grandchild outlives the program");
    await session.stop("done", { graceMs: 200 });
    assert.equal(alive(grandchild), false, "and ends with the session");
  });

  it("process.signal goes to the whole group by default, to the process alone with group: false", async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    const started = await executor.request("process.start", {
      session_id: sid,
      process_id: "p_sig",
      argv: ["bash", "-c", "sleep 1000 & echo $!; wait"],
    });
    const read = await executor.request("process.read", {
      session_id: sid,
      process_id: "p_sig",
      stream: "stdout",
      wait_ms: 10_000,
    });
    const child = Number(read.data.trim());
    assert.deepEqual(
      await executor.request("process.signal", {
        session_id: sid,
        process_id: "p_sig",
        signal: "SIGKILL",
        group: false,
      }),
      { delivered: true },
    );
    const waited = await executor.request("process.wait", { session_id: sid, process_id: "p_sig" });
    assert.deepEqual(waited, {
      process_id: "p_sig",
      exited: true,
      exit_code: null,
      signal: "SIGKILL",
    });
    assert.equal(alive(started.pid!), false);
    assert.equal(alive(child), true, "group: false signals the process alone");
    // The default reaches what is left of the group although its leader is gone.
    assert.deepEqual(
      await executor.request("process.signal", {
        session_id: sid,
        process_id: "p_sig",
        signal: "SIGKILL",
      }),
      { delivered: true },
    );
    await until(() => !alive(child));
    assert.deepEqual(
      await executor.request("process.signal", { session_id: sid, process_id: "p_sig" }),
      { delivered: false },
    );
  });

  it("process.wait with timeout_ms answers exited: false; 0 answers at once; list shows it", async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    await executor.request("process.start", {
      session_id: sid,
      process_id: "p_sleep",
      argv: ["sleep", "30"],
    });
    assert.deepEqual(
      await executor.request("process.wait", {
        session_id: sid,
        process_id: "p_sleep",
        timeout_ms: 50,
      }),
      { process_id: "p_sleep", exited: false },
    );
    assert.deepEqual(
      await executor.request("process.wait", {
        session_id: sid,
        process_id: "p_sleep",
        timeout_ms: 0,
      }),
      { process_id: "p_sleep", exited: false },
    );
    const listed = await executor.request("process.list", { session_id: sid });
    assert.deepEqual(listed.processes.map((p) => [p.process_id, p.running]), [["p_sleep", true]]);
  });

  it("unknown processes, programs that do not start and a cwd outside are the contract's errors", async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    const unknown = await executor.request("process.signal", {
      session_id: sid,
      process_id: "nope",
    })
      .catch((e) => e);
    assert.ok(unknown instanceof NotFoundError);
    assert.equal(reasonOf(unknown), "unknown_process");
    const missing = await executor.request("process.start", {
      session_id: sid,
      argv: ["/no/such/program"],
    }).catch((e) => e);
    assert.ok(missing instanceof NotFoundError);
    assert.equal(reasonOf(missing), "spawn_failed");
    const outside = await executor.request("process.start", {
      session_id: sid,
      argv: ["true"],
      cwd: "../",
    }).catch((e) => e);
    assert.equal(outside.code, -32001);
    assert.equal(reasonOf(outside), "path_outside_workdir");
  });
});

describe(
  "capability requests for a session the executor does not hold",
  { timeout: 60_000 },
  () => {
    const fx = new Fixtures();
    afterEach(() => fx.cleanup());

    it("every one is refused with -32002 unknown_session, and process.start starts nothing", async () => {
      const { command, args } = runScript(ECHO_SERVER);
      const { executor, session } = await startMachine(fx, {
        machine: { mcpServers: { echo: { command, args } } },
        client: { capabilities: { mcp: { servers: ["echo"] } } },
      });
      const marker = ["sleep", "1000.424242"];
      const requests = (sid: string) => [
        executor.request("process.start", { session_id: sid, argv: marker }),
        executor.request("process.write", { session_id: sid, process_id: "p", data: "x" }),
        executor.request("process.read", { session_id: sid, process_id: "p", stream: "stdout" }),
        executor.request("process.signal", { session_id: sid, process_id: "p" }),
        executor.request("process.wait", { session_id: sid, process_id: "p" }),
        executor.request("process.list", { session_id: sid }),
        executor.request("file.upload", { session_id: sid, path: "x.txt", content: "eA==" }),
        executor.request("file.download", { session_id: sid, path: "x.txt" }),
        executor.request("skill.install", {
          session_id: sid,
          name: "s",
          source: { type: "files", files: [{ path: "SKILL.md", content: "# s" }] },
        }),
        executor.request("git.credentials", {
          session_id: sid,
          host: "example.com",
          password: "pw-1234",
        }),
        executor.request("workspace.backup", {
          session_id: sid,
          upload_url: "http://127.0.0.1:9/upload",
        }),
        executor.request("mcp.open", { session_id: sid, server: "echo" }),
      ];
      const check = async (sid: string) => {
        const outcomes = await Promise.allSettled(requests(sid));
        outcomes.forEach((outcome, i) => {
          assert.equal(outcome.status, "rejected", `request ${i} for ${sid}`);
          const error = (outcome as PromiseRejectedResult).reason;
          assert.ok(error instanceof NotFoundError, `request ${i}: ${error}`);
          assert.equal(reasonOf(error), "unknown_session", `request ${i}`);
        });
        assert.deepEqual(running(marker), [], "nothing was started");
      };
      await check("ses_never_assigned");
      // A session that ended is not held either.
      await session.stop("done");
      await check(session.id);
    });
  },
);
