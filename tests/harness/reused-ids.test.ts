/**
 * Ids the store remembers stay taken, also on a harness started again on it:
 * - an ended session's id: assigning a new session under it is refused (`SessionRefusedError`
 *   `session_exists`; the brain API's 409 `session_refused`). Before, a new session took the id
 *   and showed the old one's events, and the old one's `tool_call_id`s were refused to it;
 * - a settled call's `tool_call_id`: another session's call with it is refused, and the first
 *   session's repeat still answers its stored result. Before, after a restart, the other
 *   session's call was started anew and its outcome replaced the stored result.
 * Over real parts: a `Harness` on a SQLite file served on 127.0.0.1, an `ExecutorClient` over
 * WebSocket.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ExecutorClient,
  Harness,
  type HarnessStore,
  InvalidCallOptionError,
  InvalidOutgoingParamsError,
  openSqliteStore,
  SessionRefusedError,
} from "../../node.ts";
import { HeldStore } from "../helpers/held-store.ts";

const INFO = { name: "ended-session-id", os: "linux", arch: "x64", version: "0.0.1" };
const dir = mkdtempSync(join(tmpdir(), "bma-ended-id-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("ids the store remembers", { timeout: 60_000 }, () => {
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

  it("a settled call's tool_call_id is refused to another session, also after a restart", async () => {
    const path = join(dir, "calls.db");
    let runs = 0;
    const start = async (port = 0) => {
      const store = await openSqliteStore(path);
      const harness = new Harness({ insecureNoAuth: true, store });
      const server = await harness.serve({ hostname: "127.0.0.1", port });
      return { harness, server };
    };
    let running = await start();
    const executorClient = new ExecutorClient({
      harnessUrl: running.server.url,
      executor: INFO,
      reconnect: { initialDelayMs: 5, maxDelayMs: 50 },
    });
    executorClient.tools.bash.handle(({ command }) => {
      runs++;
      return { stdout: command, stderr: "", exit_code: 0 };
    });
    const port = Number(new URL(running.server.url).port);
    try {
      await executorClient.start();
      const executor = await running.harness.waitExecutor();
      const a = await executor.assignSession({ session_id: "ses_a" });
      const b = await executor.assignSession({ session_id: "ses_b" });
      await Promise.all([a.ready(), b.ready()]);
      const first = await a.tools.bash.call({ command: "from a" }, { toolCallId: "call_x" });
      assert.equal(first.structured_content?.stdout, "from a");
      const reused = () =>
        b.tools.bash.call({ command: "from b" }, { toolCallId: "call_x" }).then(
          () => undefined,
          (e) => e,
        );
      assert.ok(await reused() instanceof InvalidOutgoingParamsError);

      await running.harness.close();
      await running.server.close();
      running = await start(port);
      const again = await running.harness.waitExecutor();
      const b2 = again.sessions.get("ses_b")!;
      const a2 = again.sessions.get("ses_a")!;
      const refused = await b2.tools.bash.call({ command: "from b" }, { toolCallId: "call_x" })
        .then(() => undefined, (e) => e);
      assert.ok(refused instanceof InvalidOutgoingParamsError, String(refused));
      // A's repeat answers its stored result, which nothing replaced; the tool ran once.
      const repeat = await a2.tools.bash.call({ command: "from a" }, { toolCallId: "call_x" });
      assert.equal(repeat.structured_content?.stdout, "from a");
      assert.equal((await running.harness.toolCall("call_x"))?.session_id, "ses_a");
      assert.equal(runs, 1);
    } finally {
      await executorClient.stop();
      await running.harness.close();
      await running.server.close();
    }
  });
});

/**
 * A harness on 127.0.0.1 (on `store`, if given) with an executor whose bash handler counts its
 * runs and echoes the command, and a ready session `sessionId`.
 */
async function countingSession(sessionId: string, store?: HarnessStore) {
  const harness = new Harness({ insecureNoAuth: true, ...(store ? { store } : {}) });
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO });
  let count = 0;
  client.tools.bash.handle(({ command }) => {
    count++;
    return { stdout: command, stderr: "", exit_code: 0 };
  });
  await client.start();
  const executor = await harness.waitExecutor();
  const session = await executor.assignSession({ session_id: sessionId });
  await session.ready();
  return { harness, server, client, session, runs: () => count };
}

describe("options spelled the wire's way (0.1.0's names)", { timeout: 30_000 }, () => {
  it("are refused before anything is sent, naming the spelling to use: a repeat never runs twice; an id reused for another tool is refused", async () => {
    const { harness, server, client, session, runs } = await countingSession("ses_spelling");
    try {
      const refusal = (error: unknown, option: string, spelled: string) => {
        assert.ok(error instanceof InvalidCallOptionError, String(error));
        assert.equal(error.option, option);
        assert.match(error.message, new RegExp(`option ${option} is spelled ${spelled}`));
        return true;
      };
      for (
        const [option, spelled] of [["tool_call_id", "toolCallId"], ["timeout_ms", "timeoutMs"]]
      ) {
        await assert.rejects(
          session.tools.bash.call({ command: "x" }, { [option]: "call_1" } as never),
          (error) => refusal(error, option, spelled),
        );
      }
      await assert.rejects(
        session.stop("bye", { grace_ms: 1_000 } as never),
        (error) => refusal(error, "grace_ms", "graceMs"),
      );
      // callTool takes the id in its request: in its options it would be ignored.
      for (const option of ["tool_call_id", "toolCallId"]) {
        await assert.rejects(
          session.callTool({ tool: "bash", input: { command: "x" } }, { [option]: "c" } as never),
          (error: unknown) =>
            error instanceof InvalidCallOptionError && error.option === option &&
            /belongs in the request \(tool_call_id\)/.test(error.message),
        );
      }
      assert.equal(runs(), 0, "nothing ran");
      assert.equal(session.state, "ready", "the session was not stopped");
      // The names of today: the repeat answers the first call's result.
      await session.tools.bash.call({ command: "once" }, { toolCallId: "call_2" });
      await session.tools.bash.call({ command: "once" }, { toolCallId: "call_2" });
      assert.equal(runs(), 1);
      // The id of a bash call reused for another tool is refused, not answered bash's result.
      await assert.rejects(
        session.callTool({ tool: "read", input: { path: "x" }, tool_call_id: "call_2" }),
        (error: unknown) =>
          error instanceof InvalidOutgoingParamsError &&
          /in use by a call of another tool \(bash\)/.test(JSON.stringify(error.issues)),
      );
    } finally {
      await client.stop();
      await harness.close();
      await server.close();
    }
  });
});

describe("a tool_call_id on its way to the store", { timeout: 30_000 }, () => {
  it("a repeat made while the store still writes the first call under its id waits for it: one call, both answered", async () => {
    const store = new HeldStore();
    const { harness, server, client, session, runs } = await countingSession("ses_repeat", store);
    try {
      store.holding = ["c/call_twice"];
      const first = session.tools.bash.call({ command: "once" }, { toolCallId: "call_twice" });
      const [write] = await store.heldWrites(1);
      const repeat = session.tools.bash.call({ command: "once" }, { toolCallId: "call_twice" });
      // The repeat has looked the id up (a store read) while the first is still being written.
      await store.get("c/call_twice");
      store.holding = [];
      write.commit();
      const [a, b] = await Promise.all([first, repeat]);
      assert.equal(a.structured_content?.stdout, "once");
      assert.deepEqual(b, a);
      assert.equal(runs(), 1);
      assert.equal(store.held.length, 1, "one call written, not a second under the same id");
    } finally {
      await client.stop();
      await harness.close();
      await server.close();
    }
  });
});
