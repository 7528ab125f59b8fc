/**
 * `bma-harness serve` failing over on PostgreSQL: two harness processes that share nothing but
 * a real PostgreSQL server (separate temp dirs and ports), the second `--standby`, a readiness-
 * checking proxy in front, three executors and a brain behind it. The scenarios of
 * `tests/cli/failover-scenarios.ts`: `kill -9` of the active, and a frozen (`SIGSTOP`) active that
 * wakes up fenced. Each scenario on a table of its own.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { failoverScenarios } from "../cli/failover-scenarios.ts";
import { finished, ROOT, spawnTs } from "../helpers/runtime-command.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-pg-failover-"));
let server: PostgresServer;
before(async () => {
  server = await PostgresServer.start();
});
after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("bma-harness serve on PostgreSQL", { timeout: 280_000 }, () => {
  it("a database that refuses the login: exit 2 with one line, no password, no stack trace", async () => {
    const url = new URL(server.url);
    url.username = "intruder";
    url.password = "hunter2";
    const run = await finished(
      spawnTs(join(ROOT, "cli/harness.node.ts"), ["serve", "--port", "0", "--store", url.href], {
        env: { PATH: process.env.PATH ?? "", HOME: dir },
      }),
    );
    assert.equal(run.code, 2, run.stderr);
    const lines = run.stderr.trim().split("\n");
    assert.equal(lines.length, 1, run.stderr);
    assert.match(lines[0], /cannot open the store \(postgres 127\.0\.0\.1:\d+\/postgres\)/);
    assert.ok(!run.stderr.includes("hunter2"), "the password reached stderr");
    assert.ok(!/\n\s+at /.test(run.stderr), "a stack trace");
  });

  let n = 0;
  failoverScenarios(() => `${server.url}?table=failover_${++n}`, dir);
});
