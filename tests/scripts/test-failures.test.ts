/**
 * scripts/test.ts prints each failed test with its error beside the summary, read from the
 * runners' own output: each runner here really runs a fixture in which two tests fail.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { failedTests, type Runner } from "../../scripts/test-failures.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const fixture = "./tests/scripts/fixtures/failing.fixture.ts";
const nodePath = "node";

const commands: Record<Runner, [string, string[]]> = {
  node: [nodePath, ["--import", "tsx", "--test", "--test-reporter=spec", fixture]],
  deno: [`${root}node_modules/.bin/deno`, ["test", "-A", "--no-prompt", fixture]],
  bun: [`${root}node_modules/.bin/bun`, ["test", fixture]],
};

function runFixture(runner: Runner): Promise<string> {
  const [command, args] = commands[runner];
  // A node:test child of node:test reports to its parent, not as text, when it inherits this.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...env, NO_COLOR: "1", FORCE_COLOR: "0" },
    });
    let out = "";
    child.stdout.on("data", (chunk) => out += chunk);
    child.stderr.on("data", (chunk) => out += chunk);
    const limit = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", () => {
      clearTimeout(limit);
      resolve(out);
    });
  });
}

describe("failedTests", () => {
  for (const runner of ["node", "deno", "bun"] as const) {
    it(`names ${runner}'s failed tests with their errors`, { timeout: 90_000 }, async () => {
      const failures = failedTests(runner, await runFixture(runner));
      assert.equal(failures.length, 2, JSON.stringify(failures));
      const [assertion, thrown] = failures;
      assert.match(assertion.name, /fails an assertion/);
      assert.ok(assertion.error.some((line) => line.includes("one and one make three")));
      assert.match(thrown.name, /throws an error/);
      assert.ok(thrown.error.some((line) => line.includes("the fixture's own error")));
      for (const failure of failures) {
        assert.ok(failure.error.length > 0 && failure.error.length <= 8);
        assert.ok(!failure.error.some((line) => /^\s*\d+ \| /.test(line)), "no source excerpt");
      }
    });
  }

  it("finds nothing in a run without failures", () => {
    assert.deepEqual(failedTests("bun", "(pass) a > b [1.00ms]\n\n 1 pass\n 0 fail\n"), []);
    assert.deepEqual(failedTests("deno", "a ... ok (1ms)\n\nok | 1 passed | 0 failed (5ms)\n"), []);
    assert.deepEqual(failedTests("node", "✔ a (1ms)\nℹ pass 1\nℹ fail 0\n"), []);
  });
});
