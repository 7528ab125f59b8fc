/**
 * `bma-harness serve` failing over on PostgreSQL: two harness processes that share nothing but
 * a real PostgreSQL server (separate temp dirs and ports), the second `--standby`, a readiness-
 * checking proxy in front, three executors and a brain behind it. The scenarios of
 * `tests/cli/failover-scenarios.ts`: `kill -9` of the active, and a frozen (`SIGSTOP`) active that
 * wakes up fenced. Each scenario on a table of its own.
 */
import { after, before, describe } from "node:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { failoverScenarios } from "../cli/failover-scenarios.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-pg-failover-"));
let server: PostgresServer;
before(async () => {
  server = await PostgresServer.start();
});
after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("bma-harness serve fails over on PostgreSQL", { timeout: 280_000 }, () => {
  let n = 0;
  failoverScenarios(() => `${server.url}?table=failover_${++n}`, dir);
});
