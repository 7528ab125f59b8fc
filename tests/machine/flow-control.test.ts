/**
 * A harness that stops reading does not grow the executor: its lossy notifications
 * (`terminal.output`, `process.output`) are dropped while the link is congested, not queued, and
 * the terminal's byte offsets account for every byte the harness never saw. An executor of this
 * runtime (`serveMachine`) reaches a real harness through a proxy on 127.0.0.1 that stops
 * reading what the executor sends (its socket buffers fill, as behind a slow link). How long the
 * flood runs is measured in what the program wrote (`/proc/<pid>/io`), not in time.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const INFO = { name: "flow-control", os: "linux", arch: "amd64", version: "1.0.0" };
const MiB = 1024 * 1024;
/** Output written while the harness reads nothing: several times what the executor may grow. */
const FLOOD_BYTES = 256 * MiB;
const MAX_GROWTH_BYTES = 64 * MiB;

/** Bytes `pid` has written so far (`wchar` of `/proc/<pid>/io`). */
function written(pid: number): number {
  const match = /^wchar:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, "latin1"));
  return match ? Number(match[1]) : 0;
}

async function untilWritten(pid: number, bytes: number): Promise<void> {
  while (written(pid) < bytes) await new Promise((r) => setTimeout(r, 20));
}

describe(`flow control on ${RUNTIME}`, {
  timeout: 120_000,
  skip: process.platform !== "linux" && "reads /proc",
}, () => {
  let dir: string;
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let proxy: ChaosProxy;
  let client: Entry.ExecutorClient;
  let executor: Entry.ExecutorHandle;
  let sessions = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-flow-"));
    harness = new sdk.Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    proxy = await ChaosProxy.start(server.url);
    client = new sdk.ExecutorClient({ harnessUrl: proxy.url, executor: INFO });
    sdk.serveMachine(client, { workdir: dir, graceMs: 300 });
    await client.start();
    executor = await harness.waitExecutor();
  });

  after(async () => {
    proxy?.resume();
    await client?.stop();
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
    "a terminal running yes: the executor stays small, and its offsets account for every dropped byte",
    {
      timeout: 120_000,
    },
    async () => {
      const session = await newSession();
      const terminal = await session.terminal({ argv: ["sh", "-c", "read line; exec yes"] });
      const pid = terminal.pid!;
      let received = 0;
      const reading = (async () => {
        for await (const chunk of terminal.output()) received += chunk.byteLength;
      })();
      const rssBefore = process.memoryUsage().rss;
      proxy.stall();
      // Its answer waits behind the stall: awaited once the proxy reads again.
      const typed = terminal.write("go\r");
      await untilWritten(pid, FLOOD_BYTES);
      const grown = process.memoryUsage().rss - rssBefore;
      assert.ok(grown < MAX_GROWTH_BYTES, `grew ${(grown / MiB).toFixed(1)} MiB`);
      proxy.resume();
      await typed;
      await terminal.close();
      await reading;
      assert.ok(terminal.lostBytes > 0, "the harness cannot have seen all of the flood");
      assert.equal(received + terminal.lostBytes, terminal.offset);
    },
  );

  it("process.start of yes: the executor stays small, and process.read still serves its output", {
    timeout: 120_000,
  }, async () => {
    const session = await newSession();
    const rssBefore = process.memoryUsage().rss;
    proxy.stall();
    const starting = executor.request("process.start", {
      session_id: session.id,
      process_id: "p_yes",
      argv: ["yes"],
    });
    // The answer waits behind the stall; the program is found by its command line meanwhile.
    const pid = await (async () => {
      for (;;) {
        for (const entry of (await import("node:fs")).readdirSync("/proc")) {
          if (!/^\d+$/.test(entry)) continue;
          try {
            if (readFileSync(`/proc/${entry}/cmdline`, "utf8") === "yes\0") {
              const ppid = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${entry}/status`, "utf8"));
              if (ppid && Number(ppid[1]) === process.pid) return Number(entry);
            }
          } catch { /* gone */ }
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await untilWritten(pid, FLOOD_BYTES);
    const grown = process.memoryUsage().rss - rssBefore;
    assert.ok(grown < MAX_GROWTH_BYTES, `grew ${(grown / MiB).toFixed(1)} MiB`);
    proxy.resume();
    await starting;
    const read = await executor.request("process.read", {
      session_id: session.id,
      process_id: "p_yes",
      stream: "stdout",
      max_bytes: 16,
    });
    assert.match(read.data, /^(y\n)+/);
    await executor.request("process.signal", {
      session_id: session.id,
      process_id: "p_yes",
      signal: "SIGKILL",
    });
  });
});
