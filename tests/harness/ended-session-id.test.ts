/**
 * The id of an ended session the store still remembers stays taken: assigning a new session
 * under it is refused (`SessionRefusedError` `session_exists`; the brain API's 409
 * `session_refused`), on the harness that saw it end and on one started again on its store.
 * Before, a new session took the id and showed the old one's events, and the old one's
 * `tool_call_id`s were refused to it. Over real parts: a `Harness` on a SQLite file served on
 * 127.0.0.1, an `ExecutorClient` over WebSocket.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient, Harness, openSqliteStore, SessionRefusedError } from "../../node.ts";

const INFO = { name: "ended-session-id", os: "linux", arch: "x64", version: "0.0.1" };
const dir = mkdtempSync(join(tmpdir(), "bma-ended-id-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("an ended session's id", { timeout: 60_000 }, () => {
  it("is refused to a new session while the store remembers it, also after a restart", async () => {
    const path = join(dir, "h.db");
    const start = async (port = 0) => {
      const store = await openSqliteStore(path);
      const harness = new Harness({ insecureNoAuth: true, store });
      const server = await harness.serve({ hostname: "127.0.0.1", port });
      return { harness, server, store };
    };
    let first = await start();
    const port = Number(new URL(first.server.url).port);
    const client = new ExecutorClient({
      harnessUrl: first.server.url,
      executor: INFO,
      reconnect: { initialDelayMs: 5, maxDelayMs: 50 },
    });
    client.tools.bash.handle(({ command }) => ({ stdout: command, stderr: "", exit_code: 0 }));
    try {
      await client.start();
      const executor = await first.harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_once" });
      await session.ready();
      const call = await session.tools.bash.call({ command: "first" }, { toolCallId: "call_1" });
      assert.equal(call.structured_content?.stdout, "first");
      await session.stop();
      assert.equal(session.state, "ended");

      const refused = async (harness: Harness) => {
        const executor = await harness.waitExecutor(); // connected (again, after a restart)
        const again = await executor.assignSession({ session_id: "ses_once" })
          .then(() => undefined, (e) => e);
        assert.ok(again instanceof SessionRefusedError, String(again));
        assert.equal(again.reason, "session_exists");
        // The ended session is still what the id names, with its events.
        const ended = await harness.findSession("ses_once");
        assert.equal(ended?.state, "ended");
        assert.equal(harness.sessions.has("ses_once"), false);
      };
      await refused(first.harness);

      // Started again on the same file: the executor reconnects, the id is still taken.
      await first.harness.close();
      await first.server.close();
      first = await start(port);
      await refused(first.harness);
      // A fresh id is assigned as ever.
      const fresh = await (await first.harness.waitExecutor()).assignSession({
        session_id: "ses_next",
      });
      await fresh.ready();
      assert.equal(fresh.state, "ready");
    } finally {
      await client.stop();
      await first.harness.close();
      await first.server.close();
    }
  });
});
