/**
 * `bma-harness serve` failing over on PostgreSQL: two harness processes that share nothing but
 * a real PostgreSQL server (separate temp dirs and ports), the second `--standby`, a readiness-
 * checking proxy in front, three executors and a brain behind it. The scenarios of
 * `tests/cli/failover-scenarios.ts`: `kill -9` of the active, and a frozen (`SIGSTOP`) active that
 * wakes up fenced. Each scenario on a table of its own. And many harnesses on one database: two
 * partitions (tables), each held by its own harness, one of them with a standby that takes it
 * over when its holder dies while the other partition's harness serves on, untouched.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { rawClient } from "./postgres-fixture.ts";
import { failoverScenarios } from "../cli/failover-scenarios.ts";
import {
  Brain,
  CountingExecutor,
  LONG_POLL_MS,
  readyStatus,
  startHarness,
  until,
} from "../cli/failover-rig.ts";
import { exited, sendSignal } from "../cli/cli-helpers.ts";
import { startReadyProxy } from "../helpers/ready-proxy.ts";
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
  failoverScenarios(() => `${server.url}?table=failover_${++n}`, dir, async () => {
    const sql = await rawClient(server.url);
    try {
      const activity = await sql.unsafe(
        "SELECT a.pid, a.state, a.wait_event_type, a.wait_event, a.backend_xid, " +
          "now() - a.xact_start AS xact_age, now() - a.state_change AS state_age, " +
          "pg_blocking_pids(a.pid) AS blocked_by, left(a.query, 120) AS query " +
          "FROM pg_stat_activity a WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()",
      );
      const locks = await sql.unsafe(
        "SELECT pid, locktype, mode, granted, classid, objid, relation::regclass AS rel " +
          "FROM pg_locks WHERE pid <> pg_backend_pid() AND locktype <> 'virtualxid'",
      );
      return `pg_stat_activity:\n${JSON.stringify(activity, null, 1)}\npg_locks:\n${
        JSON.stringify(locks, null, 1)
      }`;
    } finally {
      await sql.end();
    }
  });

  it("two partitions on one server, a standby for one: it takes over, the other serves on", async () => {
    const base = mkdtempSync(join(dir, "partitions-"));
    const storeA = `${server.url}?table=partition_a`;
    const storeB = `${server.url}?table=partition_b`;
    const a = await startHarness(base, storeA);
    await until(
      "partition a's harness serves",
      async () => (await readyStatus(a.url)) === "serving",
    );
    const standby = await startHarness(base, storeA);
    const b = await startHarness(base, storeB);
    const executors: CountingExecutor[] = [];
    const proxy = await startReadyProxy([a.url, standby.url]);
    try {
      await until(
        "partition b's harness serves beside a",
        async () => (await readyStatus(b.url)) === "serving",
      );
      await until(
        "the standby waits for partition a",
        async () => (await readyStatus(standby.url)) === "standby",
      );
      // Each partition's executors and brain reach it by its own address (a reverse proxy would
      // route by path or host); partition a's goes through the readiness-checking proxy.
      const partitions = [
        { name: "a", base: proxy.url, executor: new CountingExecutor(proxy.url, "exec-a") },
        { name: "b", base: b.url, executor: new CountingExecutor(b.url, "exec-b") },
      ];
      for (const { base: address, executor } of partitions) {
        executors.push(executor);
        await executor.client.start();
        const brain = new Brain(address);
        const session = `ses_${executor.name}`;
        await brain.retry("/sessions", {
          session_id: session,
          executor_id: executor.client.executorId,
          metadata: { source: "harness" },
        }, 201);
        await brain.retry(
          `/sessions/${session}?until=ready&wait_ms=${LONG_POLL_MS}`,
          undefined,
          200,
        );
        await executor.tick(session, 0, 10);
      }

      sendSignal(a.cli.child, "SIGKILL");
      await exited(a.cli.child);
      await until(
        "the standby holds partition a",
        async () => (await readyStatus(standby.url)) === "serving",
      );
      assert.equal(await readyStatus(b.url), "serving", "partition b's harness served on");
      await Promise.all(
        partitions.map(({ executor }) => executor.tick(`ses_${executor.name}`, 10, 20)),
      );

      for (const { name, base: address, executor } of partitions) {
        const brain = new Brain(address);
        const answer = await brain.retry(
          `/sessions/ses_${executor.name}/events?from=0&limit=100`,
          undefined,
          200,
        );
        const ticks = (answer.body.events as { event: { type: string; n: number } }[])
          .filter((record) => record.event.type === "tick")
          .map((record) => record.event.n);
        assert.deepEqual(
          ticks,
          Array.from({ length: 20 }, (_, i) => i),
          `partition ${name}'s ticks`,
        );
        // Each partition knows its own executor and session only.
        const listed = (await brain.retry("/executors", undefined, 200)).body.executors as {
          executor: { name: string };
        }[];
        assert.deepEqual(listed.map((e) => e.executor.name), [executor.name], `partition ${name}`);
        const other = name === "a" ? "ses_exec-b" : "ses_exec-a";
        assert.equal((await brain.request(`/sessions/${other}`)).status, 404);
      }
    } finally {
      for (const executor of executors) await executor.client.stop().catch(() => {});
      for (const child of [a.cli.child, standby.cli.child, b.cli.child]) {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }
      await Promise.all([a.cli.result, standby.cli.result, b.cli.result]);
      await proxy.close();
    }
  });
});
