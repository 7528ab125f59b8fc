/**
 * `bma-harness serve`'s text log (its default format) writes one line per record, whatever a
 * client puts in what gets logged: a token request naming an environment whose id holds a line
 * break and a fake record must not add a line to the log.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../helpers/runtime-command.ts";
import { exitCodeAfterSignal, launchCli, sendSignal } from "./cli-helpers.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const dir = mkdtempSync(join(tmpdir(), "bma-serve-log-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("bma-harness serve, text log", { timeout: 120_000 }, () => {
  it("writes a client's line breaks and quotes escaped: no forged record", async () => {
    const cli = launchCli(HARNESS, ["serve", "--port", "0"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        PATH: process.env.PATH ?? "",
        HOME: dir,
        BMA_JWT_SECRET: "s".repeat(40),
        BMA_CREDENTIALS: JSON.stringify([{
          environmentId: "env_1",
          environmentKey: "ek_log_test_key_0123456789",
        }]),
      },
    });
    // Whatever fails below, the harness does not outlive the test.
    after(() => void cli.child.kill("SIGKILL"));
    const { match } = await cli.stdout.match(/ info listening (http:\/\/\S+)/);
    const base = match[1].replace(/\/$/, "");
    const forged = "2026-01-01T00:00:00.000Z error forged record";
    const owner = `env_9\n${forged} key="x" owner=env_1`;
    const response = await fetch(
      `${base}/v1/environments/${encodeURIComponent(owner)}/token`,
      { method: "POST", headers: { authorization: "Bearer not-the-key-0123456789" } },
    );
    assert.equal(response.status, 401);
    await response.body?.cancel();
    const { index } = await cli.stdout.match(/token exchange refused/);
    const line = cli.stdout.lines[index];
    assert.ok(line.includes(JSON.stringify(owner)), `the owner is written quoted: ${line}`);
    sendSignal(cli.child, "SIGTERM");
    assert.equal(exitCodeAfterSignal(await cli.result), 0);
    const lines = cli.stdout.lines;
    assert.ok(lines.length > 2, "the log has its records");
    for (const record of lines) {
      assert.match(record, /^\d{4}-\d\d-\d\dT[\d:.]+Z (debug|info|warn|error) /, record);
      assert.ok(!record.startsWith(forged), "no line is the client's");
    }
  });
});
