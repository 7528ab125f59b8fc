/**
 * The usage errors of `bma-executor`, `bma-harness` and `bma-harness serve` (child processes on
 * the runtime running this test) never print a secret a rejected value carries: a URL's user
 * information, query or fragment, with a scheme or without one; the value of an `--env-set`; an
 * argument that belongs to no flag; the text of a JSON file or variable that does not parse
 * (the engines' parsers quote it). Each run exits 2 with one line on stderr, and no marker of a
 * secret is anywhere in what it printed.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EXECUTOR_CLI, finished, ROOT, spawnTs } from "../helpers/runtime-command.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
/** What every secret below contains: found in the output, a secret was printed. */
const MARK = "hunter2";
/** A harness URL no harness answers at (the run ends at its usage error before dialing). */
const NOWHERE = "ws://127.0.0.1:9";

interface Case {
  what: string;
  script: string;
  args: string[];
  env?: Record<string, string>;
  /** What the one line on stderr says. */
  says: RegExp;
}

describe("usage errors print no secret", { timeout: 240_000 }, () => {
  let dir: string;
  let workdir: string;
  const cases: Case[] = [];
  const children: ChildProcess[] = [];

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "bma-usage-secrets-"));
    workdir = join(dir, "work");
    mkdirSync(workdir);
    const mcpConfig = join(dir, "mcp.json");
    writeFileSync(mcpConfig, `{"mcpServers": {"a": {"command": "x", "env": {"K": ${MARK}-k}}}}`);
    const serveConfig = join(dir, "serve.json");
    writeFileSync(serveConfig, `{"store": ${MARK}-store-password}`);
    const executor = (what: string, args: string[], says: RegExp, env = {}) =>
      cases.push({ what, script: EXECUTOR_CLI, args, env, says });
    const harness = (what: string, args: string[], says: RegExp, env = {}) =>
      cases.push({ what, script: HARNESS, args, env, says });

    executor("--harness with no scheme", ["--harness", `h.example?token=${MARK}-1`], /--harness/);
    executor("--harness user:password@", ["--harness", `u:${MARK}-2@host:1`], /--harness/);
    executor("--harness ws:/", ["--harness", `ws:/h?token=${MARK}-3`], /--harness/);
    executor(
      "--harness that does not parse",
      ["--harness", `ws://h:99999/?token=${MARK}-6`],
      /--harness is not a valid URL/,
    );
    executor("BMA_HARNESS_URL", [], /BMA_HARNESS_URL/, {
      BMA_HARNESS_URL: `h?token=${MARK}-7`,
    });
    executor("BMA_BASE_URL", [], /BMA_BASE_URL/, {
      BMA_BASE_URL: `h.example/api?key=${MARK}-8`,
      BMA_ENVIRONMENT_ID: "env_1",
      BMA_ENVIRONMENT_KEY: "k",
    });
    executor("--env-set without a name", ["--harness", NOWHERE, "--env-set", `=${MARK}-9`], /NAME/);
    executor(
      "--max-sessions",
      ["--harness", NOWHERE, "--max-sessions", `u:${MARK}-10@x`],
      /--max-sessions/,
    );
    executor("an argument of no flag", ["--harness", NOWHERE, `${MARK}-11`], /argument 3/);
    executor(
      "--mcp-config that is not JSON",
      ["--harness", NOWHERE, "--workdir", workdir, "--mcp-config", mcpConfig],
      /mcp-config/,
    );

    harness("bma-harness --port", ["--port", `x?token=${MARK}-12`], /--port/);
    harness("bma-harness, an argument of no flag", [`${MARK}-13`], /argument 1/);
    harness("serve --store", ["serve", "--store", `pg.example?password=${MARK}-14`], /--store/);
    harness("serve BMA_CREDENTIALS", ["serve", "--port", "0"], /BMA_CREDENTIALS/, {
      BMA_JWT_SECRET: "a-jwt-secret-of-at-least-32-bytes!!",
      BMA_CREDENTIALS: `[{"machineId": "m", "machineToken": ${MARK}-16}]`,
    });
    harness("serve --config", ["serve", "--config", serveConfig], /config file/);
    harness("serve --shutdown-grace", ["serve", "--shutdown-grace", `u:${MARK}-18@x?`], /grace/);
  });

  after(() => {
    for (const child of children) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("exits 2 with one line that quotes no secret", async () => {
    // A few at a time: each is a process start. Each is judged as it ends.
    for (let at = 0; at < cases.length; at += 5) {
      await Promise.all(
        cases.slice(at, at + 5).map(async (c) => {
          const child = spawnTs(c.script, c.args, {
            env: { PATH: process.env.PATH ?? "", HOME: dir, ...c.env },
          });
          children.push(child);
          const run = await finished(child);
          const printed = run.stdout + run.stderr;
          assert.ok(!printed.includes(MARK), `${c.what} printed a secret: ${printed}`);
          assert.equal(run.code, 2, `${c.what}: ${printed}`);
          const lines = run.stderr.trim().split("\n");
          assert.equal(lines.length, 1, `${c.what}: ${run.stderr}`);
          assert.match(lines[0], c.says, c.what);
        }),
      );
    }
  });
});
