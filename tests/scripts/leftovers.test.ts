/**
 * Nothing outlives `npm test`: scripts/test.ts, run for real on a fixture file that passes but
 * leaves two processes running (one orphaned in a session of its own with an environment of its
 * own), fails, names both, and ends them.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
const fixture = "tests/scripts/fixtures/leaves-processes.fixture.ts";

function runner(): Promise<{ code: number | null; out: string }> {
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  return new Promise((resolve, reject) => {
    // Node runs the runner, as `npm test` does, whichever runtime runs this file.
    const child = spawn("node", ["--import", "tsx", "scripts/test.ts", "--only", "node", fixture], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env,
    });
    let out = "";
    child.stdout.on("data", (chunk) => out += chunk);
    child.stderr.on("data", (chunk) => out += chunk);
    const limit = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("error", reject);
    // The exit and both streams' ends, each awaited: the summary is the last thing printed.
    const ended = (stream: NodeJS.ReadableStream) =>
      new Promise<void>((done) => stream.once("end", done));
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
    Promise.all([exited, ended(child.stdout), ended(child.stderr)]).then(([code]) => {
      clearTimeout(limit);
      resolve({ code, out });
    });
  });
}

/** Alive and not a zombie. */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX] /s.test(readFileSync(`/proc/${pid}/stat`, "latin1"));
  } catch {
    return false;
  }
}

describe("the test runner's leftover check", {
  skip: process.platform !== "linux" && "reads /proc",
}, () => {
  it("fails a stage that leaves processes running, names each, and ends them", {
    timeout: 120_000,
  }, async () => {
    const { code, out } = await runner();
    assert.equal(code, 1, out);
    const left = [...out.matchAll(/left a process running: pid (\d+): (.*)$/gm)];
    const named = left.map((m) => m[2].trim().replace(/^\S*\//, "")).sort();
    assert.deepEqual(named, ["sleep 307", "sleep 308"], out);
    for (const [, pid] of left) assert.equal(running(Number(pid)), false, `pid ${pid} still runs`);
    // Its summary counts the stage once and finds nothing running at its last look.
    assert.equal(out.match(/^total: .*$/m)?.[0], "total: 1 passed, 1 failed", out.slice(-3000));
  });
});
