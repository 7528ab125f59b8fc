/** The bash tool and the process capability against real child processes. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Workdir } from "../../executor/machine/workdir.node.ts";
import { BashTimeoutError, runBash } from "../../executor/machine/bash.node.ts";
import { ProcessTable } from "../../executor/machine/processes.node.ts";
import { NotFoundError, type ProcessOutputParams } from "../../mod.ts";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 10));
}

describe("bash tool", { timeout: 30_000 }, () => {
  let dir: string;
  let workdir: Workdir;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "bma-bash-"));
    workdir = new Workdir(dir);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("runs in the workdir and returns stdout, stderr and the exit code", async () => {
    const result = await runBash({ command: "pwd; echo err >&2; printf 'é'; exit 3" }, { workdir });
    assert.equal(result.stdout, `${await workdir.realRoot()}\né`);
    assert.equal(result.stderr, "err\n");
    assert.equal(result.exit_code, 3);
  });

  it("streams output as it arrives and applies env and cwd", async () => {
    const seen: string[] = [];
    const result = await runBash(
      {
        command: "mkdir -p sub && cd sub && echo $GREETING; echo two",
        cwd: ".",
        env: { GREETING: "hi" },
      },
      { workdir, onOutput: (stream, text) => seen.push(`${stream}:${text}`) },
    );
    assert.equal(result.stdout, "hi\ntwo\n");
    assert.equal(seen.join("").replace(/stdout:/g, ""), "hi\ntwo\n");
    await assert.rejects(runBash({ command: "true", cwd: "../.." }, { workdir }));
  });

  it("cancel ends the whole process group, children included", async () => {
    const controller = new AbortController();
    const pidFile = join(dir, "child.pid");
    const running = runBash(
      { command: `sleep 30 & echo $! > ${pidFile}; wait` },
      { workdir, signal: controller.signal, graceMs: 200 },
    );
    await until(() => existsSync(pidFile));
    const { readFileSync } = await import("node:fs");
    await until(() => readFileSync(pidFile, "utf8").trim() !== "");
    const child = Number(readFileSync(pidFile, "utf8"));
    assert.ok(alive(child));
    controller.abort(new Error("canceled by test"));
    await assert.rejects(running, /canceled by test/);
    await until(() => !alive(child));
  });

  it("a command ignoring SIGTERM is killed after the grace period", async () => {
    const controller = new AbortController();
    const marker = join(dir, "trap.ready");
    const running = runBash(
      { command: `trap '' TERM; touch ${marker}; while true; do sleep 0.05; done` },
      { workdir, signal: controller.signal, graceMs: 100 },
    );
    await until(() => existsSync(marker));
    controller.abort();
    await assert.rejects(running);
  });

  it("timeout_ms ends the group and reports what was printed", async () => {
    const error = await runBash({ command: "echo started; sleep 30", timeout_ms: 200 }, {
      workdir,
      graceMs: 100,
    })
      .catch((e) => e);
    assert.ok(error instanceof BashTimeoutError);
    assert.equal(error.partial.stdout, "started\n");
  });
});

describe("process capability", { timeout: 30_000 }, () => {
  let dir: string;
  let table: ProcessTable;
  const output: ProcessOutputParams[] = [];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "bma-proc-"));
    table = new ProcessTable({
      sessionId: "ses_1",
      workdir: new Workdir(dir),
      graceMs: 200,
      onOutput: (p) => void output.push(p),
    });
  });
  after(async () => {
    await table.closeAll();
    rmSync(dir, { recursive: true, force: true });
  });

  it("starts by argv, takes stdin, streams output with offsets, and reads it back", async () => {
    const started = await table.start({ session_id: "ses_1", argv: ["cat"], process_id: "p_cat" });
    assert.equal(started.process_id, "p_cat");
    assert.equal(
      (await table.start({ session_id: "ses_1", argv: ["cat"], process_id: "p_cat" })).duplicate,
      true,
    );
    await table.write({ session_id: "ses_1", process_id: "p_cat", data: "hello " });
    await table.write({
      session_id: "ses_1",
      process_id: "p_cat",
      data: "d29ybGQ=",
      encoding: "base64",
      eof: true,
    });
    const waited = await table.wait({
      session_id: "ses_1",
      process_id: "p_cat",
      timeout_ms: 5_000,
    });
    assert.deepEqual(waited, { process_id: "p_cat", exited: true, exit_code: 0, signal: null });
    const read = await table.read({ session_id: "ses_1", process_id: "p_cat", stream: "stdout" });
    assert.equal(read.data, "hello world");
    assert.equal(read.next_offset, 11);
    assert.equal(read.eof, true);
    const partial = await table.read({
      session_id: "ses_1",
      process_id: "p_cat",
      stream: "stdout",
      offset: 6,
      max_bytes: 3,
    });
    assert.deepEqual([partial.offset, partial.data, partial.next_offset, partial.eof], [
      6,
      "wor",
      9,
      false,
    ]);
    const streamed = output.filter((o) => o.process_id === "p_cat" && o.stream === "stdout");
    assert.equal(streamed.map((o) => o.data).join(""), "hello world");
    assert.equal(streamed.at(-1)?.eof, true);
    let expected = 0;
    for (const chunk of streamed) {
      assert.equal(chunk.offset, expected, "offsets are contiguous");
      expected += new TextEncoder().encode(chunk.data).byteLength;
    }
  });

  it("streams a long-running process's output and kills it with its group on signal", async () => {
    await table.start({
      session_id: "ses_1",
      process_id: "p_loop",
      argv: ["bash", "-c", "for i in $(seq 1 1000); do echo tick $i; sleep 0.02; done"],
    });
    // Long poll: wait for output beyond offset 0.
    const first = await table.read({
      session_id: "ses_1",
      process_id: "p_loop",
      stream: "stdout",
      wait_ms: 10_000,
    });
    assert.match(first.data, /^tick 1\n/);
    const later = await table.read({
      session_id: "ses_1",
      process_id: "p_loop",
      stream: "stdout",
      offset: first.next_offset,
      wait_ms: 10_000,
    });
    assert.equal(later.offset, first.next_offset);
    assert.match(later.data, /^tick \d+\n/);
    assert.equal(table.list().processes.find((p) => p.process_id === "p_loop")?.running, true);
    assert.deepEqual(
      table.signal({ session_id: "ses_1", process_id: "p_loop", signal: "SIGKILL", group: true }),
      { delivered: true },
    );
    const waited = await table.wait({
      session_id: "ses_1",
      process_id: "p_loop",
      timeout_ms: 10_000,
    });
    assert.equal(waited.exited, true);
    assert.equal(waited.signal, "SIGKILL");
    assert.deepEqual(table.signal({ session_id: "ses_1", process_id: "p_loop" }), {
      delivered: false,
    });
  });

  it("wait times out with exited=false; closeAll ends everything", async () => {
    await table.start({ session_id: "ses_1", process_id: "p_sleep", argv: ["sleep", "30"] });
    const waited = await table.wait({ session_id: "ses_1", process_id: "p_sleep", timeout_ms: 50 });
    assert.deepEqual(waited, { process_id: "p_sleep", exited: false });
    await table.closeAll();
    assert.equal(table.list().processes.every((p) => !p.running), true);
  });

  it("unknown ids and bad programs are typed protocol errors", async () => {
    assert.throws(() => table.signal({ session_id: "ses_1", process_id: "nope" }), NotFoundError);
    await assert.rejects(
      table.start({ session_id: "ses_1", argv: ["/no/such/program"] }),
      NotFoundError,
    );
    await assert.rejects(
      table.start({ session_id: "ses_1", argv: ["true"], cwd: "../" }),
      (e: any) => e.code === -32001,
    );
  });
});
