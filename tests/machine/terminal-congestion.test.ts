/**
 * A terminal that floods a congested link and then goes quiet (a shell's prompt after a long
 * command): the executor drops its `terminal.output` while the harness reads too slowly, and the
 * last of it must still reach the harness once the link has room, though the terminal writes
 * nothing more. Real harness, real `ExecutorClient` serving the machine with this runtime's PTYs,
 * a real WebSocket on 127.0.0.1 behind a proxy that stops reading what the executor sends.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const RUNTIME_PTY = (sdk as unknown as Record<string, Entry.PtyHost>)[
  RUNTIME === "bun" ? "bunPty" : "nodePty"
];
/** What the terminal writes: more than the socket buffers between executor and proxy hold. */
const FLOOD_BYTES = 24_000_000;
/** How long the harness may take to get the last line once the link has room (a hang's bound). */
const BOUND_MS = 60_000;
/** What is handed after the flood while the link is not yet congested, at a time. */
const FILLER_BYTES = 64 * 1024;
/** The most handed after the flood before the last line goes anyway. */
const FILLER_LIMIT_BYTES = 64 * 1024 * 1024;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`a quiet terminal after a congested flood (${RUNTIME})`, { timeout: 120_000 }, () => {
  let dir: string;
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let proxy: ChaosProxy;
  let client: Entry.ExecutorClient;
  /** The executor's side of the PTY: what it was handed, up to the last line. */
  let handed = "";
  /** Set once the last line was handed over (on a congested link). */
  let lastLineHanded = false;
  /** The offset of the chunk holding the last line's end, and each try to send it. */
  let lastChunk: { offset: number; sent: boolean[] } | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-term-congestion-"));
    harness = new sdk.Harness({ insecureNoAuth: true, heartbeatIntervalMs: 120_000 });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    proxy = await ChaosProxy.start(server.url);
    client = new sdk.ExecutorClient({
      harnessUrl: proxy.url,
      executor: { name: "congestion", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    // Each `terminal.output` the executor sends, and whether the link took it or dropped it.
    const notify = client.notify.bind(client);
    let handing = false;
    client.notify = ((method, params) => {
      const sent = notify(method, params);
      if (method !== "terminal.output") return sent;
      const { offset } = params as { offset: number };
      if (handing) lastChunk = { offset, sent: [] };
      const chunk = lastChunk;
      if (chunk?.offset === offset) chunk.sent.push(sent);
      return sent;
    }) as typeof client.notify;
    const decoder = new TextDecoder();
    const filler = new TextEncoder().encode("y".repeat(FILLER_BYTES));
    const pty: Entry.PtyHost = {
      ...RUNTIME_PTY,
      spawn: (options, events) => {
        // From the chunk that completes the last line on, output waits here until the link is
        // congested: a stalled reader's kernel keeps taking bytes slowly, so the executor's unsent
        // bytes hover around the threshold and the flood alone may end on a free moment. More
        // flood is handed meanwhile, as the program would have written it.
        let held: Uint8Array[] | undefined;
        let exited: Entry.PtyExit | undefined;
        let filled = 0;
        const handOver = () => {
          // A link that never counts as congested fails the assertion on the drop, not the timeout.
          if (!client.congested && filled < FILLER_LIMIT_BYTES) {
            filled += filler.byteLength;
            events.data(filler);
            setTimeout(handOver, 5);
            return;
          }
          handing = true;
          for (const chunk of held!.splice(0)) events.data(chunk);
          handing = false;
          held = undefined;
          lastLineHanded = true;
          if (exited) events.exit(exited);
        };
        return RUNTIME_PTY.spawn(options, {
          ...events,
          data: (chunk) => {
            if (held) return void held.push(chunk);
            handed = (handed + decoder.decode(chunk, { stream: true })).slice(-256);
            if (!lastLineHanded && handed.includes("done-42")) {
              held = [chunk];
              handOver();
              return;
            }
            events.data(chunk);
          },
          exit: (how) => {
            if (held) exited = how;
            else events.exit(how);
          },
        });
      },
    };
    sdk.serveMachine(client, { workdir: dir, graceMs: 300, pty });
    await client.start();
    await harness.waitExecutor();
  });

  after(async () => {
    proxy?.resume();
    await client?.stop();
    await harness?.close();
    await server?.close();
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the last line reaches the harness, and every byte is received or counted lost", {
    timeout: 120_000,
  }, async () => {
    const executor = harness.executors[0];
    const session = await executor.assignSession({ session_id: "ses_congested_terminal" });
    await session.ready();
    const terminal = await session.terminal({
      argv: [
        "sh",
        "-c",
        `read line; head -c ${FLOOD_BYTES} /dev/zero | tr '\\0' y; echo; echo done-$((40+2)); read line`,
      ],
    });
    let received = 0;
    let tail = "";
    const decoder = new TextDecoder();
    const lastLine = (async () => {
      for await (const chunk of terminal.output()) {
        received += chunk.byteLength;
        tail = (tail + decoder.decode(chunk, { stream: true })).slice(-256);
        if (tail.includes("done-42")) return true;
      }
      return false;
    })();
    proxy.stall();
    // Its answer waits behind the stall: awaited once the proxy reads again.
    const typed = terminal.write("go\r");
    while (!lastLineHanded) await sleep(20);
    assert.equal(lastChunk?.sent[0], false, "the link dropped the last line");
    proxy.resume();
    await typed;

    let bound: ReturnType<typeof setTimeout> | undefined;
    const outcome = await Promise.race([
      lastLine,
      new Promise<"hung">((resolve) => (bound = setTimeout(() => resolve("hung"), BOUND_MS))),
    ]);
    clearTimeout(bound);
    assert.equal(outcome, true, `the harness never got the last line (${received} bytes in)`);
    assert.equal(
      lastChunk.sent.at(-1),
      true,
      "the last line was sent again once the link had room",
    );
    assert.equal(received + terminal.lostBytes, terminal.offset);
    await terminal.close();
    await session.stop();
  });
});
