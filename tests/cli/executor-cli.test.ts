/**
 * `bma-executor` as users run it: a child process (on the runtime running this test) against
 * the project's harness over a real WebSocket on 127.0.0.1.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import { ECHO_SERVER } from "../helpers/mcp-stdio-servers.ts";
import {
  EXECUTOR_CLI,
  exitCodeAfterSigterm,
  finished,
  printed,
  spawnTs,
} from "../helpers/runtime-command.ts";

const CLI = EXECUTOR_CLI;
const text = (content: { type: string; text?: string }[]) =>
  content.filter((b) => b.type === "text").map((b) => b.text).join("");

describe("bma-executor: flags and environment", { timeout: 60_000 }, () => {
  it("--help and --version print and exit 0", async () => {
    const help = await finished(spawnTs(CLI, ["--help"]));
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: bma-executor/);
    const version = await finished(spawnTs(CLI, ["--version"]));
    assert.equal(version.code, 0);
    assert.match(version.stdout, /^bma-executor \d+\.\d+\.\d+/);
  });

  it("a bad flag or a missing credential is one line on stderr and exit code 2", async () => {
    const env = { ...process.env, BMA_HARNESS_URL: "", BMA_BASE_URL: "" };
    for (
      const args of [["--bogus"], [], ["--harness", "http://x"], [
        "--log-level",
        "loud",
        "--harness",
        "ws://x",
      ]]
    ) {
      const run = await finished(spawnTs(CLI, args, { env }));
      assert.equal(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
      assert.equal(run.stderr.trim().split("\n").length, 1, run.stderr);
      assert.match(run.stderr, /^bma-executor: /);
    }
    const noKey = await finished(
      spawnTs(CLI, [], {
        env: { ...env, BMA_BASE_URL: "http://127.0.0.1:9", BMA_ENVIRONMENT_ID: "env_1" },
      }),
    );
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /missing credential/);
  });

  it("a usage error never echoes a secret a URL carries", async () => {
    const env = { ...process.env, BMA_HARNESS_URL: "", BMA_BASE_URL: "" };
    for (
      const url of [
        "http://user:hunter2-pass@h:1/?token=hunter2-token#hunter2-frag",
        "ftp://hunter2-user@h/",
      ]
    ) {
      const run = await finished(spawnTs(CLI, ["--harness", url], { env }));
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /--harness takes ws:\/\//);
      assert.doesNotMatch(run.stderr, /hunter2/, run.stderr);
    }
  });
});

describe("bma-executor: against a harness", { timeout: 120_000 }, () => {
  let dir: string;
  let workdir: string;
  let harness: Harness;
  let server: HarnessServer;
  const children: ChildProcess[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-cli-"));
    workdir = join(dir, "work");
    mkdirSync(workdir);
    writeFileSync(join(dir, "secret.txt"), "do not read\n");
    symlinkSync(join(dir, "secret.txt"), join(workdir, "link-out.txt"));
    symlinkSync(dir, join(workdir, "dir-out"));
    writeFileSync(
      join(dir, "mcp.json"),
      JSON.stringify({
        mcpServers: {
          echo: { command: "node", args: [ECHO_SERVER] },
          broken: { command: join(dir, "no-such-binary") },
        },
      }),
    );
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  after(async () => {
    for (const child of children) child.kill("SIGKILL");
    await server.close();
    await harness.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function launch(extra: string[] = [], env: Record<string, string> = {}) {
    const child = spawnTs(
      CLI,
      [
        "--workdir",
        workdir,
        "--log-level",
        process.env.BMA_TEST_LOG ?? "warn",
        "--mcp-config",
        join(dir, "mcp.json"),
        "--grace-ms",
        "300",
        ...extra,
      ],
      { env: { ...process.env, ...env } },
    );
    children.push(child);
    const stderr: string[] = [];
    child.stderr!.on("data", (c) => {
      stderr.push(String(c));
      if (process.env.BMA_TEST_LOG) process.stderr.write(String(c));
    });
    await printed(child, "registered ");
    const executor = harness.executors.find((e) =>
      e.connected && !e.gone && e.info.name === (extra[extra.indexOf("--name") + 1])
    )!;
    return { child, executor, stderr };
  }

  it("connects with BMA_HARNESS_URL, serves the tools, and confines them to the workdir", async () => {
    const { child, executor } = await launch(["--name", "cli-a"], { BMA_HARNESS_URL: server.url });
    assert.deepEqual(executor.capabilities.tools, [
      "bash",
      "read",
      "write",
      "edit",
      "glob",
      "grep",
    ]);
    assert.equal(executor.capabilities.process, true);
    assert.deepEqual(executor.capabilities.mcp, { servers: ["echo", "broken"] });
    const session = await executor.assignSession({
      session_id: "ses_cli_a",
      metadata: { source: "harness" },
    });
    await session.ready();
    const bash = await session.tools.bash.call({ command: "echo hi; pwd" });
    assert.equal(bash.structured_content?.stdout.split("\n")[0], "hi");
    for (
      const path of ["../secret.txt", "link-out.txt", "dir-out/secret.txt", join(dir, "secret.txt")]
    ) {
      const read = await session.tools.read.call({ path });
      assert.equal(read.is_error, true, path);
      assert.match(text(read.content), /outside the workdir/, path);
      assert.doesNotMatch(text(read.content), /do not read/);
    }
    const write = await session.tools.write.call({ path: "dir-out/planted.txt", content: "x" });
    assert.equal(write.is_error, true);
    const outside = await session.tools.bash.call({ command: "pwd", cwd: "../" });
    assert.equal(outside.is_error, true);
    await session.stop("done");
    const exit = finished(child);
    child.kill("SIGTERM");
    assert.equal(exitCodeAfterSigterm(await exit), 0);
  });

  it("the process capability streams a long-running process and kills it on cancel and on stop", async () => {
    const { child, executor } = await launch(["--name", "cli-b", "--harness", server.url]);
    const session = await executor.assignSession({
      session_id: "ses_cli_b",
      metadata: { source: "harness" },
    });
    await session.ready();
    const script = "for i in $(seq 1 2000); do echo line $i; sleep 0.01; done";
    await executor.request("process.start", {
      session_id: session.id,
      process_id: "p_1",
      argv: ["bash", "-c", script],
    });
    // Read the output as it streams: successive long polls see growing offsets.
    let offset = 0;
    let seen = "";
    for (let i = 0; i < 3; i++) {
      const read = await executor.request("process.read", {
        session_id: session.id,
        process_id: "p_1",
        stream: "stdout",
        offset,
        wait_ms: 10_000,
      });
      assert.equal(read.offset, offset);
      assert.ok(read.next_offset > offset);
      offset = read.next_offset;
      seen += read.data;
    }
    assert.match(seen, /^line 1\nline 2\n/);
    const listed = await executor.request("process.list", { session_id: session.id });
    const pid = listed.processes[0].pid!;
    assert.equal(listed.processes[0].running, true);
    // Cancel: a signal to the group ends it.
    assert.deepEqual(
      await executor.request("process.signal", {
        session_id: session.id,
        process_id: "p_1",
        signal: "SIGTERM",
        group: true,
      }),
      { delivered: true },
    );
    const waited = await executor.request("process.wait", {
      session_id: session.id,
      process_id: "p_1",
      timeout_ms: 10_000,
    });
    assert.equal(waited.exited, true);
    assert.throws(() => process.kill(pid, 0));
    // Stop: a process still running when the session stops is ended with it.
    const started = await executor.request("process.start", {
      session_id: session.id,
      argv: ["sleep", "60"],
    });
    assert.ok(started.pid);
    await session.stop("done");
    assert.throws(
      () => process.kill(started.pid!, 0),
      "the session's processes are gone after session.ended",
    );
    const exit = finished(child);
    child.kill("SIGTERM");
    assert.equal(exitCodeAfterSigterm(await exit), 0);
  });

  it("SIGTERM drains: the pending tool call's result is delivered, then exit 0", async () => {
    const { child, executor } = await launch(["--name", "cli-c", "--harness", server.url]);
    const session = await executor.assignSession({
      session_id: "ses_cli_c",
      metadata: { source: "harness" },
    });
    await session.ready();
    const marker = join(workdir, "drain.started");
    const pending = session.tools.bash.call({
      command: `touch ${marker}; sleep 0.5; echo finished`,
    });
    const { existsSync } = await import("node:fs");
    while (!existsSync(marker)) await new Promise((r) => setTimeout(r, 20));
    const exit = finished(child);
    child.kill("SIGTERM");
    const result = await pending;
    assert.equal(result.outcome, "completed");
    assert.equal(result.structured_content?.stdout, "finished\n");
    assert.equal(exitCodeAfterSigterm(await exit), 0);
  });

  it("the MCP channel: an MCP SDK client lists and calls the tools of a real stdio MCP server", async () => {
    const { child, executor } = await launch(["--name", "cli-d", "--harness", server.url]);
    const session = await executor.assignSession({
      session_id: "ses_cli_d",
      metadata: { source: "harness" },
    });
    await session.ready();
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(await session.mcp("echo"));
    const tools = await client.listTools();
    assert.deepEqual(tools.tools.map((t) => t.name).sort(), ["add", "echo"]);
    const called = await client.callTool({ name: "echo", arguments: { text: "over the channel" } });
    assert.deepEqual(called.content, [{ type: "text", text: "echo: over the channel" }]);
    await client.close();
    // A server that cannot start is -32004 mcp_unavailable, and the session says so.
    await assert.rejects(
      session.mcp("broken"),
      (e: any) => e.code === -32004 && e.data?.reason === "mcp_unavailable",
    );
    while (session.reportedStatus?.detail !== "mcp_unavailable") {
      await new Promise((r) => setTimeout(r, 20));
    }
    await session.stop("done");
    const exit = finished(child);
    child.kill("SIGTERM");
    assert.equal(exitCodeAfterSigterm(await exit), 0);
  });
});
