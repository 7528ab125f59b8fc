/**
 * A capability request a repeat of which does what it would (a read, a wait, a start that names
 * its own id) outlives a cut connection as tool calls do: one in flight when the link is cut,
 * and one sent while the executor is away, are sent again once it is back within its lease and
 * answered. Over real parts: `serveMachine` on an `ExecutorClient` through a TCP proxy that cuts
 * both sockets (1006), a real `Harness` on 127.0.0.1, a real child process.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient, Harness, serveMachine } from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";

const dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-cut-requests-")));
after(() => rmSync(dir, { recursive: true, force: true }));
const INFO = { name: "cut-requests", os: "linux", arch: "x64", version: "0.0.1" };

/** Waits for `what`, at most 10 s, naming it when it does not come. */
async function within<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within 10000 ms: ${what}`)), 10_000);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe("capability requests across a cut connection", { timeout: 60_000 }, () => {
  it("a wait in flight and a read sent while away are answered once the executor is back", async () => {
    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const proxy = await ChaosProxy.start(server.url);
    const client = new ExecutorClient({
      harnessUrl: proxy.url,
      executor: INFO,
      reconnect: { initialDelayMs: 5, maxDelayMs: 50 },
    });
    const served = serveMachine(client, { workdir: dir, graceMs: 300 });
    try {
      await client.start();
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_cut" });
      await session.ready();
      const ids = { session_id: "ses_cut", process_id: "p1" };
      await executor.request("process.start", {
        ...ids,
        argv: ["bash", "-c", "read line; echo got $line"],
      });
      const waiting = executor.request("process.wait", ids);
      // Answered after the wait on the same connection: the wait has reached the executor.
      await executor.request("process.list", { session_id: "ses_cut" });

      assert.equal(proxy.cut(), 1);
      // Sent while the executor is away (or on the link being lost): it waits for it.
      const listed = executor.request("process.list", { session_id: "ses_cut" });
      await within("the executor back", harness.waitExecutor({ filter: (e) => e.connected }));
      // A start repeated by its id answers the same process: nothing runs twice.
      const again = await executor.request("process.start", { ...ids, argv: ["false"] });
      assert.equal(again.duplicate, true);
      assert.deepEqual(
        (await within("the list sent while away", listed)).processes.map((p) => p.process_id),
        ["p1"],
      );
      await executor.request("process.write", { ...ids, data: "hi\n", eof: true });
      const exited = await within("the wait in flight at the cut", waiting);
      assert.equal(exited.exit_code, 0);
      const out = await executor.request("process.read", { ...ids, stream: "stdout" });
      assert.equal(out.data, "got hi\n");
    } finally {
      await served.dispose();
      await client.stop();
      await harness.close();
      await server.close();
      await proxy.close();
    }
  });
});
