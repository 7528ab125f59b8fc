/**
 * `await using` on real parts, on Node, Deno and Bun: a harness serving WebSocket on 127.0.0.1,
 * an `ExecutorClient` serving the machine (real PTYs, through this runtime's entry point), a
 * session, a terminal, the inspector and its server. Each is closed at the end of the block that
 * holds it, as its `close`/`stop` would: the terminal's program has exited, the session has ended,
 * the client has stopped, the servers refuse connections, the harness refuses new work; a block
 * that throws still closes everything it took.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);

/** Whether anything still accepts a TCP connection at `url`'s host and port. */
async function refuses(url: string): Promise<boolean> {
  const { host } = new URL(url.replace(/^ws/, "http"));
  try {
    await fetch(`http://${host}/`, { signal: AbortSignal.timeout(5_000) });
    return false;
  } catch {
    return true;
  }
}

describe(`await using (${RUNTIME})`, { timeout: 60_000 }, () => {
  it("closes what each block took, in reverse order, as close and stop do", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-dispose-"));
    try {
      let harnessRef: Entry.Harness | undefined;
      let serverUrl = "";
      let webUrl = "";
      let clientRef: Entry.ExecutorClient | undefined;
      let sessionRef: Entry.Session | undefined;
      let terminalRef: Entry.Terminal | undefined;
      {
        await using harness = new sdk.Harness({ insecureNoAuth: true });
        harnessRef = harness;
        await using server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
        serverUrl = server.url;
        await using ui = sdk.inspector(harness, { token: sdk.randomInspectorToken() });
        await using web = await sdk.serveInspector(ui);
        webUrl = web.url;
        await using client = new sdk.ExecutorClient({
          harnessUrl: server.url,
          executor: { name: "disposing", os: "linux", arch: "amd64", version: "1.0.0" },
        });
        clientRef = client;
        sdk.serveMachine(client, { workdir: dir, cgroups: false, env: { HOME: dir } });
        await client.start();
        const executor = await harness.waitExecutor();
        await using session = await executor.assignSession({ session_id: "ses_dispose" });
        sessionRef = session;
        await session.ready();
        await using terminal = await session.terminal({ argv: ["sh"], cols: 80, rows: 24 });
        terminalRef = terminal;
        await terminal.write("echo still-here\n");
        for await (const text of terminal) if (text.includes("still-here")) break;
      }
      assert.equal(await terminalRef!.exited.then(() => "exited"), "exited");
      assert.equal(sessionRef!.state, "ended");
      assert.equal(clientRef!.state, "stopped");
      assert.ok(await refuses(serverUrl), "the harness's server is closed");
      assert.ok(await refuses(webUrl), "the inspector's server is closed");
      await assert.rejects(
        harnessRef!.serve({ hostname: "127.0.0.1", port: 0 }),
        { name: "HarnessClosedError" },
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("closes them when the block throws", async () => {
    let harnessRef: Entry.Harness | undefined;
    let serverUrl = "";
    await assert.rejects(
      (async () => {
        await using harness = new sdk.Harness({ insecureNoAuth: true });
        harnessRef = harness;
        await using server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
        serverUrl = server.url;
        throw new Error("the block failed");
      })(),
      { message: "the block failed" },
    );
    assert.ok(await refuses(serverUrl));
    await assert.rejects(harnessRef!.serve({ port: 0 }), { name: "HarnessClosedError" });
  });
});
