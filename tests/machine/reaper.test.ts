/**
 * The executor's reaper (`executor/machine/reaper.node.ts`) on its own: a process registers
 * three sessions (each a `sleep` that leads its own) with it, withdraws one, registers another
 * twice and withdraws it once, and is killed (`kill -9`). The reaper ends the registered ones
 * and never signals the withdrawn one: a withdrawn number may belong to someone else by then.
 * The test waits for the reaper itself to exit (its work is done then), not for a while.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { printed, RUNTIME, spawnTs } from "../helpers/runtime-command.ts";
import { alive, until } from "./machine-fixture.ts";

/** The children of `parent` that run `/bin/sh` (Linux): tsx's esbuild service is not one. */
function shellsUnder(parent: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const command = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")[0];
      if (ppid === parent && command === "/bin/sh") found.push(Number(entry));
    } catch { /* gone */ }
  }
  return found;
}

describe(`the executor's reaper (${RUNTIME})`, {
  timeout: 60_000,
  skip: process.platform !== "linux" && "reads /proc",
}, () => {
  const started: ChildProcess[] = [];
  afterEach(() => {
    for (const child of started.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  });

  /** A `sleep` leading a session of its own, as the executor starts its processes. */
  function leader(): number {
    const child = spawn("sleep", ["1000"], { detached: true, stdio: "ignore" });
    started.push(child);
    return child.pid!;
  }

  it("kill -9 of its executor: the registered sessions end, a withdrawn one is never signalled", async () => {
    const [kept, withdrawn, twice] = [leader(), leader(), leader()];
    const program = spawnTs(
      "tests/machine/reaper-program.ts",
      [kept, withdrawn, twice].map(String),
    );
    started.push(program);
    await printed(program, "ready");
    // Started: Bun's spawn returns before its child has run `/bin/sh` (its command line is empty
    // until then), so the shell is waited for. (The next test shows the reaper knew of the
    // sessions at once.)
    await until(() => shellsUnder(program.pid!).length > 0);
    const reapers = shellsUnder(program.pid!);
    assert.equal(reapers.length, 1, "one reaper, started on first use");
    const exited = new Promise((resolve) => program.once("exit", resolve));
    program.kill("SIGKILL");
    await exited;
    await until(() => !alive(reapers[0]));
    assert.equal(alive(kept), false, "a registered session ends");
    assert.equal(alive(twice), false, "one of its two holders still held it");
    assert.equal(alive(withdrawn), true, "a withdrawn session is left alone");
  });

  it("kill -9 in the same turn as the registrations: the reaper still knew of them", async () => {
    const [kept, withdrawn, twice] = [leader(), leader(), leader()];
    const program = spawnTs(
      "tests/machine/reaper-program.ts",
      [...[kept, withdrawn, twice].map(String), "at-once"],
    );
    started.push(program);
    const exited = new Promise((resolve) =>
      program.once("exit", (_code, signal) => resolve(signal))
    );
    assert.equal(await exited, "SIGKILL");
    // The reaper ends them within its grace; an unknown registration would leave them running.
    for (const bound = Date.now() + 30_000; Date.now() < bound;) {
      if (!alive(kept) && !alive(twice)) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(alive(kept), false, "a session registered just before the kill ends");
    assert.equal(alive(twice), false, "one of its two holders still held it");
    assert.equal(alive(withdrawn), true, "a withdrawn session is left alone");
  });
});
