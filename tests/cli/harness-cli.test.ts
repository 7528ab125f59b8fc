/**
 * `bma-harness` as users drive it: the real CLI process, commands on its stdin, its answers read
 * line by line, with real executors connected over 127.0.0.1 or a Unix socket: the
 * `bma-executor` CLI, and an `ExecutorClient` in this process where a test must hold the
 * executor's side (a stop that lasts until released, a tool of its own, durable events).
 *
 * Nothing here times anything: that a command does not wait for another is shown by its answer
 * arriving while the other provably still runs (a stop the executor holds, a call whose outcome
 * turns out `canceled`).
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as z from "zod";
import { ExecutorClient } from "../../executor/node.ts";
import { EXECUTOR_CLI, finished, ROOT, spawnTs } from "../helpers/runtime-command.ts";
import { exitCodeAfterSignal, launchCli, type RunningCli, sendSignal } from "./cli-helpers.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const EXECUTOR = EXECUTOR_CLI;
const INFO = { os: "linux", arch: "x64", version: "1.0.0" };

describe("bma-harness: flags", { timeout: 60_000 }, () => {
  it("a bad flag exits 2 with one line; beyond loopback needs --insecure-no-auth", async () => {
    for (
      const args of [["--bogus"], ["--host", "0.0.0.0"], ["--port", "x"], ["--heartbeat-ms", "0"]]
    ) {
      const run = await finished(spawnTs(HARNESS, args));
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stderr.trim().split("\n").length, 1, run.stderr);
      assert.match(run.stderr.trim(), /^bma-harness: .*\(see --help\)$/);
    }
  });

  it("--version and --help, alike on both CLIs: the package's version, every command", async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const deno = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8"));
    assert.equal(deno.version, version);
    for (const [name, script] of [["bma-harness", HARNESS], ["bma-executor", EXECUTOR]]) {
      const shown = await finished(spawnTs(script, ["--version"]));
      assert.equal(shown.code, 0);
      assert.equal(shown.stdout, `${name} ${version} (contract 1.1.0)\n`);
      const help = await finished(spawnTs(script, ["--help"]));
      assert.equal(help.code, 0);
      assert.match(help.stdout, new RegExp(`^${name} ${version} — `));
      for (const section of ["Usage:", "Signals:", "Exit codes:", "--help", "--version"]) {
        assert.ok(help.stdout.includes(section), `${name} --help: ${section}`);
      }
    }
    const help = (await finished(spawnTs(HARNESS, ["--help"]))).stdout;
    for (
      const command of [
        "executors",
        "sessions",
        "tools <executor|session>",
        "assign <executor>",
        "call <session> <tool> <json>",
        "bash <session>",
        "cancel [<session>] <call_id>",
        "stop <session>",
        "events <session> [--follow]",
        "attach <session>",
        "wait <n>",
        "wait <call_id|session>",
        "wait ... --timeout <ms>",
        "drain <executor>",
        "quit",
      ]
    ) {
      assert.ok(help.includes(`  ${command}`), `help lists ${command}`);
    }
  });
});

describe("bma-harness: commands", { timeout: 180_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-hcli-"));
  const children: ChildProcess[] = [];
  const clients: ExecutorClient[] = [];
  let sockets = 0;
  /** Lets go of what the tests' executors hold (a stop handler that never returned). */
  let letGo!: () => void;
  const lettingGo = new Promise<void>((resolve) => (letGo = resolve));
  after(async () => {
    // The processes first: nothing below may leave one behind.
    for (const child of children) child.kill("SIGKILL");
    letGo();
    await Promise.all(clients.map((client) => client.stop().catch(() => {})));
    rmSync(dir, { recursive: true, force: true });
  });

  /** The harness CLI on an ephemeral port and a Unix socket of its own. */
  async function harness(): Promise<{ cli: RunningCli; url: string; socket: string }> {
    const socket = join(dir, `h${++sockets}.sock`);
    const cli = launchCli(HARNESS, ["--port", "0", "--unix", socket]);
    children.push(cli.child);
    const { match } = await cli.stdout.match(/^listening (ws:\S+)$/);
    await cli.stdout.match(/^listening unix:/);
    return { cli, url: match[1], socket };
  }

  /** The bma-executor CLI connected to `url`; resolves with its executor id. */
  async function bmaExecutor(cli: RunningCli, url: string, name: string): Promise<string> {
    const child = spawnTs(EXECUTOR, [
      "--harness",
      url,
      "--workdir",
      dir,
      "--name",
      name,
      "--log-level",
      "error",
    ]);
    children.push(child);
    // The first executor to register that is none of this process's own.
    const own = new Set(clients.map((client) => client.executorId));
    for (let from = 0;;) {
      const { match, index } = await cli.stdout.match(/^executor registered (exec_\S+)$/, from);
      if (!own.has(match[1])) return match[1];
      from = index + 1;
    }
  }

  /** An executor in this process connected to `url`, set up by `setup` before it registers. */
  async function clientExecutor(
    url: string,
    name: string,
    setup: (client: ExecutorClient) => void = () => {},
  ): Promise<ExecutorClient> {
    const client = new ExecutorClient({ harnessUrl: url, executor: { name, ...INFO } });
    clients.push(client);
    setup(client);
    await client.start();
    return client;
  }

  async function quit(cli: RunningCli): Promise<void> {
    cli.send("quit");
    const exit = await cli.result;
    assert.equal(exit.code, 0, exit.stderr);
    assert.match(exit.stdout, /closed, exit code 0\n$/);
  }

  it("a script on stdin: empty lists say so; wait, assign, a streamed call, cancel, a refused write with its issue path, stop, drain", async () => {
    const { cli, socket } = await harness();
    const out = cli.stdout;
    cli.send("executors");
    await out.match(/^no executors connected$/);
    cli.send("sessions");
    await out.match(/^no sessions$/);
    cli.send("tools -");
    await out.match(/^error: tools -: no executors connected$/);
    // The executor dials the Unix socket; the harness serves both.
    const id = await bmaExecutor(cli, `unix://${socket}`, "hcli");
    cli.send("wait 1");
    await out.match(/^ready 1$/);
    cli.send("executors");
    await out.match(
      new RegExp(`^${id} hcli bma\\.executor\\.v1\\.1 connected=true sessions=0 tools=bash,read`),
    );
    // Sent at once, as a script would: the call waits for the assignment it names.
    cli.send(`assign ${id} ses_h`);
    cli.send("bash ses_h for i in 1 2 3; do echo line $i; done");
    await out.match(/^assigned ses_h to exec_/);
    await out.match(/^call_1 stdout\| line 2$/);
    await out.match(/^call_1 completed: .*line 3/);
    cli.send("bash ses_h echo running; sleep 30");
    await out.match(/^call_2 stdout\| running$/);
    cli.send("cancel call_2");
    await out.match(/^cancel call_2: \{"canceled":true\}$/);
    await out.match(/^call_2 canceled: \{"message":"canceled","code":"canceled"\}$/);
    cli.send('call ses_h read {"path":"../../etc/passwd"}');
    await out.match(/^call_3 completed \(tool error\)/);
    // Refused by the contract before anything is sent: which field, and why.
    cli.send('call ses_h write {"path":"a.txt","content":5}');
    const refused = await out.match(/^call_4 failed: /);
    assert.match(refused.match.input, /input\.content: .*expected string/);
    cli.send("call ses_h write {not json");
    await out.match(/^error: call ses_h: the input is not valid JSON/);
    cli.send("sessions");
    await out.match(new RegExp(`^ses_h executor=${id} state=ready running_calls=0 events=0`));
    cli.send("stop ses_h done");
    await out.match(/^stopped ses_h: \{"reason":"done"\}$/);
    cli.send("stop ses_nope");
    await out.match(
      /^error: stop ses_nope: no session named ses_nope \(no sessions: assign one\)$/,
    );
    cli.send(`drain ${id}`);
    await out.match(/^drained exec_\S+: \{"active_sessions":\[\]\}$/);
    cli.send("frobnicate");
    await out.match(/^error: frobnicate: unknown command "frobnicate" \(try help\)$/);
    await quit(cli);
  });

  it("stop cancels the running call and ends the session, without waiting for the call", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    await bmaExecutor(cli, url, "hcli-stop");
    cli.send("assign - ses_s");
    await out.match(/^assigned ses_s /);
    cli.send("bash ses_s echo started; sleep 20; echo never");
    await out.match(/^call_1 stdout\| started$/);
    cli.send("stop ses_s");
    const stopping = await out.match(/^stopping ses_s: canceling call_1$/);
    const canceled = await out.match(/^call_1 canceled: /);
    const stopped = await out.match(/^stopped ses_s: \{"reason":"stopped"\}$/);
    assert.ok(stopping.index < canceled.index && canceled.index < stopped.index);
    assert.equal(out.indexOf(/never/), -1);
    cli.send("wait ses_s");
    await out.match(/^waited ses_s ended \(stopped\)$/);
    await quit(cli);
  });

  it("quit does not wait for the lease of an executor that is gone: the close ends its call", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    await bmaExecutor(cli, url, "hcli-gone");
    const executor = children[children.length - 1];
    cli.send("assign - ses_g");
    await out.match(/^assigned ses_g /);
    cli.send("bash ses_g echo started; sleep 77");
    await out.match(/^call_1 stdout\| started$/);
    executor.kill("SIGKILL");
    await out.match(/^executor disconnected /);
    cli.send("quit");
    // Ended by the close, not after the executor's lease expired.
    await out.match(/^call_1 failed: .*harness_closed/);
    const exit = await cli.result;
    assert.equal(exit.code, 0, exit.stderr);
    assert.match(exit.stdout, /closed, exit code 0\n$/);
    assert.doesNotMatch(exit.stdout, /lease_expired/);
  });

  it("commands are answered while a stop waits for the executor", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    let entered!: () => void;
    const inStop = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const client = await clientExecutor(url, "holds-stops", (c) => {
      c.onSessionStop(async () => {
        entered();
        await released;
      });
    });
    const id = client.executorId!;
    cli.send(`assign ${id} ses_w`);
    await out.match(/^assigned ses_w /);
    cli.send("stop ses_w");
    await inStop;
    // The executor holds the stop: what follows is answered meanwhile.
    cli.send("sessions");
    await out.match(new RegExp(`^ses_w executor=${id} state=(ready|stopping)`));
    cli.send("executors");
    await out.match(new RegExp(`^${id} holds-stops .* sessions=1 tools=$`));
    assert.equal(out.indexOf(/^stopped ses_w/), -1, "the stop is still waiting");
    release();
    await out.match(/^stopped ses_w: \{"reason":"stopped"\}$/);
    await quit(cli);
  });

  it("wait holds the commands after it: a call's end, a session's end, n executors, --timeout", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    cli.send("wait 1 --timeout 50");
    await out.match(/^error: wait 1: timed out after 50 ms, still waiting for 1 executors$/);
    const first = await clientExecutor(url, "first");
    cli.send("wait 1");
    await out.match(/^ready 1$/);
    // `wait 2` holds `executors` until the second executor is there.
    cli.send("wait 2");
    cli.send("executors");
    await clientExecutor(url, "second");
    const ready = await out.match(/^ready 2$/);
    const listed = await out.match(/ second /, ready.index);
    assert.ok(listed.index > ready.index);
    let hold!: () => void;
    const held = new Promise<void>((resolve) => (hold = resolve));
    first.tool(
      "hold",
      { description: "waits until the test lets it end", input: z.object({}) },
      async () => {
        await held;
        return "let go";
      },
    );
    cli.send(`assign ${first.executorId} ses_x`);
    await out.match(/^assigned ses_x /);
    // Advertised through executor.capabilities.update: wait until the harness knows it.
    for (;;) {
      cli.send(`tools ${first.executorId}`);
      const { index } = await out.match(new RegExp(`^(tool hold |no tools advertised by)`));
      if (out.lines[index].startsWith("tool hold")) break;
    }
    cli.send("call ses_x hold {}");
    await out.match(/^call_1 started$/);
    cli.send("wait call_1");
    cli.send("sessions");
    hold();
    const waited = await out.match(/^waited call_1 completed$/);
    const sessions = await out.match(/^ses_x /);
    assert.ok(waited.index < sessions.index, "sessions ran after the wait");
    assert.ok(out.indexOf(/^call_1 completed: /) < waited.index);
    // A bare wait: every running call and command.
    cli.send("wait");
    await out.match(/^waited: nothing runs$/);
    cli.send("stop ses_x");
    cli.send("wait ses_x call_9");
    await out.match(/^error: wait ses_x: no session named call_9 /);
    cli.send("wait ses_x");
    await out.match(/^waited ses_x ended \(stopped\)$/);
    await quit(cli);
  });

  it("tools lists what each executor advertises, with the input schemas; a tool's own schema refuses input with its path", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    const own = await clientExecutor(url, "own-tools", (c) => {
      c.tool("weather", {
        description: "Current weather of a city",
        input: z.object({ city: z.string().min(1) }),
      }, ({ city }) => `sunny in ${city}`);
    });
    const bare = await clientExecutor(url, "no-tools");
    const machine = await bmaExecutor(cli, url, "machine");
    cli.send(`tools ${own.executorId}`);
    const weather = await out.match(/^tool weather (\{.*\}) — Current weather of a city$/);
    assert.deepEqual(JSON.parse(weather.match[1]).properties, {
      city: { type: "string", minLength: 1 },
    });
    cli.send(`tools ${bare.executorId}`);
    await out.match(new RegExp(`^no tools advertised by ${bare.executorId}$`));
    cli.send(`assign ${machine} ses_m`);
    await out.match(/^assigned ses_m /);
    cli.send("tools ses_m");
    const bash = await out.match(/^tool bash (\{.*\})$/);
    const schema = JSON.parse(bash.match[1]);
    assert.deepEqual(schema.required, ["command"]);
    assert.equal(schema.properties.command.type, "string");
    await out.match(/^tool grep \{/);
    cli.send(`assign ${own.executorId} ses_o`);
    await out.match(/^assigned ses_o /);
    cli.send('call ses_o weather {"city":""}');
    const refused = await out.match(/^call_1 failed: /);
    assert.match(refused.match.input, /input\.city: /);
    cli.send('call ses_o weather {"city":"Lyon"}');
    await out.match(/^call_2 completed: "sunny in Lyon"$/);
    cli.send("tools ses_none");
    await out.match(/^error: tools ses_none: no executor or session named ses_none /);
    await quit(cli);
  });

  it("events lists a session's durable events, and --follow follows them until the session ends", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    const client = await clientExecutor(url, "events");
    cli.send(`assign ${client.executorId} ses_e`);
    await out.match(/^assigned ses_e /);
    cli.send("events ses_e");
    await out.match(/^no events in ses_e$/);
    await client.call("session.event", { session_id: "ses_e", event: { type: "note", n: 1 } });
    await client.call("session.event", { session_id: "ses_e", event: { type: "note", n: 2 } });
    cli.send("events ses_e");
    await out.match(/^ses_e event 1 \{"type":"note","n":1\}$/);
    await out.match(/^ses_e event 2 \{"type":"note","n":2\}$/);
    cli.send("events ses_e --follow");
    const again = await out.match(/^ses_e event 2 /, out.indexOf(/^ses_e event 2 /) + 1);
    // A follow does not hold the commands after it.
    cli.send("sessions");
    await out.match(/^ses_e executor=\S+ state=ready running_calls=0 events=2$/, again.index);
    await client.call("session.event", { session_id: "ses_e", event: { type: "note", n: 3 } });
    await out.match(/^ses_e event 3 \{"type":"note","n":3\}$/);
    cli.send("stop ses_e");
    await out.match(/^ses_e events end: the session ended \(stopped\)$/);
    await out.match(/^stopped ses_e/);
    await quit(cli);
  });

  it("Ctrl-C says what it waits for, cancels the running call, stops the session, exits 0", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    await bmaExecutor(cli, url, "sigint");
    cli.send("assign - ses_c");
    await out.match(/^assigned ses_c /);
    cli.send("bash ses_c echo started; sleep 20");
    await out.match(/^call_1 stdout\| started$/);
    sendSignal(cli.child, "SIGINT");
    await cli.stderr.match(
      /^bma-harness: SIGINT: canceling call_1 \(bash in ses_c\), then stopping ses_c; Ctrl-C again exits at once$/,
    );
    await out.match(/^call_1 canceled: /);
    await out.match(/^stopped ses_c: \{"reason":"SIGINT"\}$/);
    const exit = await cli.result;
    assert.equal(exitCodeAfterSignal(exit), 0, exit.stderr);
    assert.match(exit.stdout, /closed, exit code 0\n$/);
  });

  it("a second Ctrl-C exits at once while the first still waits", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    let entered!: () => void;
    const inStop = new Promise<void>((resolve) => (entered = resolve));
    const client = await clientExecutor(url, "never-stops", (c) => {
      c.onSessionStop(async () => {
        entered();
        await lettingGo;
      });
    });
    cli.send(`assign ${client.executorId} ses_n`);
    await out.match(/^assigned ses_n /);
    sendSignal(cli.child, "SIGINT");
    await cli.stderr.match(/^bma-harness: SIGINT: stopping ses_n; Ctrl-C again exits at once$/);
    await inStop;
    sendSignal(cli.child, "SIGINT");
    await cli.stderr.match(/^bma-harness: SIGINT again: exiting at once$/);
    const exit = await cli.result;
    assert.equal(exitCodeAfterSignal(exit), 130, exit.stderr);
    assert.doesNotMatch(exit.stdout, /stopped ses_n/);
  });

  it("the end of input lets the running call finish, says so, then stops and exits 0", async () => {
    const { cli, url } = await harness();
    const out = cli.stdout;
    let hold!: () => void;
    const held = new Promise<void>((resolve) => (hold = resolve));
    let entered!: () => void;
    const running = new Promise<void>((resolve) => (entered = resolve));
    const client = await clientExecutor(url, "eof", (c) => {
      c.tool(
        "hold",
        { description: "waits until the test lets it end", input: z.object({}) },
        async () => {
          entered();
          await held;
          return "finished";
        },
      );
    });
    cli.send(`assign ${client.executorId} ses_f`);
    await out.match(/^assigned ses_f /);
    cli.send("call ses_f hold {}");
    await running;
    cli.child.stdin!.end();
    await cli.stderr.match(/^bma-harness: end of input: waiting for call_1 \(hold in ses_f\)/);
    hold();
    await out.match(/^call_1 completed: "finished"$/);
    await out.match(/^stopped ses_f: \{"reason":"end of input"\}$/);
    const exit = await cli.result;
    assert.equal(exit.code, 0, exit.stderr);
    assert.match(exit.stdout, /closed, exit code 0\n$/);
  });
});
