/**
 * Failover of `bma-harness serve`: two processes on one store, the second `--standby`, a
 * readiness-checking proxy in front, three executors and a brain behind it, tool calls and
 * durable events in flight. The active harness is killed (`kill -9`) or frozen (`SIGSTOP`); the
 * standby takes the store over, the executors resume there, and nothing acknowledged is lost,
 * duplicated or reordered, no tool runs twice and no session ends. A frozen harness woken up
 * afterwards writes nothing more, answers `/readyz` 503 `fenced` and closes its executors.
 *
 * On SQLite (one file, one machine) here; `tests/store/postgres-failover.test.ts` runs the same
 * rig on PostgreSQL.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { failoverScenarios } from "./failover-scenarios.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-failover-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("bma-harness serve fails over on SQLite", { timeout: 240_000 }, () => {
  let n = 0;
  failoverScenarios(() => `sqlite:${join(dir, `h${++n}.db`)}`, dir);
  it("keeps its rig's files in its own temp dir", () => assert.ok(dir.startsWith(tmpdir())));
});
