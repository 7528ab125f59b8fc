/**
 * A session's processes end before `session.ended`, and a canceled call's processes end with
 * it: real processes that ignore SIGTERM and outlive their group leader (which exits on
 * SIGTERM), and — where the executor has a cgroup — ones that left the process group with
 * `setsid`. Through the public API: a Harness over a real WebSocket, `serveMachine` on an
 * `ExecutorClient`. Liveness is checked on the pids themselves, never by waiting a while.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { readdirSync } from "node:fs";
import { CgroupTree, ownCgroupDirectory } from "../../executor/machine/cgroup.node.ts";
import { ManualClock } from "../../executor/node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { alive, pidFrom, startMachine, until } from "./machine-fixture.ts";

/** Starts a background child that ignores SIGTERM, writes its pid, then waits for it. */
const stubborn = (pidFile: string) =>
  `(trap '' TERM; echo $BASHPID > ${pidFile}; exec sleep 1000) & wait`;
/** The same, the child in a session and process group of its own. */
const escaped = (pidFile: string) =>
  `setsid sh -c 'trap "" TERM; echo $$ > ${pidFile}; exec sleep 1000' & wait`;

const cgroupsHere = (await CgroupTree.open()) !== undefined;

for (const cgroups of [true, false]) {
  const mode = cgroups ? "with cgroups where available" : "process groups only";
  describe(`session processes end before session.ended (${mode})`, { timeout: 60_000 }, () => {
    const fx = new Fixtures();
    afterEach(() => fx.cleanup());
    const start = (extra: Parameters<typeof startMachine>[1] = {}) =>
      startMachine(fx, { ...extra, machine: { cgroups, ...extra.machine } });

    it("session.stop: a TERM-ignoring grandchild of a bash call is gone when session.ended arrives", async () => {
      const { dir, session } = await start();
      const pidFile = join(dir, "grandchild.pid");
      const call = session.tools.bash.call({ command: stubborn(pidFile) });
      const pid = await pidFrom(pidFile);
      assert.equal(alive(pid), true);
      await session.stop("done", { graceMs: 200 });
      assert.equal(alive(pid), false, "the grandchild is gone before session.ended");
      assert.equal((await call).outcome, "canceled");
    });

    it("tool.cancel in a one-shot session: the grandchild is gone when session.ended arrives", async () => {
      const { dir, session } = await start({ oneShot: true, sessionId: "ses_one_shot" });
      const pidFile = join(dir, "grandchild.pid");
      const controller = new AbortController();
      const call = session.tools.bash.call(
        { command: stubborn(pidFile) },
        { signal: controller.signal },
      ).catch((error) => error);
      const pid = await pidFrom(pidFile);
      controller.abort();
      assert.equal((await call).name, "RequestAbortedError");
      await session.ended;
      assert.equal(alive(pid), false, "the grandchild is gone before session.ended");
    });

    it("tool.cancel alone ends the call's grandchild, and the session goes on", async () => {
      const { dir, session } = await start();
      const pidFile = join(dir, "grandchild.pid");
      const call = session.tools.bash.call({ command: stubborn(pidFile) }, {
        toolCallId: "call_c",
      });
      const pid = await pidFrom(pidFile);
      assert.deepEqual(await session.cancelTool("call_c"), { canceled: true });
      assert.equal((await call).outcome, "canceled");
      await until(() => !alive(pid));
      const next = await session.tools.bash.call({ command: "echo still here" });
      assert.equal(next.structured_content?.stdout, "still here\n");
    });

    it("process.start: the leader and a TERM-ignoring grandchild are gone when session.ended arrives", async () => {
      const { dir, executor, session } = await start();
      const pidFile = join(dir, "grandchild.pid");
      const started = await executor.request("process.start", {
        session_id: session.id,
        process_id: "p_stubborn",
        argv: ["bash", "-c", stubborn(pidFile)],
      });
      const pid = await pidFrom(pidFile);
      await session.stop("done", { graceMs: 200 });
      assert.equal(alive(pid), false, "the grandchild is gone before session.ended");
      assert.equal(alive(started.pid!), false, "the leader is gone before session.ended");
    });

    it("process.start timeout_ms ends the whole group, the TERM-ignoring grandchild included", async () => {
      // The timeout runs on an injected clock, struck once the grandchild is known to exist.
      const clock = new ManualClock();
      const { dir, executor, session } = await start({ machine: { clock } });
      const pidFile = join(dir, "grandchild.pid");
      await executor.request("process.start", {
        session_id: session.id,
        process_id: "p_timeout",
        argv: ["bash", "-c", stubborn(pidFile)],
        timeout_ms: 1_000,
      });
      const pid = await pidFrom(pidFile);
      assert.equal(alive(pid), true);
      await clock.advance(1_000);
      const waited = await executor.request("process.wait", {
        session_id: session.id,
        process_id: "p_timeout",
      });
      assert.equal(waited.exited, true);
      await until(() => !alive(pid));
    });

    it("client.stop(): every process of every session is gone when it resolves", async () => {
      const { dir, client, executor, session } = await start();
      const pidFile = join(dir, "grandchild.pid");
      const call = session.tools.bash.call({ command: stubborn(pidFile) }).catch((e) => e);
      const pid = await pidFrom(pidFile);
      const started = await executor.request("process.start", {
        session_id: session.id,
        argv: ["sleep", "1000"],
      });
      await client.stop();
      assert.equal(alive(pid), false);
      assert.equal(alive(started.pid!), false);
      await call;
    });

    if (cgroups && cgroupsHere) {
      it("a setsid descendant of a bash call is gone when session.ended arrives (cgroup)", async () => {
        const { dir, session } = await start();
        const pidFile = join(dir, "escaped.pid");
        const call = session.tools.bash.call({ command: escaped(pidFile) }).catch((e) => e);
        const pid = await pidFrom(pidFile);
        assert.equal(alive(pid), true);
        await session.stop("done", { graceMs: 200 });
        assert.equal(alive(pid), false, "the setsid descendant is gone before session.ended");
        await call;
      });

      it("the session's cgroups are removed once session.ended arrives", async () => {
        const ours = () =>
          new Set(
            readdirSync(ownCgroupDirectory()!).filter((name) =>
              name.startsWith(`bma-${process.pid}-`)
            ),
          );
        const before = ours();
        const { dir, executor, session } = await start();
        const pidFile = join(dir, "grandchild.pid");
        const call = session.tools.bash.call({ command: stubborn(pidFile) }).catch((e) => e);
        await pidFrom(pidFile);
        await executor.request("process.start", { session_id: session.id, argv: ["sleep", "100"] });
        await executor.request("process.start", { session_id: session.id, argv: ["/no/such"] })
          .catch(() => {});
        const during = [...ours()].filter((name) => !before.has(name));
        assert.equal(during.length, 1, "one cgroup for the session");
        await session.stop("done", { graceMs: 200 });
        assert.deepEqual([...ours()].filter((name) => !before.has(name)), []);
        await call;
      });

      it("tool.cancel ends a setsid descendant too (cgroup), before the one-shot session ends", async () => {
        const { dir, session } = await start({ oneShot: true, sessionId: "ses_escape" });
        const pidFile = join(dir, "escaped.pid");
        const call = session.tools.bash.call({ command: escaped(pidFile) }, {
          toolCallId: "c_e",
        });
        const pid = await pidFrom(pidFile);
        await session.cancelTool("c_e");
        assert.equal((await call).outcome, "canceled");
        await session.ended;
        assert.equal(alive(pid), false);
      });

      it("a setsid descendant of process.start is gone when session.ended arrives (cgroup)", async () => {
        const { dir, executor, session } = await start();
        const pidFile = join(dir, "escaped.pid");
        await executor.request("process.start", {
          session_id: session.id,
          argv: ["bash", "-c", escaped(pidFile)],
        });
        const pid = await pidFrom(pidFile);
        // The leader may even exit: the descendant is still the session's.
        await executor.request("process.signal", {
          session_id: session.id,
          process_id: (await executor.request("process.list", { session_id: session.id }))
            .processes[0].process_id,
          signal: "SIGKILL",
          group: false,
        });
        await session.stop("done", { graceMs: 200 });
        assert.equal(alive(pid), false);
      });
    }
  });
}
