/**
 * `bma-executor` on signals, and what it logs, as users run it: the real CLI process with
 * `--log-format json`, its stderr read line by line. SIGTERM and SIGINT exit 0 at any point:
 * while the options are read, before it has connected (the harness refuses), while it connects
 * (a server that accepts and never answers), registered, and draining. Its dial failures name the
 * URL (never a query), the errno and the next retry delay; each tool call's end is logged (never
 * its input); no line is logged twice.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import { refusedPort } from "../helpers/ports.ts";
import { EXECUTOR_CLI, finished, ROOT, RUNTIME } from "../helpers/runtime-command.ts";
import { until } from "../helpers/executor-fixture.ts";
import {
  exitCodeAfterSignal,
  jsonLogs,
  launchCli,
  type RunningCli,
  sendSignal,
} from "./cli-helpers.ts";

const CLI = EXECUTOR_CLI;
const onNode = RUNTIME === "node";
const SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/** The environment without any harness or credential variable of the caller's. */
function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith("BMA_")) env[name] = value;
  }
  return { ...env, ...extra };
}

/** Resolves with the first JSON log record whose message is `message` (and that `test` accepts). */
async function logged(
  cli: RunningCli,
  message: string,
  test: (record: Record<string, unknown>) => boolean = () => true,
): Promise<Record<string, unknown>> {
  for (let from = 0;;) {
    const { index } = await cli.stderr.match(/^\{/, from);
    const [record] = jsonLogs([cli.stderr.lines[index]]);
    if (record?.message === message && test(record)) return record;
    from = index + 1;
  }
}

describe("bma-executor: signals at any point exit 0", { timeout: 120_000 }, () => {
  const children: ChildProcess[] = [];
  after(() => {
    for (const child of children) child.kill("SIGKILL");
  });

  function launch(args: string[], env = cleanEnv()): RunningCli {
    const cli = launchCli(CLI, ["--workdir", tmpdir(), "--log-format", "json", ...args], { env });
    children.push(cli.child);
    return cli;
  }

  async function exitsZero(cli: RunningCli, signal: typeof SIGNALS[number]): Promise<void> {
    sendSignal(cli.child, signal);
    const exit = await cli.result;
    assert.equal(exitCodeAfterSignal(exit), 0, `${signal}: ${exit.stderr}`);
    assert.match(exit.stdout, /stopped, exit code 0\n$/);
    assert.doesNotMatch(exit.stderr, /could not start/);
  }

  for (const signal of SIGNALS) {
    it(`${signal} before it has connected: the dial failure says where, why and when again`, async () => {
      const port = await refusedPort();
      const cli = launch([
        "--harness",
        `ws://127.0.0.1:${port}/executors?token=query-secret-123`,
      ]);
      const failed = await logged(cli, "connection attempt failed: retrying");
      assert.equal(failed.url, `ws://127.0.0.1:${port}/executors`);
      assert.equal(failed.cause, "ECONNREFUSED");
      assert.equal(failed.stage, "dial");
      assert.equal(typeof failed.retry_in_ms, "number");
      assert.ok((failed.retry_in_ms as number) >= 0);
      // The next attempt follows, with its own (growing) delay and count.
      const second = await logged(
        cli,
        "connection attempt failed: retrying",
        (r) => r.attempt === 2,
      );
      assert.equal(second.cause, "ECONNREFUSED");
      await exitsZero(cli, signal);
      const exit = await cli.result;
      assert.doesNotMatch(exit.stderr, /query-secret-123/);
      const stopping = jsonLogs(exit.stderr.split("\n")).find((r) =>
        r.message === "stopping before registering"
      );
      assert.equal(stopping?.signal, signal);
    });

    it(`${signal} while it connects (the server accepts and never answers the handshake)`, async () => {
      const sockets: Socket[] = [];
      let accepted!: () => void;
      const connected = new Promise<void>((resolve) => (accepted = resolve));
      const silent: Server = createServer((socket) => {
        sockets.push(socket);
        accepted();
      });
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      try {
        const { port } = silent.address() as { port: number };
        const cli = launch(["--harness", `ws://127.0.0.1:${port}`]);
        await connected;
        await exitsZero(cli, signal);
        const exit = await cli.result;
        const stopping = jsonLogs(exit.stderr.split("\n")).find((r) =>
          r.message === "stopping before registering"
        );
        assert.equal(stopping?.state, "connecting");
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => silent.close(() => resolve()));
      }
    });

    it(`${signal} while it reads its credential from standard input`, async () => {
      const cli = launch(
        ["--credential-file", "-", "--log-level", "debug"],
        cleanEnv({ BMA_BASE_URL: "http://127.0.0.1:9", BMA_ENVIRONMENT_ID: "env_1" }),
      );
      await logged(cli, "reading the credential");
      await exitsZero(cli, signal);
    });
  }

  it("SIGHUP while the SDK still loads (held by a loader hook): handled, exit 0", {
    skip: !onNode && "a Node loader hook holds the SDK's loading",
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-early-signal-"));
    try {
      const gate = join(dir, "release");
      writeFileSync(
        join(dir, "hooks.mjs"),
        `import { existsSync } from "node:fs";
export async function load(url, context, nextLoad) {
  if (url.includes("executor-main.node")) {
    while (!existsSync(${JSON.stringify(gate)})) await new Promise((r) => setTimeout(r, 20));
  }
  return nextLoad(url, context);
}
`,
      );
      writeFileSync(
        join(dir, "register.mjs"),
        `import { register } from "node:module";\nregister("./hooks.mjs", import.meta.url);\n`,
      );
      const child = spawn(process.execPath, [
        "--import",
        import.meta.resolve("tsx"),
        "--import",
        pathToFileURL(join(dir, "register.mjs")).href,
        join(ROOT, "cli/executor.node.ts"),
        "--workdir",
        dir,
      ], { env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] });
      children.push(child);
      const result = finished(child);
      // Its SIGHUP handler is in place while the SDK's main module is held unloaded (tsx, which
      // loads the sources here, handles SIGINT and SIGTERM itself).
      const caught = () => {
        const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
        const mask = BigInt(`0x${/^SigCgt:\s*([0-9a-f]+)/m.exec(status)![1]}`);
        return (mask & 1n) !== 0n; // SIGHUP is 1
      };
      await until(caught, "a SIGHUP handler before the SDK has loaded");
      assert.equal(existsSync(gate), false);
      child.kill("SIGHUP");
      const exit = await result;
      assert.equal(exit.code, 0, `${exit.signal} ${exit.stdout} ${exit.stderr}`);
      assert.equal(exit.stdout, "stopped, exit code 0\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a failed token exchange names the endpoint's base URL and the errno", async () => {
    const port = await refusedPort();
    const cli = launch(
      ["--credential-file", "-"],
      cleanEnv({ BMA_BASE_URL: `http://127.0.0.1:${port}/api/v1`, BMA_ENVIRONMENT_ID: "env_1" }),
    );
    cli.child.stdin!.end("an-environment-key-that-stays-secret\n");
    const failed = await logged(cli, "connection attempt failed: retrying");
    assert.equal(failed.stage, "token");
    assert.equal(failed.url, `http://127.0.0.1:${port}`);
    // Node and Bun carry the errno; Deno's fetch says it in words only.
    assert.match(String(failed.cause), /ECONNREFUSED|Connection refused/);
    await exitsZero(cli, "SIGTERM");
    assert.doesNotMatch((await cli.result).stderr, /an-environment-key-that-stays-secret/);
  });
});

describe("bma-executor: registered and draining; what it logs", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-cli-log-"));
  let harness: Harness;
  let server: HarnessServer;
  const children: ChildProcess[] = [];
  after(async () => {
    for (const child of children) child.kill("SIGKILL");
    await server?.close();
    await harness?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("logs each tool call once it ends, never its input; a second SIGTERM while draining stops now; exit 0; no line twice", async () => {
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const cli = launchCli(CLI, [
      "--harness",
      server.url,
      "--workdir",
      dir,
      "--name",
      "logs",
      "--log-level",
      "debug",
      "--log-format",
      "json",
      "--drain-ms",
      "120000",
    ], { env: cleanEnv() });
    children.push(cli.child);
    await cli.stdout.match(/^registered exec_/);
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({
      session_id: "ses_log",
      metadata: { source: "harness" },
    });
    await session.ready();

    const done = await session.tools.bash.call({ command: "echo input-marker-1 >/dev/null" }, {
      toolCallId: "call_done",
    });
    assert.equal(done.outcome, "completed");
    const ended = await logged(cli, "tool call ended", (r) => r.tool_call_id === "call_done");
    assert.equal(ended.tool, "bash");
    assert.equal(ended.session_id, "ses_log");
    assert.equal(ended.outcome, "completed");
    assert.equal(ended.level, "info");
    assert.equal(typeof ended.duration_ms, "number");

    // Refused before any ack: logged with the reason, the call still has no input in the log.
    await assert.rejects(
      executor.request("tool.call", {
        session_id: "ses_gone",
        tool_call_id: "call_refused",
        tool: "bash",
        input: { command: "echo input-marker-2" },
      }),
      (e: any) => e.data?.reason === "unknown_session",
    );
    const refused = await logged(cli, "tool call refused");
    assert.equal(refused.tool_call_id, "call_refused");
    assert.equal(refused.reason, "unknown_session");

    // A call that would run for minutes; the first SIGTERM drains, waiting for it.
    const long = session.tools.bash.call({ command: "echo input-marker-3; sleep 300" }, {
      toolCallId: "call_long",
      onProgress: () => {},
    });
    long.catch(() => {});
    await logged(cli, "tool call started", (r) => r.tool_call_id === "call_long");
    sendSignal(cli.child, "SIGTERM");
    const draining = await logged(
      cli,
      "draining: current work may finish, then the executor stops",
    );
    assert.deepEqual(draining.sessions, ["ses_log"]);
    assert.equal(draining.drain_ms, 120000);
    // The second stops now: the call is canceled rather than waited for.
    sendSignal(cli.child, "SIGTERM");
    await logged(cli, "stopping now: running tool calls are canceled");
    const canceled = await logged(cli, "tool call ended", (r) => r.tool_call_id === "call_long");
    assert.equal(canceled.outcome, "canceled");
    const exit = await cli.result;
    assert.equal(exitCodeAfterSignal(exit), 0, exit.stderr);
    assert.match(exit.stdout, /^registered exec_\S+\nstopped, exit code 0\n$/);

    const records = jsonLogs(exit.stderr.split("\n"));
    assert.equal(records.length, exit.stderr.trim().split("\n").length, "every line is JSON");
    assert.doesNotMatch(exit.stderr, /input-marker/, "no tool input in the log, even at debug");
    const count = (message: string) => records.filter((r) => r.message === message).length;
    assert.equal(count("registered"), 1);
    assert.equal(count("stopped"), 1);
    const seen = new Set<string>();
    for (const { time: _, ...record } of records) {
      const line = JSON.stringify(record);
      assert.ok(!seen.has(line), `logged twice: ${line}`);
      seen.add(line);
    }
  });
});
