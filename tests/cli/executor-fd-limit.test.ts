/**
 * An executor out of file descriptors answers the requests whose contract lists -32009 with it
 * (retryable, `data.reason` `too_many_open_files`), not -32603, and serves again once some are
 * free: the real `bma-executor` as a child process under `ulimit -n`, a real harness over
 * WebSocket on 127.0.0.1, real processes.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { Harness, ResourceExhaustedError } from "../../node.ts";
import { EXECUTOR_CLI, ROOT, tsCommand } from "../helpers/runtime-command.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-fdlimit-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("bma-executor out of file descriptors", { timeout: 120_000 }, () => {
  it("answers process.start -32009 too_many_open_files, and starts programs again once fds are free", async () => {
    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const [command, argv] = tsCommand(EXECUTOR_CLI, [
      "--harness",
      server.url,
      "--workdir",
      dir,
      "--name",
      "fd-limit",
      "--log-level",
      "error",
    ]);
    // The limit is the shell's own builtin, set for the executor alone.
    const child = spawn("/bin/sh", ["-c", 'ulimit -n 256 && exec "$@"', "sh", command, ...argv], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "pipe"],
    });
    try {
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_fd" });
      await session.ready();
      const started: string[] = [];
      let refused: unknown;
      for (let i = 0; i < 200 && refused === undefined; i++) {
        try {
          const { process_id } = await executor.request("process.start", {
            session_id: "ses_fd",
            argv: ["sleep", "600"],
          });
          started.push(process_id);
        } catch (error) {
          refused = error;
        }
      }
      assert.ok(refused instanceof ResourceExhaustedError, String(refused));
      assert.equal(refused.reason, "too_many_open_files");
      assert.ok(started.length > 10, `${started.length} started before the limit`);
      for (const id of started.splice(0, 10)) {
        const target = { session_id: "ses_fd", process_id: id };
        await executor.request("process.signal", { ...target, signal: "SIGKILL" });
        await executor.request("process.wait", { ...target, timeout_ms: 10_000 });
      }
      const again = await executor.request("process.start", {
        session_id: "ses_fd",
        argv: ["sleep", "600"],
      });
      assert.ok(again.process_id);
      await session.stop("test over");
    } finally {
      child.kill("SIGKILL");
      await new Promise((resolve) =>
        child.exitCode !== null ? resolve(null) : child.once("exit", resolve)
      );
      await server.close();
      await harness.close();
    }
  });
});
