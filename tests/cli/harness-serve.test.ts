/**
 * `bma-harness serve` as an operator runs it: the real CLI as a child process with standard input
 * closed and no terminal, a SQLite store in a temp dir, secrets from the environment and from
 * files, an executor holding an environment key that the token endpoint exchanges, a tool called
 * through the brain API, the health routes, and SIGTERM. And each kind of bad input: exit 2 with
 * one line, never a stack trace.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient } from "../../executor/node.ts";
import { Harness, openSqliteStore } from "../../node.ts";
import { finished, ROOT, RUNTIME, spawnTs } from "../helpers/runtime-command.ts";
import { exited, jsonLogs, launchCli, type RunningCli, sendSignal } from "./cli-helpers.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const INFO = { name: "serve-test", os: "linux", arch: "x64", version: "1.0.0" };
const dir = mkdtempSync(join(tmpdir(), "bma-serve-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const JWT_SECRET = "s".repeat(40);
const ENVIRONMENT_KEY = "ek_serve_test_key_0123456789";
const BRAIN_TOKEN = "brain-token-0123456789";

/** The `listening http://…` record of a JSON log, once it is written. */
async function listeningUrl(cli: RunningCli): Promise<string> {
  const { match } = await cli.stdout.match(/"message":"listening (http:\/\/[^"]+)"/);
  return match[1].replace(/\/$/, "");
}

function serve(args: string[], env: Record<string, string> = {}): RunningCli {
  return launchCli(HARNESS, ["serve", "--log-format", "json", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH ?? "", HOME: dir, ...env },
  });
}

describe("bma-harness serve", { timeout: 240_000 }, () => {
  it("runs unattended on a SQLite store: health, a tool through the brain API, SIGTERM drains to exit 0 with the result stored", async () => {
    const db = join(dir, "h.db");
    const brainFile = join(dir, "brain-token");
    writeFileSync(brainFile, `${BRAIN_TOKEN}\n`);
    const cli = serve(["--port", "0", "--store", `sqlite:${db}`, "--brain-token-file", brainFile], {
      BMA_JWT_SECRET: JWT_SECRET,
      BMA_CREDENTIALS: JSON.stringify([{
        environmentId: "env_1",
        environmentKey: ENVIRONMENT_KEY,
      }]),
    });
    const base = await listeningUrl(cli);
    const [first, ...rest] = jsonLogs(cli.stdout.lines);
    assert.match(String(first.message), /store sqlite /);
    // No --connect-url: the log says what executors are sent to, and how to set it.
    assert.ok(
      rest.some((r) => /^token endpoint: .*set --connect-url/.test(String(r.message))),
      "the start says where the token endpoint sends executors",
    );
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { status: "serving" });

    const client = new ExecutorClient({
      baseUrl: base,
      environmentId: "env_1",
      environmentKey: ENVIRONMENT_KEY,
      executor: INFO,
    });
    client.tools.bash.handle(({ command }) => ({
      stdout: `ran ${command}`,
      stderr: "",
      exit_code: 0,
    }));
    await client.start();

    const brain = async (path: string, body?: unknown) => {
      const response = await fetch(`${base}/v1/harness${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${BRAIN_TOKEN}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: await response.json() };
    };
    assert.equal((await fetch(`${base}/v1/harness/executors`)).status, 401);
    const assigned = await brain("/sessions", {
      session_id: "ses_1",
      metadata: { source: "harness" },
    });
    assert.equal(assigned.status, 201, JSON.stringify(assigned.body));
    await brain("/sessions/ses_1?until=ready&wait_ms=10000");
    const call = await brain("/sessions/ses_1/tool-calls?wait_ms=10000", {
      tool: "bash",
      input: { command: "echo hi" },
      tool_call_id: "call_serve_1",
    });
    assert.equal(call.status, 200, JSON.stringify(call.body));
    assert.equal(call.body.result.structured_content.stdout, "ran echo hi");

    sendSignal(cli.child, "SIGTERM");
    const end = await exited(cli.child);
    await client.stop();
    assert.equal(
      RUNTIME === "deno" && end.code === null ? 0 : end.code,
      0,
      cli.stderr.lines.join("\n"),
    );
    const logs = jsonLogs(cli.stdout.lines);
    assert.ok(logs.every((r) => typeof r.time === "string" && typeof r.level === "string"));
    const text = cli.stdout.lines.join("\n") + cli.stderr.lines.join("\n");
    for (const secret of [JWT_SECRET, ENVIRONMENT_KEY, BRAIN_TOKEN]) {
      assert.ok(!text.includes(secret), "a secret reached the log");
    }

    // What it acknowledged is in the store: a harness started on the file answers the result.
    const store = await openSqliteStore(db);
    const again = new Harness({ insecureNoAuth: true, store });
    await again.ready;
    const status = await again.toolCall("call_serve_1");
    assert.ok(status, "the tool call is in the store");
    const settled = await status.outcome;
    assert.equal(settled.structured_content?.stdout, "ran echo hi");
    await again.close();
  });

  it("drains on SIGHUP as on SIGTERM (a job of a shell that exits gets it): exit 0", async () => {
    const cli = serve(["--port", "0", "--store", `sqlite:${join(dir, "hup.db")}`]);
    const base = await listeningUrl(cli);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    sendSignal(cli.child, "SIGHUP");
    const end = await exited(cli.child);
    assert.equal(
      RUNTIME === "deno" && end.code === null ? 0 : end.code,
      0,
      cli.stderr.lines.join("\n"),
    );
    const logs = jsonLogs(cli.stdout.lines).map((r) => String(r.message));
    assert.ok(logs.some((m) => m.startsWith("SIGHUP: draining")), logs.join("\n"));
    assert.ok(logs.includes("drained: exiting"), logs.join("\n"));
  });

  it("says what it waits for while its store does not answer, instead of silence", async () => {
    // A "database" that takes the connection and never answers (as PostgreSQL at
    // max_connections keeps a client trying for about 30 s).
    const held = new Set<import("node:net").Socket>();
    const silent = createServer((socket) => void held.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as { port: number }).port;
    try {
      const cli = serve(["--port", "0", "--store", `postgres://bma@127.0.0.1:${port}/harness`]);
      const { index } = await cli.stdout.match(/still opening the store/);
      const record = jsonLogs([cli.stdout.lines[index]])[0];
      assert.equal(record.level, "warn");
      assert.match(
        String(record.message),
        /postgres 127\.0\.0\.1:\d+\/harness\): no answer for \d+ s$/,
      );
      sendSignal(cli.child, "SIGKILL");
      await exited(cli.child);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("bad input: exit 2 with one line and no stack trace", async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    const port = (busy.address() as { port: number }).port;
    try {
      const cases: [string[], Record<string, string>, RegExp][] = [
        [["--store", "mysql://u:hunter2@db/x"], {}, /--store takes sqlite:PATH or postgres/],
        [["--jwt-secret-file", join(dir, "missing")], {}, /cannot read .*missing: no such file/],
        [["--port", String(port)], {}, /is in use/],
        [["--host", "0.0.0.0"], {}, /needs authentication/],
        [["--log-format", "xml"], {}, /--log-format is text or json/],
        [["--bogus"], {}, /bogus/],
        [[], { BMA_HARNESS_STORE: "redis://x" }, /^bma-harness serve: BMA_HARNESS_STORE takes/],
        [
          [],
          { BMA_HARNESS_STANDBY: "true", BMA_HARNESS_TAKEOVER: "true" },
          /BMA_HARNESS_STANDBY waits for the holder to go, BMA_HARNESS_TAKEOVER fences it/,
        ],
        [
          ["--store-table", "t"],
          {},
          /--store-table needs a PostgreSQL store/,
        ],
        [
          ["--unix", join(dir, "no-such-dir", "h.sock")],
          {},
          /cannot listen on the Unix socket .*: the directory .*no-such-dir does not exist/,
        ],
        // A timer cannot wait longer; 0 would be no drain.
        [["--shutdown-grace", "40000m"], {}, /--shutdown-grace takes a duration from 1ms to/],
        [["--shutdown-grace", "0"], {}, /--shutdown-grace takes a duration from 1ms to/],
        // A value from the environment is named as the variable it came from.
        [
          [],
          { BMA_HARNESS_PORT: "abc" },
          /^bma-harness serve: BMA_HARNESS_PORT takes a whole number/,
        ],
        [[], { BMA_HARNESS_STANDBY: "maybe" }, /BMA_HARNESS_STANDBY is true or false/],
        // Malformed credentials are refused with no JWT secret to use them, too.
        [[], { BMA_CREDENTIALS: "not json" }, /BMA_CREDENTIALS is /],
      ];
      // Side by side: each is a process start, and they are independent.
      const runs = await Promise.all(cases.map(([args, env]) =>
        finished(
          // A flag is given once: --port 0 unless the case gives its own.
          spawnTs(
            HARNESS,
            [
              "serve",
              ...(args.includes("--port") || env.BMA_HARNESS_PORT ? [] : ["--port", "0"]),
              ...args,
            ],
            {
              env: { PATH: process.env.PATH ?? "", HOME: dir, ...env },
            },
          ),
        )
      ));
      for (const [i, [args, , expected]] of cases.entries()) {
        const run = runs[i];
        assert.equal(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
        const lines = run.stderr.trim().split("\n");
        assert.equal(lines.length, 1, run.stderr);
        assert.match(lines[0], expected);
        assert.ok(!run.stderr.includes("hunter2"), "a password reached stderr");
        assert.ok(!/\n\s+at /.test(run.stderr), "a stack trace");
      }
    } finally {
      busy.close();
    }
  });
});
