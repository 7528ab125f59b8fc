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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`a quiet terminal after a congested flood (${RUNTIME})`, { timeout: 120_000 }, () => {
  let dir: string;
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let proxy: ChaosProxy;
  let client: Entry.ExecutorClient;
  /** The executor's side of the PTY: what it was handed, and the link's state when it was. */
  let handed = "";
  let congestedWhenHanded: boolean | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-term-congestion-"));
    harness = new sdk.Harness({ insecureNoAuth: true, heartbeatIntervalMs: 120_000 });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    proxy = await ChaosProxy.start(server.url);
    client = new sdk.ExecutorClient({
      harnessUrl: proxy.url,
      executor: { name: "congestion", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    const decoder = new TextDecoder();
    const pty: Entry.PtyHost = {
      ...RUNTIME_PTY,
      spawn: (options, events) =>
        RUNTIME_PTY.spawn(options, {
          ...events,
          data: (chunk) => {
            handed = (handed + decoder.decode(chunk, { stream: true })).slice(-256);
            if (congestedWhenHanded === undefined && handed.includes("done-42")) {
              congestedWhenHanded = client.congested;
            }
            events.data(chunk);
          },
        }),
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
    while (congestedWhenHanded === undefined) await sleep(20);
    assert.equal(congestedWhenHanded, true, "the last line was handed over on a congested link");
    proxy.resume();
    await typed;

    let bound: ReturnType<typeof setTimeout> | undefined;
    const outcome = await Promise.race([
      lastLine,
      new Promise<"hung">((resolve) => (bound = setTimeout(() => resolve("hung"), BOUND_MS))),
    ]);
    clearTimeout(bound);
    assert.equal(outcome, true, `the harness never got the last line (${received} bytes in)`);
    assert.equal(received + terminal.lostBytes, terminal.offset);
    await terminal.close();
    await session.stop();
  });
});
