/**
 * Ids no store can hold (with U+0000, or a lone surrogate), chosen by a brain or sent by an
 * executor, are bad input: the brain API answers 400 `invalid_params` (or 404 for a lookup),
 * the executor's `tool.result` -32002 `unknown_tool_call`, and the store is never asked, so no
 * write failure is logged or counted. Over real parts: a `Harness` on a SQLite file, served on
 * 127.0.0.1, an `ExecutorClient` over WebSocket, the brain API over HTTP.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  bearerAuthorize,
  brainApi,
  ExecutorClient,
  Harness,
  openSqliteStore,
  serveInspector,
} from "../../node.ts";
import { CapturingLogger } from "../helpers/raw.ts";
import { until } from "../helpers/executor-fixture.ts";

const TOKEN = "brain-token-0123456789abcdef";
const INFO = { name: "unstorable-ids", os: "linux", arch: "x64", version: "0.0.1" };
const dir = mkdtempSync(join(tmpdir(), "bma-unstorable-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const UNSTORABLE = ["a\u0000b", "a\ud800b", "\udc00"];

/** `id` in a path, or `undefined` when no URL can carry it (a lone surrogate has no UTF-8). */
function inPath(id: string): string | undefined {
  try {
    return encodeURIComponent(id);
  } catch {
    return undefined;
  }
}

describe("ids no store can hold", { timeout: 60_000 }, () => {
  it("are refused as bad input by the brain API and the harness, never as a store failure", async () => {
    const logger = new CapturingLogger();
    const store = await openSqliteStore(join(dir, "h.db"));
    const harness = new Harness({ insecureNoAuth: true, store, logger });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const api = brainApi(harness, { authorize: bearerAuthorize(TOKEN), basePath: "/v1/harness" });
    const web = await serveInspector((request) => Promise.resolve(api.fetch(request)));
    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO });
    client.tools.bash.handle(({ command }) => ({ stdout: command, stderr: "", exit_code: 0 }));
    try {
      await client.start();
      await until(() => harness.executors.length === 1);
      const executorId = harness.executors[0].id;
      const brain = (path: string, init: RequestInit = {}) =>
        fetch(`${web.url}/v1/harness${path}`, {
          ...init,
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        });
      const post = (path: string, body: unknown) =>
        brain(path, { method: "POST", body: JSON.stringify(body) });

      for (const id of UNSTORABLE) {
        const created = await post("/sessions", { session_id: id, executor_id: executorId });
        assert.equal(created.status, 400, JSON.stringify(id));
        const body = await created.json();
        assert.equal(body.error.code, "invalid_params");
        assert.deepEqual(body.error.data.issues.map((i: { path: string[] }) => i.path), [[
          "session_id",
        ]]);
        const path = inPath(id);
        if (path !== undefined) {
          const read = await brain(`/sessions/${path}`);
          assert.equal(read.status, 404);
          await read.body?.cancel();
        }
      }
      assert.equal(harness.sessions.size, 0, "no session was made of a refused id");

      const made = await post("/sessions", { session_id: "ses_ok", executor_id: executorId });
      assert.equal(made.status, 201);
      await made.body?.cancel();
      for (const id of UNSTORABLE) {
        const call = await post("/sessions/ses_ok/tool-calls", {
          tool: "bash",
          tool_call_id: id,
          input: { command: "echo" },
        });
        assert.equal(call.status, 400, JSON.stringify(id));
        assert.equal((await call.json()).error.code, "invalid_params");
        const path = inPath(id);
        if (path !== undefined) {
          const read = await brain(`/tool-calls/${path}`);
          assert.equal(read.status, 404);
          await read.body?.cancel();
        }
        // An executor reporting a result for such an id names no call.
        await assert.rejects(
          client.call("tool.result", {
            session_id: "ses_ok",
            tool_call_id: id,
            outcome: "completed",
            content: [],
          }),
          (error: { code?: number; data?: { reason?: string } }) =>
            error.code === -32002 && error.data?.reason === "unknown_tool_call",
        );
      }
      // The harness still works, and its store never failed.
      const ok = await post("/sessions/ses_ok/tool-calls?wait_ms=10000", {
        tool: "bash",
        input: { command: "still works" },
      });
      assert.equal(ok.status, 200);
      assert.equal((await ok.json()).result.outcome, "completed");
      assert.equal(harness.metrics.storeWriteFailures, 0);
      assert.deepEqual(logger.records.filter((r) => r.level === "error"), []);
    } finally {
      await client.stop().catch(() => {});
      await web.close();
      await server.close();
      await harness.close();
    }
  });
});
