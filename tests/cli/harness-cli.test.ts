/** `bma-harness` driven through stdin, with a real `bma-executor` connected to it. */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finished, ROOT, spawnTs } from "../helpers/runtime-command.ts";

/** Lines of a child's stdout, awaited one pattern at a time. */
function lineReader(child: ChildProcess) {
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  let partial = "";
  child.stdout!.on("data", (chunk) => {
    partial += chunk;
    const parts = partial.split("\n");
    partial = parts.pop()!;
    lines.push(...parts);
    wake?.();
  });
  return {
    lines,
    async match(pattern: RegExp): Promise<RegExpExecArray> {
      for (;;) {
        for (const line of lines) {
          const m = pattern.exec(line);
          if (m) return m;
        }
        await new Promise<void>((r) => (wake = r));
      }
    },
  };
}

describe("bma-harness", { timeout: 90_000 }, () => {
  const children: ChildProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), "bma-hcli-"));
  after(() => {
    for (const child of children) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("a bad flag exits 2 with one line; beyond loopback needs --insecure-no-auth", async () => {
    for (const args of [["--bogus"], ["--host", "0.0.0.0"], ["--port", "x"]]) {
      const run = await finished(spawnTs(join(ROOT, "harness/cli.node.ts"), args));
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stderr.trim().split("\n").length, 1);
    }
  });

  it("lists executors, assigns, streams a bash call, cancels, stops and drains", async () => {
    const harness = spawnTs(join(ROOT, "harness/cli.node.ts"), [
      "--port",
      "0",
      "--unix",
      join(dir, "h.sock"),
    ], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    children.push(harness);
    const output = lineReader(harness);
    const [, url] = await output.match(/^listening (ws:\S+)/);
    await output.match(/^listening unix:/);
    // The executor dials the Unix socket; the harness serves both.
    const executor = spawnTs(join(ROOT, "executor/cli.node.ts"), [
      "--harness",
      `unix://${join(dir, "h.sock")}`,
      "--workdir",
      dir,
      "--name",
      "hcli",
      "--log-level",
      "error",
    ]);
    children.push(executor);
    assert.match(url, /^ws:\/\/127\.0\.0\.1:\d+$/);
    const send = (line: string) => harness.stdin!.write(`${line}\n`);
    send("wait 1");
    await output.match(/^ready 1$/);
    send("executors");
    const [, id] = await output.match(
      /^(exec_\S+) hcli bma\.executor\.v1\.1 connected=true sessions=0 tools=bash,read/,
    );
    send(`assign ${id} ses_h`);
    await output.match(/^assigned ses_h to /);
    send("bash ses_h for i in 1 2 3; do echo line $i; sleep 0.05; done");
    await output.match(/^call_1 stdout\| line 2$/);
    await output.match(/^call_1 completed: .*line 3/);
    send("bash ses_h sleep 30");
    await output.match(/^call_2 started$/);
    send("cancel ses_h call_2");
    await output.match(/^cancel call_2: \{"canceled":true\}$/);
    await output.match(/^call_2 canceled/);
    send('call ses_h read {"path":"../../etc/passwd"}');
    await output.match(/^call_3 completed \(tool error\)/);
    send("stop ses_h done");
    await output.match(/^stopped ses_h: /);
    send(`drain ${id}`);
    await output.match(/^drained exec_\S+: \{"active_sessions":\[\]\}$/);
    send("quit");
    const exit = await finished(harness);
    assert.equal(exit.code, 0);
    executor.kill("SIGKILL");
  });
});
