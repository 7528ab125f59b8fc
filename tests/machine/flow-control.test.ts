/**
 * A harness that stops reading does not grow the executor: its lossy notifications
 * (`terminal.output`, `process.output`) are dropped while the link is congested, not queued, and
 * the terminal's byte offsets account for every byte the harness never saw. The executor is a
 * process of this runtime (`flow-executor.ts`, whose memory is measured); it reaches a real
 * harness through a proxy on 127.0.0.1 that stops reading what the executor sends (its socket
 * buffers fill, as behind a slow link). How long a flood runs is measured in what the program
 * wrote (`/proc/<pid>/io`), not in time. The executor's growth is measured between an early and a
 * late part of the flood, each as the lowest RSS seen: any runtime's heap grows its young
 * generation by tens of MiB as soon as it allocates fast, and swings by as much between
 * collections, whether the harness reads or not; queueing grows it by at least a byte for each
 * byte written, on and on.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import type * as Entry from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { RUNTIME, spawnTs } from "../helpers/runtime-command.ts";
import { FLOOD_MESSAGE } from "./flood-message.ts";

const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const MiB = 1024 * 1024;
/**
 * Whether the executor grew by less than half of what the flood wrote between the two parts
 * measured: queueing the output grows it by more than the bytes written (a notification's JSON
 * holds each byte once or more); a garbage-collected heap's own swing is well under this.
 */
function assertNotQueued(early: number, late: number, writtenBetween: number): void {
  const grown = late - early;
  assert.ok(
    grown < writtenBetween / 2,
    `grew ${(grown / MiB).toFixed(1)} MiB while ${writtenBetween / MiB} MiB were written`,
  );
}

/** What the executor may take in before it holds back an MCP server (its queue and buffers). */
const MAX_TAKEN_BYTES = 64 * MiB;

/** A field of `/proc/<pid>/<file>` (`wchar` of `io`, `VmRSS` of `status`, in bytes). */
function procField(pid: number, file: "io" | "status", name: string): number {
  const match = new RegExp(`^${name}:\\s+(\\d+)( kB)?$`, "m").exec(
    readFileSync(`/proc/${pid}/${file}`, "latin1"),
  );
  if (!match) throw new Error(`no ${name} in /proc/${pid}/${file}`);
  return Number(match[1]) * (match[2] ? 1024 : 1);
}

const written = (pid: number) => procField(pid, "io", "wchar");
const rss = (pid: number) => procField(pid, "status", "VmRSS");

async function untilWritten(pid: number, bytes: number): Promise<void> {
  while (written(pid) < bytes) await new Promise((r) => setTimeout(r, 20));
}

/**
 * The executor's memory while `writer` writes its bytes from `from` to `to`: the lowest RSS seen
 * (what the heap keeps after its collections; between them a heap swings by tens of MiB).
 */
async function keptWhile(executor: number, writer: number, from: number, to: number) {
  await untilWritten(writer, from);
  let lowest = Infinity;
  do {
    lowest = Math.min(lowest, rss(executor));
    await new Promise((r) => setTimeout(r, 10));
  } while (written(writer) < to);
  return lowest;
}

/** The pid of the child of `parent` running exactly `argv`, once there is one. */
async function childRunning(parent: number, argv: string[]): Promise<number> {
  const wanted = `${argv.join("\0")}\0`;
  for (;;) {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (readFileSync(`/proc/${entry}/cmdline`, "utf8") !== wanted) continue;
        if (procField(Number(entry), "status", "PPid") === parent) return Number(entry);
      } catch { /* gone */ }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe(`flow control on ${RUNTIME}`, {
  timeout: 180_000,
  skip: process.platform !== "linux" && "reads /proc",
}, () => {
  let dir: string;
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let proxy: ChaosProxy;
  let child: ChildProcess;
  let executor: Entry.ExecutorHandle;
  let sessions = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-flow-"));
    // Heartbeats wait behind the stall too: a lease long enough for the flood.
    harness = new sdk.Harness({ insecureNoAuth: true, heartbeatIntervalMs: 120_000 });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    proxy = await ChaosProxy.start(server.url);
    child = spawnTs("tests/machine/flow-executor.ts", [proxy.url, dir], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    executor = await harness.waitExecutor();
  });

  after(async () => {
    proxy?.resume();
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
    await harness?.close();
    await server?.close();
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function newSession(): Promise<Entry.Session> {
    const session = await executor.assignSession({ session_id: `ses_flow_${++sessions}` });
    await session.ready();
    return session;
  }

  it(
    "a terminal running yes: the executor stays small, its offsets account for every dropped byte",
    {
      timeout: 180_000,
    },
    async () => {
      const session = await newSession();
      // Output processing off (`-opost`): on some kernels the line discipline's \n to \r\n is
      // most of a PTY's cost, and the flood's bytes are what count.
      const terminal = await session.terminal({
        argv: ["sh", "-c", "stty -opost; read line; exec yes"],
      });
      const pid = terminal.pid!;
      let received = 0;
      const reading = (async () => {
        for await (const chunk of terminal.output()) received += chunk.byteLength;
      })();
      proxy.stall();
      // Its answer waits behind the stall: awaited once the proxy reads again.
      const typed = terminal.write("go\r");
      try {
        // Once the heap has grown to its working size (Deno's still grows by tens of MiB between
        // 24 and 64 MiB of output, then no more), and 128 MiB later. Each part spans 16 MiB of
        // output, so that its lowest RSS follows a collection even where the flood runs fast.
        const early = await keptWhile(child.pid!, pid, 64 * MiB, 80 * MiB);
        const late = await keptWhile(child.pid!, pid, 208 * MiB, 224 * MiB);
        assertNotQueued(early, late, 128 * MiB);
      } finally {
        // Else a failure leaves the link stalled, and the next tests wait on it.
        proxy.resume();
      }
      await typed;
      await terminal.close();
      await reading;
      assert.ok(terminal.lostBytes > 0, "the harness cannot have received the whole flood");
      assert.equal(received + terminal.lostBytes, terminal.offset);
    },
  );

  it("an MCP server that floods: its output waits in the server, which blocks on its write", {
    timeout: 180_000,
  }, async () => {
    const session = await newSession();
    const channel = await session.mcp("flood");
    let received = 0;
    channel.onmessage = () => void received++;
    await channel.start();
    proxy.stall();
    try {
      // Its first line in starts the flood (the harness's side of the link is not stalled).
      await channel.send({ jsonrpc: "2.0", method: "notifications/initialized" });
      const pid = await childRunning(child.pid!, ["yes", FLOOD_MESSAGE]);
      // Blocked: what it wrote stops growing (a pipe the executor no longer reads is full).
      let before = -1;
      for (let looks = 0; written(pid) !== before; looks++) {
        assert.ok(looks < 600, `still writing after ${written(pid)} bytes`);
        before = written(pid);
        await new Promise((r) => setTimeout(r, 100));
      }
      // What the executor took before it held back: its queue's bound and the sockets' buffers,
      // not the GiBs a pipe carries in the same while.
      assert.ok(before < MAX_TAKEN_BYTES, `the server wrote ${(before / MiB).toFixed(1)} MiB`);
    } finally {
      proxy.resume();
    }
    while (received === 0) await new Promise((r) => setTimeout(r, 20));
    assert.ok(executor.connected, "the connection stayed: nothing was dropped or closed");
    await channel.close();
    await session.stop();
  });

  it("process.start of yes: the executor stays small, and process.read serves its output", {
    timeout: 180_000,
  }, async () => {
    const session = await newSession();
    proxy.stall();
    // The answer waits behind the stall; the program is found by its command line meanwhile.
    const starting = executor.request("process.start", {
      session_id: session.id,
      process_id: "p_yes",
      argv: ["yes"],
    });
    try {
      const pid = await childRunning(child.pid!, ["yes"]);
      // Pipes are fast: a flood of GiBs, whose queueing would grow the executor by as much (1 GiB
      // between the two parts), and over which a heap may grow in steps of tens of MiB on its own
      // (V8's old space), more while it is young: the first part starts after 512 MiB. A longer
      // flood costs CPU on both ends of the pipe and tells no more.
      const early = await keptWhile(child.pid!, pid, 512 * MiB, 768 * MiB);
      const late = await keptWhile(child.pid!, pid, 1792 * MiB, 2048 * MiB);
      assertNotQueued(early, late, 1024 * MiB);
    } finally {
      proxy.resume();
    }
    await starting;
    const read = await executor.request("process.read", {
      session_id: session.id,
      process_id: "p_yes",
      stream: "stdout",
      max_bytes: 16,
    });
    assert.match(read.data, /^(y\n)+/);
    await session.stop();
  });
});
