/**
 * Terminals are processes of their session like any other: `terminal.open`'s own `env` goes
 * through the child-environment policy (its `drop` list, no secret of the executor's), and a
 * terminal's program runs in a cgroup of the session (where a writable cgroup v2 exists), so
 * that what it starts with `setsid` is ended by `terminal.close`, by the program's own exit and
 * by `session.stop` before `session.ended`. Through the public API: `serveMachine` with this
 * runtime's PTYs (node-pty on Node and Deno, `Bun.spawn({ terminal })` on Bun) on an
 * `ExecutorClient`, a real `Harness` over a real WebSocket on 127.0.0.1. Liveness is read from
 * the pids themselves (a zombie counts as gone), never by waiting a while.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CgroupTree, ownCgroupDirectory } from "../../executor/machine/cgroup.node.ts";
import type { PtyHost } from "../../executor/machine/pty.ts";
import type { Session, Terminal } from "../../harness/node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { alive, environOf, pidFrom, SECRETS, startMachine, until } from "./machine-fixture.ts";

const pty: PtyHost = "Bun" in globalThis
  ? (await import("../../executor/machine/pty.bun.ts")).bunPty
  : (await import("../../executor/machine/pty.node.ts")).nodePty;
const cgroupsHere = (await CgroupTree.open()) !== undefined;
/** An interactive bash without start-up files, its prompt known. */
const BASH = ["bash", "--norc", "--noprofile", "-i"];
const BASH_ENV = { PS1: "$ " };

/** The session id of a process (field 6 of `/proc/<pid>/stat`). */
function sessionOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[3]);
}

/** The cgroup v2 directory a process is in (its `0::` line under the executor's cgroup). */
function cgroupDirOf(pid: number): string | undefined {
  const line = readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n")
    .find((entry) => entry.startsWith("0::"));
  const ours = line?.match(/\/(bma-\d+-[0-9a-f]{8}-s\d+\/t\d+)$/)?.[1];
  return ours ? join(ownCgroupDirectory()!, ours) : undefined;
}

/** Collects a terminal's text as it arrives; `until` waits for a string in it. */
function screen(terminal: Terminal) {
  let text = "";
  let ended = false;
  let wake: (() => void) | undefined;
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
    async until(wanted: string): Promise<void> {
      while (!text.includes(wanted)) {
        if (ended) throw new Error(`output ended without ${wanted}: ${JSON.stringify(text)}`);
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

for (const cgroups of [true, false]) {
  const withCgroups = cgroups && cgroupsHere;
  const mode = withCgroups ? "in a cgroup of the session" : "process groups only";
  describe(`terminals are reaped like the session's other processes (${mode})`, {
    timeout: 60_000,
  }, () => {
    const fx = new Fixtures();
    afterEach(() => fx.cleanup());

    /**
     * A bash on a terminal that started a job ignoring SIGHUP and SIGTERM in its own process
     * group and, with cgroups, two `setsid` descendants (out of the terminal's session): one
     * plain, one that ignores SIGHUP and SIGTERM as well.
     */
    async function terminalWithJobs() {
      const started = await startMachine(fx, { machine: { pty, cgroups } });
      const { dir, session } = started;
      const terminal = await session.terminal({ argv: BASH, env: BASH_ENV });
      const view = screen(terminal);
      await view.until("$ ");
      const jobs = [
        `(trap '' HUP TERM; echo $BASHPID > ${join(dir, "job.pid")}; exec sleep 1000) &`,
        ...withCgroups
          ? [
            `setsid sh -c 'echo $$ > ${join(dir, "setsid.pid")}; exec sleep 1000' &`,
            `setsid sh -c 'trap "" HUP TERM; echo $$ > ${join(dir, "stubborn.pid")}; ` +
            `exec sleep 1000' &`,
          ]
          : [],
      ];
      await terminal.write(`${jobs.join(" ")}\r`);
      const job = await pidFrom(join(dir, "job.pid"));
      const escaped = withCgroups
        ? [await pidFrom(join(dir, "setsid.pid")), await pidFrom(join(dir, "stubborn.pid"))]
        : [];
      const pids = [terminal.pid!, job, ...escaped];
      for (const pid of pids) assert.equal(alive(pid), true, `${pid} runs`);
      for (const pid of escaped) {
        assert.notEqual(sessionOf(pid), terminal.pid, "the setsid descendant left the terminal");
      }
      return { ...started, session, terminal, view, pids };
    }

    it("terminal.close answers once every process of the terminal is gone", async () => {
      const { terminal, view, pids } = await terminalWithJobs();
      const leaf = withCgroups ? cgroupDirOf(terminal.pid!) : undefined;
      if (withCgroups) assert.ok(leaf && existsSync(leaf), "the program is in a session cgroup");
      assert.deepEqual(await terminal.close(), { closed: true, exit_code: null });
      for (const pid of pids) assert.equal(alive(pid), false, `${pid} is gone when close answers`);
      if (leaf) assert.equal(existsSync(leaf), false, "the terminal's cgroup is removed");
      await view.done;
    });

    it("session.stop: every process of its terminals is gone when session.ended arrives", async () => {
      const { session, pids } = await terminalWithJobs();
      const other = await session.terminal({ argv: ["sleep", "1000"] });
      await session.stop("done", { graceMs: 200 });
      for (const pid of [...pids, other.pid!]) {
        assert.equal(alive(pid), false, `${pid} is gone before session.ended`);
      }
      assert.equal(await other.exited, null);
    });

    if (withCgroups) {
      it("a program that exits by itself takes its setsid descendants with it", async () => {
        const { dir, session } = await startMachine(fx, { machine: { pty, cgroups } });
        const pidFile = join(dir, "left.pid");
        const terminal = await session.terminal({
          argv: ["bash", "-c", `setsid sh -c 'echo $$ > ${pidFile}; exec sleep 1000' & wait`],
        });
        const pid = await pidFrom(pidFile);
        assert.notEqual(sessionOf(pid), terminal.pid);
        process.kill(terminal.pid!, "SIGKILL");
        assert.equal(await terminal.exited, null);
        await until(() => !alive(pid));
        await session.stop("done");
      });
    }
  });
}

describe(
  "terminal.open's env goes through the child-environment policy",
  { timeout: 60_000 },
  () => {
    const fx = new Fixtures();
    afterEach(() => fx.cleanup());

    /** A terminal that prints its environment, then stays (as `sleep`) for its /proc entry. */
    async function environmentOf(session: Session, env: Record<string, string>) {
      const terminal = await session.terminal({
        argv: ["bash", "--norc", "--noprofile", "-c", "env; echo END-OF-ENV; exec sleep 1000"],
        env,
      });
      const view = screen(terminal);
      await view.until("END-OF-ENV");
      const environ = await environOf(terminal.pid!, ["sleep", "1000"]);
      await terminal.close();
      return { printed: view.text, environ };
    }

    it("a dropped variable and a value holding the executor's secret reach neither env nor /proc/<pid>/environ", async () => {
      const { session } = await startMachine(fx, {
        machine: { pty, environment: { drop: ["DROPPED_*"] } },
      });
      const { printed, environ } = await environmentOf(session, {
        DROPPED_BY_POLICY: "dropped-value",
        SMUGGLED_KEY: `Bearer ${SECRETS.environmentKey}`,
        CALL_PLAIN: "call-value",
      });
      for (const [what, text] of [["env", printed], ["/proc/<pid>/environ", environ]]) {
        assert.ok(!text.includes(SECRETS.environmentKey), `${what} holds the environment key`);
        assert.ok(!text.includes("DROPPED_BY_POLICY"), `${what} holds the dropped variable`);
        assert.ok(!text.includes("dropped-value"), `${what} holds the dropped value`);
        assert.ok(!text.includes("SMUGGLED_KEY"), `${what} holds the variable with the secret`);
        // What the policy lets through still arrives, and TERM defaults as the contract says.
        assert.match(text, /CALL_PLAIN=call-value/, what);
        assert.match(text, /TERM=xterm-256color/, what);
      }
    });

    it("the request's TERM wins over the default", async () => {
      const { session } = await startMachine(fx, { machine: { pty } });
      assert.match((await environmentOf(session, { TERM: "vt100" })).environ, /(^|\0)TERM=vt100\0/);
    });
  },
);
