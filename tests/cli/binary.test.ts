/**
 * The single-file `bma-executor`: built with `bun build --compile` (offline), then run as users
 * run it, against the project's harness. The binary does not depend on the runtime that builds
 * or tests it, so the Node pass of the suite alone builds and runs it.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Harness } from "../../harness/node.ts";
import {
  exitCodeAfterSigterm,
  finished,
  printed,
  ROOT,
  RUNTIME,
} from "../helpers/runtime-command.ts";

describe("bma-executor single-file binary", { timeout: 120_000, skip: RUNTIME !== "node" }, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-bin-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("builds with bun build --compile and serves a tool call against a harness", async () => {
    const binary = join(dir, "bma-executor");
    const build = await finished(
      spawn(join(ROOT, "node_modules/.bin/bun"), [
        "build",
        "--compile",
        "--minify",
        join(ROOT, "cli/executor.bun.ts"),
        "--outfile",
        binary,
      ], {
        cwd: ROOT,
      }),
    );
    assert.equal(build.code, 0, build.stderr);
    assert.ok(statSync(binary).size > 1_000_000);
    const version = await finished(spawn(binary, ["--version"]));
    assert.match(version.stdout, /^bma-executor \d+\.\d+\.\d+ \(contract /);

    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const child = spawn(
      binary,
      ["--harness", server.url, "--workdir", dir, "--log-level", "error"],
      {
        stdio: ["ignore", "pipe", "pipe"],
        cwd: dir,
      },
    );
    try {
      await printed(child, "registered ");
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({
        session_id: "ses_bin",
        metadata: { source: "harness" },
      });
      await session.ready();
      const result = await session.tools.bash.call({ command: "echo from the binary" });
      assert.equal(result.structured_content?.stdout, "from the binary\n");
      await session.stop("done");
      const exit = finished(child);
      child.kill("SIGTERM");
      assert.equal(exitCodeAfterSigterm(await exit), 0);
    } finally {
      child.kill("SIGKILL");
      await server.close();
      await harness.close();
    }
  });
});
