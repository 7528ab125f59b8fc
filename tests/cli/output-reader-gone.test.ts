/**
 * The CLIs outlive the readers of their output: `bma-harness serve` whose stdout reader goes away
 * (a `| head`, a log shipper that died) serves on, and `bma-executor` whose stderr reader goes
 * away keeps its connection and its sessions. Both used to die of the next log line (EPIPE).
 * The real CLIs as child processes, the readers' ends of their pipes destroyed by the test; a
 * real executor and harness over WebSocket on 127.0.0.1 and a Unix socket under a temp dir.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient } from "../../executor/node.ts";
import { Harness } from "../../harness/node.ts";
import { EXECUTOR_CLI, printed, ROOT, spawnTs } from "../helpers/runtime-command.ts";
import { exited, Lines, sendSignal } from "./cli-helpers.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const INFO = { name: "reader-gone", os: "linux", arch: "x64", version: "1.0.0" };
const dir = mkdtempSync(join(tmpdir(), "bma-reader-gone-"));
const children: ChildProcess[] = [];
after(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await exited(child);
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Whether `child` is still running. */
const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

describe("the CLIs outlive the readers of their output", { timeout: 120_000 }, () => {
  it("bma-harness serve serves on once its stdout reader is gone", async () => {
    const child = spawnTs(HARNESS, [
      "serve",
      "--port",
      "0",
      "--store",
      `sqlite:${join(dir, "h.db")}`,
      "--insecure-no-auth",
    ], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: process.env.PATH ?? "", HOME: dir },
    });
    children.push(child);
    const stdout = new Lines(child.stdout!, "serve stdout");
    const { match } = await stdout.match(/listening (http:\/\/\S+)/);
    const base = match[1].replace(/\/$/, "");
    // The reader goes away: every line `serve` logs from now on finds a closed pipe.
    child.stdout!.destroy();
    const client = new ExecutorClient({
      harnessUrl: base.replace(/^http/, "ws"),
      executor: INFO,
    });
    client.tools.bash.handle(() => ({ stdout: "ran", stderr: "", exit_code: 0 }));
    try {
      // Registering is logged (info): the first write into the closed pipe.
      await client.start();
      for (let i = 0; i < 3; i++) {
        assert.equal((await fetch(`${base}/readyz`)).status, 200);
      }
      assert.ok(running(child), "serve is still running");
    } finally {
      await client.stop();
    }
    sendSignal(child, "SIGTERM");
    await exited(child);
  });

  it("bma-executor keeps its connection once its stderr reader is gone", async () => {
    const path = join(dir, "harness.sock");
    let harness = new Harness({ insecureNoAuth: true });
    let server = await harness.serveUnix(path);
    const child = spawnTs(EXECUTOR_CLI, [
      "--harness",
      server.url,
      "--name",
      "reader-gone",
      "--workdir",
      dir,
      "--log-level",
      "info",
    ], { stdio: ["ignore", "pipe", "pipe"], env: { PATH: process.env.PATH ?? "", HOME: dir } });
    children.push(child);
    try {
      await printed(child, "registered ");
      // The reader of its log goes away; the harness then restarts, which the executor logs.
      child.stderr!.destroy();
      await server.close();
      await harness.close();
      harness = new Harness({ insecureNoAuth: true });
      server = await harness.serveUnix(path);
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_reader_gone" });
      const result = await session.tools.bash.call({ command: "echo still-here" });
      assert.equal(result.structured_content?.stdout.trim(), "still-here");
      assert.ok(running(child), "the executor is still running");
      await session.stop();
    } finally {
      if (running(child)) {
        sendSignal(child, "SIGTERM");
        await exited(child);
      }
      await server.close();
      await harness.close();
    }
  });
});
