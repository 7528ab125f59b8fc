/**
 * The file tools on what is not a plain, still file, through the wire (a `Harness` over a real
 * WebSocket, an in-process executor serving `serveMachine` on a real temp workdir): a `read`
 * that is canceled or times out stops scanning, a file that grows while it is read is read up to
 * the size it had when opened, and FIFOs and live Unix sockets are refused by `read`, `write` and
 * `edit` and left as they are.
 *
 * The executor runs in this process, so whether a `read` still scans is seen in its open file
 * descriptors (`/proc/self/fd`): Linux only.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { Fixtures, machineSession } from "./files-fixture.ts";
import { until } from "../helpers/executor-fixture.ts";
import type { ToolCallResult } from "../../harness/mod.ts";

/** How many of this process's descriptors are open on `path`. */
function descriptorsOn(path: string): number {
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) count++;
    } catch {
      // closed since listed
    }
  }
  return count;
}

/** Bytes this process has read so far with read(2) and pread(2), from any file. */
function bytesReadSoFar(): number {
  return Number(/^rchar: (\d+)$/m.exec(readFileSync("/proc/self/io", "utf8"))?.[1]);
}

const GIB = 2 ** 30;

describe("file tools on special and moving files", {
  timeout: 120_000,
  skip: process.platform !== "linux",
}, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("read: a canceled call and a timed-out one stop scanning and close the file", async () => {
    const { root, session } = await machineSession(fx);
    const big = join(root, "big.txt");
    writeFileSync(big, "first\n");
    truncateSync(big, 16 * GIB); // sparse: no disk, but minutes of scanning for a line past it
    writeFileSync(join(root, "small.txt"), "x\n");
    const real = realpathSync(big);
    /**
     * Round trips to the same executor until the read has let go of the file (at most 100),
     * then event-loop turns: in one fresh-clone run (Bun, the three runtimes' stages side by
     * side) the file was still open after the 100; a scan that goes on holds it for minutes (16
     * GiB), and `until` gives up first.
     */
    async function released(): Promise<number> {
      for (let round = 0; round < 100 && descriptorsOn(real) > 0; round++) {
        const small = await session.tools.read.call({ path: "small.txt" });
        assert.equal(small.structured_content?.total_lines, 1);
      }
      await until(() => descriptorsOn(real) === 0, "the read let go of the file");
      return descriptorsOn(real);
    }

    const canceled = session.tools.read.call({ path: "big.txt", offset: 1e9, limit: 1 }, {
      toolCallId: "c_read_big",
    });
    await until(() => descriptorsOn(real) > 0, "the read opened the file");
    assert.deepEqual(await session.cancelTool("c_read_big"), { canceled: true });
    assert.equal((await canceled).outcome, "canceled");
    // The executor has seen the cancel: the read ends at its next chunk.
    assert.equal(await released(), 0, "the canceled read still holds the file: still scanning");

    const timed = session.tools.read.call({ path: "big.txt", offset: 1e9, limit: 1 }, {
      timeoutMs: 1_000,
    });
    await until(() => descriptorsOn(real) > 0, "the read opened the file");
    assert.equal((await timed).outcome, "timed_out");
    assert.equal(await released(), 0, "the timed-out read still holds the file: still scanning");
  });

  it("read: a file that grows while it is read is read up to the size it had when opened", async () => {
    const { root, session } = await machineSession(fx);
    const file = join(root, "growing.log");
    writeFileSync(file, "line 1\nline 2\n");
    truncateSync(file, GIB / 4); // line 3: zeros, sparse
    const real = realpathSync(file);
    const read = session.tools.read.call({ path: "growing.log", offset: 1e9 });
    await until(() => descriptorsOn(real) > 0, "the read opened the file");
    // The read takes the file's size just after opening it: the growth comes once it reads
    // chunks (8 MiB read by this process, where nothing else reads that much).
    const before = bytesReadSoFar();
    await until(() => bytesReadSoFar() - before >= 8 * 2 ** 20, "the read reads the file");
    // What is appended now is past the size it took: neither read nor counted (a file that
    // keeps growing would otherwise be read for as long as it grows).
    appendFileSync(file, "\nappended\n");
    assert.deepEqual((await read).structured_content, {
      content: "",
      start_line: 1e9,
      total_lines: 3,
    });
  });

  /** A workdir with a FIFO, the socket of a live server, and links to both. */
  async function specials() {
    const machine = await machineSession(fx);
    const { root } = machine;
    execFileSync("mkfifo", [join(root, "fifo")]);
    const server = createServer((socket) => socket.end("alive\n"));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(join(root, "sock"), () => resolve());
    });
    fx.defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
    symlinkSync("fifo", join(root, "link-to-fifo"));
    symlinkSync("sock", join(root, "link-to-sock"));
    return machine;
  }

  /** Asserts a tool error "not a regular file: <path>" that shows no internal path. */
  function notRegular(
    result: Pick<ToolCallResult, "outcome" | "is_error" | "content">,
    what: string,
    path: string,
  ) {
    const shown = JSON.stringify(result);
    assert.equal(result.outcome, "completed", `${what} ${path}: ${shown}`);
    assert.equal(result.is_error, true, `${what} ${path}: ${shown}`);
    assert.deepEqual(result.content, [{ type: "text", text: `not a regular file: ${path}` }]);
    assert.doesNotMatch(shown, /\/proc\//, `${what} ${path}: no internal path`);
  }

  it("read and edit of a Unix socket or a FIFO are tool errors naming the caller's path", async () => {
    const { session } = await specials();
    for (const path of ["sock", "link-to-sock", "fifo", "link-to-fifo"]) {
      notRegular(await session.tools.read.call({ path }), "read", path);
      notRegular(
        await session.tools.edit.call({ path, old_string: "a", new_string: "b" }),
        "edit",
        path,
      );
    }
  });

  it("write and edit refuse a FIFO and a live Unix socket, and leave them as they are", async () => {
    const { root, session } = await specials();
    for (const path of ["fifo", "sock", "link-to-fifo", "link-to-sock"]) {
      notRegular(await session.tools.write.call({ path, content: "replaced\n" }), "write", path);
      notRegular(
        await session.tools.edit.call({ path, old_string: "replaced", new_string: "x" }),
        "edit",
        path,
      );
    }
    assert.equal(lstatSync(join(root, "fifo")).isFIFO(), true);
    assert.equal(lstatSync(join(root, "sock")).isSocket(), true);
    assert.equal(lstatSync(join(root, "link-to-fifo")).isSymbolicLink(), true);
    assert.equal(lstatSync(join(root, "link-to-sock")).isSymbolicLink(), true);
    const reply = await new Promise<string>((resolve, reject) => {
      let text = "";
      connect(join(root, "sock"))
        .on("data", (data) => text += data)
        .on("end", () => resolve(text))
        .on("error", reject);
    });
    assert.equal(reply, "alive\n", "the server still listens on its socket");
    // A link to a regular file inside the workdir is written through, as before; the link stays.
    writeFileSync(join(root, "target.txt"), "a\n");
    symlinkSync("target.txt", join(root, "link.txt"));
    const written = await session.tools.write.call({ path: "link.txt", content: "b\n" });
    assert.equal(written.is_error, false);
    assert.equal(readFileSync(join(root, "target.txt"), "utf8"), "b\n");
    const edited = await session.tools.edit.call({
      path: "link.txt",
      old_string: "b",
      new_string: "c",
    });
    assert.equal(edited.is_error, false);
    assert.equal(readFileSync(join(root, "target.txt"), "utf8"), "c\n");
    assert.equal(lstatSync(join(root, "link.txt")).isSymbolicLink(), true);
  });
});
