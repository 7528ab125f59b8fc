/**
 * Terminals through real PTYs, end to end through the public API: an executor serving the
 * machine (`serveMachine` of this runtime's entry point: node-pty on Node and Deno,
 * `Bun.spawn({ terminal })` on Bun) and a harness driving `session.terminal(...)`, over a real
 * WebSocket on 127.0.0.1 behind a proxy that can cut the connection.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const INFO = { name: "terminals", os: "linux", arch: "amd64", version: "1.0.0" };
/** An interactive bash without start-up files, its prompt known. */
const BASH = ["bash", "--norc", "--noprofile", "-i"];
const BASH_ENV = { PS1: "$ " };
/** Per test (Bun does not pass a suite's timeout on to its tests). */
const SLOW = { timeout: 30_000 };

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
};

/** Alive and not a zombie (a killed process waits in the table until its reaper collects it). */
const running = (pid: number) => {
  if (!alive(pid)) return false;
  try {
    return !/^\d+ \(.*\) [ZX] /s.test(readFileSync(`/proc/${pid}/stat`, "latin1"));
  } catch {
    return false;
  }
};

/**
 * Asserts a terminal's whole text, naming where it first differs and the handle's byte counts
 * (a diff of 100 KiB of lines says neither).
 */
function assertSameText(actual: string, expected: string, terminal: Entry.Terminal): void {
  if (actual === expected) return;
  let at = 0;
  while (at < actual.length && actual[at] === expected[at]) at++;
  const line = expected.slice(0, at).split("\n").length;
  assert.fail(
    `the text differs from character ${at} (line ${line}): ${actual.length} characters, ` +
      `${expected.length} expected; offset ${terminal.offset}, lostBytes ${terminal.lostBytes}; ` +
      `got ${JSON.stringify(actual.slice(at, at + 40))}, ` +
      `expected ${JSON.stringify(expected.slice(at, at + 40))}`,
  );
}

/** Resolves once `pid` is gone from the process table (reaped). */
async function reaped(pid: number): Promise<void> {
  while (alive(pid)) await new Promise((r) => setTimeout(r, 10));
}

async function fileExists(path: string): Promise<void> {
  while (!existsSync(path)) await new Promise((r) => setTimeout(r, 10));
}

/** Reads a terminal's text as it arrives; `until` waits for a pattern in what came next. */
function screen(terminal: Entry.Terminal) {
  let text = "";
  let wake: (() => void) | undefined;
  let ended = false;
  /** Where `prompt` and `until` look next: after what they found last. */
  let from = 0;
  const done = (async () => {
    try {
      for await (const chunk of terminal) {
        text += chunk;
        wake?.();
      }
    } finally {
      ended = true;
      wake?.();
    }
  })();
  return {
    get text() {
      return text;
    },
    done,
    /**
     * Waits for the next prompt of {@linkcode BASH} (`$ `): bash may drop what is typed while
     * it switches between running a command and reading the next line, so lines are typed there.
     */
    async prompt(): Promise<void> {
      for (;;) {
        const at = text.indexOf("$ ", from);
        if (at >= 0) {
          from = at + 2;
          return;
        }
        if (ended) throw new Error(`output ended without a prompt: ${JSON.stringify(text)}`);
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    async until(pattern: RegExp): Promise<RegExpExecArray> {
      for (;;) {
        const match = pattern.exec(text.slice(from));
        if (match) {
          from += match.index + match[0].length;
          return match;
        }
        if (ended) throw new Error(`output ended without ${pattern}: ${JSON.stringify(text)}`);
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

describe(`terminals on ${RUNTIME}`, { timeout: 60_000 }, () => {
  let dir: string;
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let proxy: ChaosProxy;
  let client: Entry.ExecutorClient;
  let executor: Entry.ExecutorHandle;
  /** While set, the executor's reconnect attempts wait for it. */
  let gate: Promise<void> | undefined;
  let sessions = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-term-"));
    harness = new sdk.Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    proxy = await ChaosProxy.start(server.url);
    client = new sdk.ExecutorClient({
      harnessUrl: proxy.url,
      executor: INFO,
      dial: async (url, options) => {
        await gate;
        return sdk.dialWebSocket(url, options);
      },
    });
    sdk.serveMachine(client, { workdir: dir, graceMs: 300 });
    await client.start();
    executor = await harness.waitExecutor();
  });

  after(async () => {
    await client?.stop();
    await harness?.close();
    await server?.close();
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function newSession(): Promise<Entry.Session> {
    const session = await executor.assignSession({ session_id: `ses_term_${++sessions}` });
    await session.ready();
    return session;
  }

  it(
    "advertises terminal; the default is the login shell on a /dev/pts PTY of 80x24",
    SLOW,
    async () => {
      assert.equal(executor.capabilities.terminal, true);
      const session = await newSession();
      const terminal = await session.terminal();
      assert.ok(terminal.pid && alive(terminal.pid));
      const view = screen(terminal);
      await terminal.write("tty; stty size; echo $((6*7))done\r");
      await view.until(/42done/);
      assert.match(view.text, /\/dev\/pts\/\d+\r\n/);
      assert.match(view.text, /\r\n24 80\r\n/);
      assert.deepEqual(await terminal.close(), { closed: true, exit_code: null });
      await view.done;
      assert.equal(await terminal.exited, null); // ended by SIGHUP
    },
  );

  it("after resize to 120x40, stty size prints 40 120", SLOW, async () => {
    const session = await newSession();
    const terminal = await session.terminal({ argv: BASH, env: BASH_ENV, cols: 100, rows: 30 });
    const view = screen(terminal);
    await view.prompt();
    await terminal.write("stty size\r");
    await view.until(/30 100\r\n/);
    await view.prompt();
    assert.deepEqual(await terminal.resize(120, 40), { cols: 120, rows: 40 });
    await terminal.write("stty size\r");
    await view.until(/40 120\r\n/);
    await view.prompt();
    await terminal.write("exit 3\r");
    assert.equal(await terminal.exited, 3);
    await view.done;
    assert.deepEqual(await terminal.close(), { closed: false, exit_code: 3 });
  });

  it("an interactive read receives typed input, text and bytes", SLOW, async () => {
    const session = await newSession();
    const terminal = await session.terminal({ argv: BASH, env: BASH_ENV });
    const view = screen(terminal);
    await view.prompt();
    // Typed only once `read` runs: input typed while bash sets the terminal up may be dropped.
    await terminal.write('echo READY; read -r line; echo "got=[$line]"\r');
    await view.until(/READY\r\n/);
    assert.equal(await terminal.write("héllo "), 7);
    assert.equal(await terminal.write(new TextEncoder().encode("wörld\r")), 7);
    await view.until(/got=\[héllo wörld\]/);
    await view.prompt();
    await terminal.write("exit\r");
    assert.equal(await terminal.exited, 0);
    await view.done;
  });

  it(
    "every byte of a large output arrives once and in order; then the iteration ends",
    SLOW,
    async () => {
      const session = await newSession();
      const terminal = await session.terminal({
        argv: ["bash", "-c", "head -c 300000 /dev/zero | tr '\\0' x; printf END; exit 7"],
      });
      let bytes = 0;
      let tail = "";
      for await (const chunk of terminal.output()) {
        bytes += chunk.byteLength;
        tail = (tail + new TextDecoder().decode(chunk)).slice(-3);
      }
      assert.equal(bytes, 300_003);
      assert.equal(tail, "END");
      assert.equal(await terminal.exited, 7);
      assert.equal(terminal.offset, 300_003);
      assert.equal(terminal.lostBytes, 0);
    },
  );

  it(
    "terminal_id makes open safe to retry; unknown and exited terminals answer as the contract says",
    SLOW,
    async () => {
      const session = await newSession();
      const params = { session_id: session.id, terminal_id: "t_retry", argv: BASH, env: BASH_ENV };
      const first = await executor.request("terminal.open", params);
      const again = await executor.request("terminal.open", params);
      assert.deepEqual(again, { terminal_id: "t_retry", pid: first.pid, duplicate: true });
      // terminal.read long-polls the output from an offset: here the first prompt.
      let held = "";
      while (!held.includes("$ ")) {
        const read = await executor.request("terminal.read", {
          session_id: session.id,
          terminal_id: "t_retry",
          offset: held.length,
          wait_ms: 10_000,
        });
        assert.equal(read.offset, held.length);
        assert.equal(read.encoding, "utf8");
        held += read.data;
        assert.equal(read.next_offset, held.length);
      }
      // A handle for an id that is already open reads what the executor holds, from offset 0.
      const terminal = await session.terminal({ terminalId: "t_retry", argv: BASH });
      assert.equal(terminal.duplicate, true);
      assert.equal(terminal.pid, first.pid);
      const view = screen(terminal);
      await view.prompt();
      assert.ok(view.text.startsWith(held), JSON.stringify(view.text));
      await terminal.write("echo $((1+1))x\r");
      await view.until(/2x/);
      assert.deepEqual(
        await executor.request("terminal.close", { session_id: session.id, terminal_id: "nope" }),
        { closed: false },
      );
      await assert.rejects(
        executor.request("terminal.input", {
          session_id: session.id,
          terminal_id: "nope",
          data: "x",
        }),
        (error: Entry.NotFoundError) =>
          error.code === -32002 && error.reason === "unknown_terminal",
      );
      await assert.rejects(
        executor.request("terminal.open", { session_id: "ses_nobody", argv: BASH }),
        (error: Entry.NotFoundError) => error.code === -32002 && error.reason === "unknown_session",
      );
      assert.deepEqual(await terminal.close(), { closed: true, exit_code: null });
      await assert.rejects(
        terminal.resize(10, 10),
        (error: Entry.NotFoundError) => error.reason === "terminal_closed",
      );
      // Closed, but its id is still known: a late retry starts nothing.
      assert.equal((await executor.request("terminal.open", params)).duplicate, true);
    },
  );

  it("refuses a cwd outside the workdir and a program that does not exist", SLOW, async () => {
    const session = await newSession();
    await assert.rejects(
      session.terminal({ cwd: "../.." }),
      (error: Entry.ForbiddenError) =>
        error.code === -32001 && error.reason === "path_outside_workdir",
    );
    await assert.rejects(
      session.terminal({ argv: ["/nonexistent/program"] }),
      (error: Entry.NotFoundError) => error.code === -32002 && error.reason === "spawn_failed",
    );
  });

  /** A terminal whose shell started a job that ignores SIGHUP in a process group of its own. */
  async function withStubbornJob(session: Entry.Session) {
    const terminal = await session.terminal({ argv: BASH, env: BASH_ENV });
    const view = screen(terminal);
    await view.prompt();
    // The job says its pid once it ignores SIGHUP.
    await terminal.write("(trap '' HUP; echo \"job=$BASHPID\"; exec sleep 1000) &\r");
    const job = Number((await view.until(/job=(\d+)/))[1]);
    assert.ok(alive(terminal.pid!) && alive(job));
    return { terminal, view, job };
  }

  it(
    "terminal.close leaves no process behind (SIGHUP, then SIGKILL for what ignores it)",
    SLOW,
    async () => {
      const session = await newSession();
      const { terminal, view, job } = await withStubbornJob(session);
      const closed = await terminal.close();
      assert.equal(closed.closed, true);
      // Gone when close answers; then reaped by whoever inherited them.
      assert.equal(running(terminal.pid!), false);
      assert.equal(running(job), false);
      await reaped(terminal.pid!);
      await reaped(job);
      await view.done;
    },
  );

  it("session.stop leaves no process of its terminals behind", SLOW, async () => {
    const session = await newSession();
    const one = await withStubbornJob(session);
    const two = await session.terminal({ argv: ["sleep", "1000"] });
    await session.stop("done", { graceMs: 200 });
    for (const pid of [one.terminal.pid!, one.job, two.pid!]) {
      assert.equal(running(pid), false, `${pid}`);
    }
    for (const pid of [one.terminal.pid!, one.job, two.pid!]) await reaped(pid);
    await one.view.done;
    assert.equal(await two.exited, null);
    await assert.rejects(session.terminal(), sdk.SessionEndedError);
  });

  it("output survives a reconnect within the lease, no byte lost or doubled", SLOW, async () => {
    const session = await newSession();
    const go = join(dir, `go-${session.id}`);
    const printed = join(dir, `printed-${session.id}`);
    const more = join(dir, `more-${session.id}`);
    const script = [
      "echo start",
      `while [ ! -e ${go} ]; do sleep 0.01; done`,
      "seq 1 20000",
      `touch ${printed}`,
      `while [ ! -e ${more} ]; do sleep 0.01; done`,
      "seq 20001 20100",
      "exit 4",
    ].join("\n");
    const terminal = await session.terminal({ argv: ["bash", "-c", script] });
    const view = screen(terminal);
    await view.until(/start\r\n/);
    // Cut the connection and hold the executor's reconnect until its output was printed.
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    const disconnected = new Promise<void>((resolve) => {
      const listener = harness.onExecutor((event) => {
        if (event.type === "disconnected") {
          listener.dispose();
          resolve();
        }
      });
    });
    assert.ok(proxy.cut() > 0);
    await disconnected;
    writeFileSync(go, "");
    await fileExists(printed);
    const back = new Promise<void>((resolve) => {
      const listener = harness.onExecutor((event) => {
        if (event.type === "reconnected") {
          listener.dispose();
          resolve();
        }
      });
    });
    gate = undefined;
    open();
    await back;
    await view.until(/\r\n20000\r\n/);
    writeFileSync(more, "");
    assert.equal(await terminal.exited, 4);
    await view.done;
    const expected = ["start", ...Array.from({ length: 20100 }, (_, i) => String(i + 1))];
    assertSameText(view.text, expected.map((line) => `${line}\r\n`).join(""), terminal);
    assert.equal(terminal.lostBytes, 0);
    assert.equal(session.state, "ready", "the session lived through the reconnect");
  });
});
