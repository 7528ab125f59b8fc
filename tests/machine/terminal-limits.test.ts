/**
 * The executor's bounds on terminals, per session and over all sessions (`limits.terminals`,
 * `limits.terminalsPerSession`), with this runtime's PTYs through the public API over a real
 * WebSocket on 127.0.0.1: past either, `terminal.open` is -32009 `too_many_terminals` and starts
 * nothing; a closed terminal makes room again.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);

const reasonOf = (error: unknown) =>
  error instanceof sdk.ProtocolError
    ? [error.code, (error.data as { reason?: string })?.reason]
    : [String(error)];

describe(`terminal limits on ${RUNTIME}`, { timeout: 60_000 }, () => {
  let dir: string;
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let client: Entry.ExecutorClient;
  let executor: Entry.ExecutorHandle;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-termlimits-"));
    harness = new sdk.Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    client = new sdk.ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "terminal-limits", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    sdk.serveMachine(client, {
      workdir: dir,
      graceMs: 100,
      limits: { terminalsPerSession: 2, terminals: 3 },
    });
    await client.start();
    executor = await harness.waitExecutor();
  });

  after(async () => {
    await client?.stop();
    await harness?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses past the session's bound and past the executor's, and makes room on close", async () => {
    const a = await executor.assignSession({ session_id: "ses_a" });
    const b = await executor.assignSession({ session_id: "ses_b" });
    await Promise.all([a.ready(), b.ready()]);
    const cat = { argv: ["cat"] };
    const a1 = await a.terminal(cat);
    await a.terminal(cat);
    await assert.rejects(a.terminal(cat), (error) => {
      assert.deepEqual(reasonOf(error), [-32009, "too_many_terminals"]);
      return true;
    });
    await b.terminal(cat);
    // Three open on the executor: a session with room of its own is refused too.
    await assert.rejects(b.terminal(cat), (error) => {
      assert.deepEqual(reasonOf(error), [-32009, "too_many_terminals"]);
      return true;
    });
    await a1.close();
    const b2 = await b.terminal(cat);
    assert.ok(b2.pid);
  });
});
