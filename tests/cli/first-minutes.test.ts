/**
 * A new user's first ten minutes with the CLIs, each on real processes: `bma-harness` and
 * `bma-executor` as children of this test (stdin and stdout piped), harnesses of this process
 * where a test must restart one, and a plain HTTP server where a URL is no harness.
 *
 * What order things happen in is read from the order of the output lines, never from a clock.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as z from "zod";
import { ExecutorClient } from "../../executor/node.ts";
import { Harness } from "../../harness/node.ts";
import { EXECUTOR_CLI, finished, ROOT, spawnTs } from "../helpers/runtime-command.ts";
import { ExecutorPeer } from "../helpers/executor-peer.ts";
import { exitCodeAfterSignal, launchCli, type RunningCli, sendSignal } from "./cli-helpers.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const EXECUTOR = EXECUTOR_CLI;
const INFO = { os: "linux", arch: "x64", version: "1.0.0" };

describe(
  "bma-executor and bma-harness: a new user's first ten minutes",
  { timeout: 240_000 },
  () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-first-"));
    const children: ChildProcess[] = [];
    const cleanups: (() => Promise<void>)[] = [];
    let sockets = 0;
    after(async () => {
      for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
      for (const cleanup of cleanups) await cleanup().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    });

    /** The harness CLI on an ephemeral port and a Unix socket of its own. */
    async function harness(): Promise<{ cli: RunningCli; url: string }> {
      const socket = join(dir, `h${++sockets}.sock`);
      const cli = launchCli(HARNESS, ["--port", "0", "--unix", socket]);
      children.push(cli.child);
      const { match } = await cli.stdout.match(/^listening (ws:\S+)$/);
      await cli.stdout.match(/^listening unix:/);
      return { cli, url: match[1] };
    }

    /** The bma-executor CLI connected to `url`. */
    function executor(url: string, extra: string[] = []): RunningCli {
      const cli = launchCli(EXECUTOR, ["--harness", url, "--workdir", dir, ...extra]);
      children.push(cli.child);
      return cli;
    }

    async function quit(cli: RunningCli): Promise<string[]> {
      cli.send("quit");
      const exit = await cli.result;
      assert.equal(exit.code, 0, exit.stderr);
      assert.match(exit.stdout, /closed, exit code 0\n$/);
      return exit.stdout.split("\n");
    }

    it("a missing --workdir is refused at start, saying how to create it; no registration", async () => {
      const missing = join(dir, "does-not-exist");
      const run = await finished(
        spawnTs(EXECUTOR, ["--harness", "ws://127.0.0.1:9", "--workdir", missing]),
      );
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stdout, "");
      assert.equal(run.stderr.trim().split("\n").length, 1, run.stderr);
      assert.ok(run.stderr.includes(`--workdir ${missing} does not exist`), run.stderr);
      assert.ok(run.stderr.includes(`mkdir -p "${missing}"`), run.stderr);
      const file = join(ROOT, "package.json");
      const notDir = await finished(
        spawnTs(EXECUTOR, ["--harness", "ws://127.0.0.1:9", "--workdir", file]),
      );
      assert.equal(notDir.code, 2, notDir.stderr);
      assert.match(notDir.stderr, /is not a directory/);
      const help = await finished(spawnTs(EXECUTOR, ["--help"]));
      assert.match(help.stdout, /--workdir <dir>[^\n]*\n[^\n]*must exist/);
    });

    it("a negative number for a numeric flag says it must be a positive integer", async () => {
      const harnessRun = await finished(spawnTs(HARNESS, ["--heartbeat-ms", "-5"]));
      assert.equal(harnessRun.code, 2);
      assert.equal(
        harnessRun.stderr,
        'bma-harness: --heartbeat-ms must be a positive integer (milliseconds), not "-5" (see --help)\n',
      );
      const executorRun = await finished(
        spawnTs(EXECUTOR, ["--harness", "ws://127.0.0.1:9", "--workdir", dir, "--grace-ms", "-5"]),
      );
      assert.equal(executorRun.code, 2);
      assert.equal(
        executorRun.stderr,
        'bma-executor: --grace-ms must be a positive integer, not "-5" (see --help)\n',
      );
    });

    it("a --harness URL answering HTTP 404 stops the executor: a configuration error, exit 2", async () => {
      const server = createServer((_req, res) => {
        res.statusCode = 404;
        res.end("not here");
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
      const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const run = executor(url, ["--log-format", "json"]);
      const exit = await run.result;
      assert.equal(exit.code, 2, exit.stderr);
      assert.match(exit.stdout, /^stopped, exit code 2\n$/);
      assert.ok(
        exit.stderr.includes(
          `bma-executor: ${url} answered HTTP 404: it is not a harness (check --harness)\n`,
        ),
        exit.stderr,
      );
      assert.doesNotMatch(exit.stderr, /retrying/);
    });

    it("after the harness restarts, each new executor id is printed on stdout", async () => {
      const socket = join(dir, `restart${++sockets}.sock`);
      const url = `unix://${socket}`;
      const first = new Harness({ insecureNoAuth: true });
      let server = await first.serveUnix(socket);
      cleanups.push(() => first.close());
      const run = executor(url);
      const one = await run.stdout.match(/^registered (exec_\S+)$/);
      await server.close();
      await first.close();
      const second = new Harness({ insecureNoAuth: true });
      cleanups.push(() => second.close());
      server = await second.serveUnix(socket);
      const two = await run.stdout.match(/^registered (exec_\S+)$/, one.index + 1);
      assert.notEqual(two.match[1], one.match[1]);
      assert.equal(second.executors[0]?.id, two.match[1]);
      sendSignal(run.child, "SIGTERM");
      const exit = await run.result;
      assert.equal(exitCodeAfterSignal(exit), 0, exit.stderr);
      assert.equal(exit.stdout.match(/^registered /gm)?.length, 2, exit.stdout);
      await server.close();
    });

    it("attach parses its command line as a shell does: quotes reach the program as one argument", async () => {
      const { cli, url } = await harness();
      const out = cli.stdout;
      executor(url, ["--log-level", "error"]);
      cli.send("wait 1");
      await out.match(/^ready 1$/);
      cli.send("assign - ses_b");
      await out.match(/^assigned ses_b /);
      cli.send("attach ses_b sh -c 'echo term-ok; exit 7'");
      await out.match(/^attached term_\S+ /);
      await out.match(/^term-ok$/);
      await out.match(/^terminal term_\S+ exited: code 7$/);
      // A quote left open is that command's error line; nothing runs.
      cli.send("attach ses_b sh -c 'echo oops");
      await out.match(/^error: attach: unterminated ' quote/);
      const lines = await quit(cli);
      assert.equal(
        lines.filter((l) => /Unterminated/i.test(l) && !l.startsWith("error:")).length,
        0,
      );
    });

    it("events print in the order they happen, each once: assigned before started, stopped once", async () => {
      const { cli, url } = await harness();
      const out = cli.stdout;
      executor(url, ["--log-level", "error"]);
      cli.send("wait 1");
      await out.match(/^ready 1$/);
      // Back to back, as a script sends them: the call waits for the assignment it names.
      cli.send("assign - ses_1");
      cli.send("bash ses_1 echo hello");
      const assigned = await out.match(/^assigned ses_1 /);
      const started = await out.match(/^call_1 started$/);
      assert.ok(assigned.index < started.index, out.lines.join("\n"));
      await out.match(/^call_1 completed: /);
      cli.send("bash ses_1 echo running; sleep 30");
      await out.match(/^call_2 stdout\| running$/);
      cli.send("stop ses_1");
      cli.send("quit");
      const exit = await cli.result;
      assert.equal(exit.code, 0, exit.stderr);
      const lines = exit.stdout.split("\n");
      assert.equal(lines.filter((l) => l.startsWith("stopped ses_1")).length, 1, exit.stdout);
      assert.equal(lines.filter((l) => l.startsWith("call_2 canceled")).length, 1, exit.stdout);
      assert.equal(new Set(lines.filter(Boolean)).size, lines.filter(Boolean).length, exit.stdout);
    });

    it("a call whose cancel was accepted is canceled, even when the executor then closes before its result", async () => {
      const { cli, url } = await harness();
      const out = cli.stdout;
      // The executor's side played on the wire: it accepts the cancel, then closes for good (as
      // bma-executor's second signal does) before a canceled result was sent.
      const executorPeer = await ExecutorPeer.dial(url);
      cleanups.push(() => executorPeer.close().then(() => {}));
      executorPeer.peer.onRequest("tool.cancel", () => ({ canceled: true }));
      const { executor_id: id } = await executorPeer.start();
      executorPeer.peer.onRequest("session.assign", ({ session_id }) => {
        queueMicrotask(() => void executorPeer.peer.call("session.ready", { session_id }));
        return { session_id, accepted: true };
      });
      cli.send(`assign ${id} ses_c`);
      await out.match(/^assigned ses_c /);
      cli.send("bash ses_c sleep 30");
      await executorPeer.nextToolCall();
      cli.send("cancel call_1");
      const canceled = await out.match(/^cancel call_1: \{"canceled":true\}$/);
      executorPeer.peer.notify("executor.close", { reason: "stopping now" });
      await executorPeer.close(1000, "executor stopped");
      const ended = await out.match(/^call_1 (?!started)(\S+)/, canceled.index);
      assert.equal(ended.match[1], "canceled:", out.lines.join("\n"));
      assert.match(ended.match.input, /\(executor_closed\)$/);
      cli.send("wait call_1");
      await out.match(/^waited call_1 canceled$/);
      await quit(cli);
    });

    it("errors say what is wrong: an unknown name lists what exists; a refused input names tool and field", async () => {
      const { cli, url } = await harness();
      const out = cli.stdout;
      const client = new ExecutorClient({ harnessUrl: url, executor: { name: "own", ...INFO } });
      cleanups.push(() => client.stop().then(() => {}));
      client.tool("weather", {
        description: "Current weather of a city",
        input: z.object({ city: z.string().min(1) }),
      }, ({ city }) => `sunny in ${city}`);
      await client.start();
      const id = client.executorId!;
      cli.send("tools nosuch");
      const unknown = await out.match(/^error: tools nosuch: /);
      assert.equal(
        unknown.match.input,
        `error: tools nosuch: no executor or session named nosuch (executors: ${id}; no sessions: ` +
          `assign one; "executors" and "sessions" list them)`,
      );
      cli.send(`assign ${id} ses_o`);
      await out.match(/^assigned ses_o /);
      cli.send("bash nosuch echo");
      await out.match(/^call_1 failed: no session named nosuch \(live: ses_o\)$/);
      for (;;) {
        cli.send(`tools ${id}`);
        const { index } = await out.match(/^(tool weather |no tools advertised by)/);
        if (out.lines[index].startsWith("tool weather")) break;
      }
      cli.send('call ses_o weather {"city": ""}');
      const refused = await out.match(/^call_2 failed: /);
      assert.match(
        refused.match.input,
        /^call_2 failed: the input of tool weather does not match the input schema its executor advertised \(see tools ses_o\): input\.city: /,
      );
      const machine = await executor(url, ["--log-level", "error"]).stdout.match(
        /^registered (exec_\S+)$/,
      );
      cli.send(`assign ${machine.match[1]} ses_m`);
      await out.match(/^assigned ses_m /);
      cli.send('call ses_m write {"path": "a.txt", "content": 5}');
      const builtIn = await out.match(/^call_3 failed: /);
      assert.match(
        builtIn.match.input,
        /^call_3 failed: the input of tool write does not match the contract's input schema of this built-in tool: input\.content: .*expected string/,
      );
      await quit(cli);
    });
  },
);
