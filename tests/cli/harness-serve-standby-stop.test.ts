/**
 * `bma-harness serve --standby` stopped (SIGTERM) while another harness holds the store: it
 * drains and exits 0, and its log never says it served — it never claimed the store, and the
 * holder still holds it. Two real CLI processes on one SQLite file in a temp dir, 127.0.0.1.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, RUNTIME } from "../helpers/runtime-command.ts";
import { exited, jsonLogs, launchCli, type RunningCli, sendSignal } from "./cli-helpers.ts";
import { readyStatus, until } from "./failover-rig.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const dir = mkdtempSync(join(tmpdir(), "bma-serve-standby-"));
const running = new Set<RunningCli>();
after(() => {
  for (const cli of running) cli.child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function serve(store: string, standby: boolean): Promise<{ cli: RunningCli; url: string }> {
  const cli = launchCli(HARNESS, [
    "serve",
    "--port",
    "0",
    "--store",
    store,
    "--insecure-no-auth",
    "--log-format",
    "json",
    ...(standby ? ["--standby"] : []),
  ], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH ?? "", HOME: dir },
  });
  running.add(cli);
  const { match } = await cli.stdout.match(/"message":"listening (http:\/\/[^"]+)"/);
  return { cli, url: match[1].replace(/\/$/, "") };
}

async function stop(cli: RunningCli): Promise<number | null> {
  sendSignal(cli.child, "SIGTERM");
  const end = await exited(cli.child);
  running.delete(cli);
  return RUNTIME === "deno" && end.code === null ? 0 : end.code;
}

describe("bma-harness serve --standby, stopped while it stands by", { timeout: 120_000 }, () => {
  it("exits 0 without saying it serves, and leaves the holder holding the store", async () => {
    const store = `sqlite:${join(dir, "h.db")}`;
    const holder = await serve(store, false);
    await until("the holder serves", async () => (await readyStatus(holder.url)) === "serving");
    await holder.cli.stdout.match(/serving: the store is held/);
    const standby = await serve(store, true);
    await standby.cli.stdout.match(/standing by: another harness holds the store/);
    assert.equal(await readyStatus(standby.url), "standby");

    assert.equal(await stop(standby.cli), 0, standby.cli.stderr.lines.join("\n"));
    const messages = jsonLogs(standby.cli.stdout.lines).map((r) => String(r.message));
    assert.ok(messages.some((m) => m.startsWith("SIGTERM: draining")), messages.join("\n"));
    assert.ok(
      !messages.some((m) => m.startsWith("serving")),
      `a standby that never held the store says it serves:\n${messages.join("\n")}`,
    );
    assert.ok(messages.includes("drained: exiting"), messages.join("\n"));
    assert.equal(await readyStatus(holder.url), "serving");

    assert.equal(await stop(holder.cli), 0, holder.cli.stderr.lines.join("\n"));
  });
});
