/**
 * The brain API over real parts: a `Harness` served on 127.0.0.1, an `ExecutorClient` connected
 * to it over WebSocket, and `brainApi(harness)` served over real HTTP on 127.0.0.1 (node:http,
 * `serveInspector`), driven with `fetch` as an outside brain would.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  bearerAuthorize,
  brainApi,
  ExecutorClient,
  Harness,
  type HarnessServer,
  type HarnessStore,
  ManualClock,
  MemoryHarnessStore,
  serveInspector,
  TokenTooShortError,
} from "../../node.ts";
import { approvalId } from "../../mod.ts";
import { AgentFixtures, text } from "../helpers/agent-fixture.ts";
import { until } from "../helpers/executor-fixture.ts";
import { HeldStore } from "../helpers/held-store.ts";
import { listenPort } from "../helpers/ports.ts";

const TOKEN = "brain-token-0123456789abcdef";
const INFO = { name: "brain-api-executor", os: "linux", arch: "amd64", version: "0.0.1" };
const FAST = { initialDelayMs: 5, maxDelayMs: 50 };

interface Rig {
  harness: Harness;
  client: ExecutorClient;
  runs: Map<string, number>;
  release: () => void;
  base: string;
  /** `fetch` of `path` under the API's base, with the credential unless `auth` is false. */
  call(path: string, init?: RequestInit & { auth?: boolean | string }): Promise<Response>;
}

describe("brainApi over HTTP", { timeout: 30_000 }, () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  /** The brain API of `harness` served over HTTP on 127.0.0.1. */
  async function apiOn(harness: Harness): Promise<Pick<Rig, "base" | "call">> {
    const api = brainApi(harness, {
      authorize: bearerAuthorize(TOKEN),
      basePath: "/v1/harness",
      maxBodyBytes: 64 * 1024,
    });
    const web = await serveInspector((request) => Promise.resolve(api.fetch(request)));
    closing.push(() => web.close());
    const base = `${web.url}/v1/harness`;
    const call = (path: string, init: RequestInit & { auth?: boolean | string } = {}) => {
      const { auth = true, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (auth !== false) {
        headers.set("authorization", `Bearer ${typeof auth === "string" ? auth : TOKEN}`);
      }
      return fetch(`${base}${path}`, { ...rest, headers });
    };
    return { base, call };
  }

  async function rig(
    store: HarnessStore = new MemoryHarnessStore(),
    port = 0,
    clock?: ManualClock,
  ): Promise<Rig & { server: HarnessServer; port: number }> {
    // A store, so that ended sessions stay readable (a harness without one forgets them).
    const harness = new Harness({ insecureNoAuth: true, store, ...(clock ? { clock } : {}) });
    const server = await harness.serve({ hostname: "127.0.0.1", port });
    closing.push(() => server.close(), () => harness.close());
    const runs = new Map<string, number>();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: INFO,
      reconnect: FAST,
      retry: FAST,
    });
    client.tools.bash.handle(async ({ command }, { signal }) => {
      runs.set(command, (runs.get(command) ?? 0) + 1);
      if (command === "slow") await gate;
      if (command === "hang") {
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      }
      return { stdout: `ran ${command}`, stderr: "", exit_code: 0 };
    });
    closing.push(() => client.stop());
    await client.start();
    await harness.waitExecutor();

    const { base, call } = await apiOn(harness);
    return {
      harness,
      client,
      runs,
      release,
      base,
      call,
      server,
      port: Number(new URL(server.url).port),
    };
  }

  const post = (body: unknown) => ({
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

  async function ready(r: Rig, sessionId: string): Promise<void> {
    const assigned = await r.call("/sessions", post({ session_id: sessionId }));
    assert.equal(assigned.status, 201);
    const view = await r.call(`/sessions/${sessionId}?until=ready&wait_ms=10000`);
    assert.equal(view.status, 200);
    assert.equal((await view.json()).state, "ready");
  }

  it("serves the artifacts results point at (the bytes, for download) and deletes them", async () => {
    const r = await rig();
    const bytes = new TextEncoder().encode("<script>alert(1)</script> full output\n".repeat(1000));
    const stored = await r.harness.artifacts.put({
      name: "call 1.stdout.txt",
      mimeType: "text/html",
      bytes,
    });
    const got = await r.call(`/artifacts/${stored.artifact_id}`);
    assert.equal(got.status, 200);
    assert.equal(got.headers.get("content-type"), "text/html");
    assert.equal(got.headers.get("content-disposition"), "attachment");
    assert.equal(got.headers.get("x-content-type-options"), "nosniff");
    assert.equal(got.headers.get("x-artifact-name"), "call%201.stdout.txt");
    assert.deepEqual(new Uint8Array(await got.arrayBuffer()), bytes);
    assert.equal((await r.call(`/artifacts/${stored.artifact_id}`, { auth: false })).status, 401);

    const deleted = await r.call(`/artifacts/${stored.artifact_id}`, { method: "DELETE" });
    assert.deepEqual([deleted.status, await deleted.json()], [200, { deleted: true }]);
    const gone = await r.call(`/artifacts/${stored.artifact_id}`);
    assert.equal(gone.status, 404);
    assert.equal((await gone.json()).error.code, "not_found");
    const again = await r.call(`/artifacts/${stored.artifact_id}`, { method: "DELETE" });
    assert.equal(again.status, 404);
    await again.body?.cancel();
  });

  it("answers 401 before anything else without the credential", async () => {
    const r = await rig();
    for (
      const [path, init] of [
        ["/executors", {}],
        ["/sessions", post({ session_id: "ses_x" })],
        ["/no/such/route", {}],
        ["/sessions", post("{not json")],
      ] as const
    ) {
      for (const auth of [false, "wrong-token-0123456789"] as const) {
        const response = await r.call(path, { ...init, auth });
        assert.equal(response.status, 401, `${path} with ${auth}`);
        // RFC 6750: a token that was presented and refused is invalid_token, and says so.
        assert.equal(
          response.headers.get("www-authenticate"),
          auth ? 'Bearer realm="bma-brain", error="invalid_token"' : 'Bearer realm="bma-brain"',
        );
        const body = await response.json();
        assert.equal(body.error.code, "unauthorized");
        assert.match(body.error.message, auth ? /credential was refused/ : /credential needed/);
        assert.ok(!JSON.stringify(body).includes(TOKEN), "no secret in the body");
      }
    }
    assert.equal(r.harness.session("ses_x"), undefined, "nothing was assigned");
    assert.throws(() => bearerAuthorize("short"), TokenTooShortError);
  });

  it("lists executors, assigns a session, calls a tool, reads events, stops", async () => {
    const r = await rig();
    const listed = await (await r.call("/executors")).json();
    assert.equal(listed.executors.length, 1);
    const executor = listed.executors[0];
    assert.equal(executor.executor_id, r.client.executorId);
    assert.equal(executor.connected, true);
    assert.equal(executor.executor.name, INFO.name);
    assert.deepEqual(
      executor.capabilities,
      r.harness.executor(executor.executor_id)!.capabilities,
    );
    const one = await r.call(`/executors/${executor.executor_id}`);
    assert.deepEqual(await one.json(), executor);

    const assigned = await r.call(
      "/sessions",
      post({ session_id: "ses_1", executor_id: executor.executor_id }),
    );
    assert.equal(assigned.status, 201);
    const view = await assigned.json();
    assert.equal(view.session_id, "ses_1");
    assert.equal(view.executor_id, executor.executor_id);
    assert.equal(view.metadata.source, "harness");
    const readyView = await r.call("/sessions/ses_1?until=ready&wait_ms=10000");
    assert.equal(readyView.status, 200);
    assert.equal((await readyView.json()).state, "ready");
    const sessions = await (await r.call("/sessions")).json();
    assert.deepEqual(sessions.sessions.map((s: { session_id: string }) => s.session_id), [
      "ses_1",
    ]);

    const called = await r.call(
      "/sessions/ses_1/tool-calls?wait_ms=10000",
      post({ tool: "bash", input: { command: "ls" }, tool_call_id: "call_1" }),
    );
    assert.equal(called.status, 200);
    const settled = await called.json();
    assert.equal(settled.tool_call_id, "call_1");
    assert.equal(settled.state, "settled");
    assert.equal(settled.result.outcome, "completed");
    assert.equal(settled.result.structured_content.stdout, "ran ls");

    // A call without an id gets one.
    const generated = await (await r.call(
      "/sessions/ses_1/tool-calls?wait_ms=10000",
      post({ tool: "bash", input: { command: "pwd" } }),
    )).json();
    assert.match(generated.tool_call_id, /^call_/);
    assert.equal(generated.result.structured_content.stdout, "ran pwd");

    // Events: the executor emits three; the brain reads them from a position, then waits.
    for (let n = 0; n < 3; n++) {
      await r.client.call("session.event", { session_id: "ses_1", event: { type: "tick", n } });
    }
    const page = await (await r.call("/sessions/ses_1/events?from=0&wait_ms=10000")).json();
    assert.deepEqual(page.events.map((e: { index: number }) => e.index), [1, 2, 3]);
    assert.deepEqual(page.events.map((e: { event: { n: number } }) => e.event.n), [0, 1, 2]);
    assert.equal(page.next, 3);
    assert.equal(page.ended, false);
    const limited = await (await r.call("/sessions/ses_1/events?from=1&limit=1")).json();
    assert.deepEqual(limited.events.map((e: { index: number }) => e.index), [2]);
    assert.equal(limited.next, 2);
    const nothingYet = await r.call("/sessions/ses_1/events?from=3");
    assert.equal(nothingYet.status, 202, "a long poll that found nothing: ask again");
    assert.deepEqual(await nothingYet.json(), { events: [], next: 3, ended: false });
    // A long poll answers when the next event arrives.
    const waiting = r.call("/sessions/ses_1/events?from=3&wait_ms=10000");
    await r.client.call("session.event", { session_id: "ses_1", event: { type: "tick", n: 3 } });
    const later = await (await waiting).json();
    assert.deepEqual(later.events.map((e: { index: number }) => e.index), [4]);

    const stopped = await r.call("/sessions/ses_1/stop?wait_ms=10000", post({ reason: "done" }));
    assert.equal(stopped.status, 200);
    const end = await stopped.json();
    assert.equal(end.state, "ended");
    assert.equal(typeof end.end_reason, "string");
    const rest = await (await r.call("/sessions/ses_1/events?from=4&wait_ms=10000")).json();
    assert.deepEqual(rest, { events: [], next: 4, ended: true });
    const afterEnd = await r.call(
      "/sessions/ses_1/tool-calls",
      post({ tool: "bash", input: { command: "late" }, tool_call_id: "call_late" }),
    );
    assert.equal(afterEnd.status, 409);
    assert.equal((await afterEnd.json()).error.code, "session_ended");
    assert.equal(r.runs.get("late"), undefined);
  });

  it("streams events as server-sent events, from Last-Event-ID", async () => {
    const r = await rig();
    await ready(r, "ses_s");
    for (let n = 0; n < 3; n++) {
      await r.client.call("session.event", { session_id: "ses_s", event: { type: "tick", n } });
    }
    const reading = new AbortController();
    const response = await r.call("/sessions/ses_s/events", {
      headers: { accept: "text/event-stream", "last-event-id": "1" },
      signal: reading.signal,
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const ids = () => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    while (ids().length < 2) text += (await reader.read()).value ?? "";
    assert.deepEqual(ids(), [2, 3]);
    // One more arrives while the stream is open; then the session ends and so does the stream.
    await r.client.call("session.event", { session_id: "ses_s", event: { type: "tick", n: 3 } });
    while (ids().length < 3) text += (await reader.read()).value ?? "";
    assert.deepEqual(ids(), [2, 3, 4]);
    const data = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]));
    assert.deepEqual(data.map((d) => d.event.n), [1, 2, 3]);
    await r.call("/sessions/ses_s/stop?wait_ms=10000", post({}));
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += chunk.value;
    }
    assert.match(text, /^event: end$/m);
    assert.match(text, /"ended":true/);
    reading.abort();
  });

  it("a repeated tool_call_id answers the stored result; the tool runs once", async () => {
    const r = await rig();
    await ready(r, "ses_2");
    const body = post({ tool: "bash", input: { command: "slow" }, tool_call_id: "call_slow" });
    const pending = await r.call("/sessions/ses_2/tool-calls", body);
    assert.equal(pending.status, 202);
    assert.deepEqual(await pending.json(), {
      tool_call_id: "call_slow",
      session_id: "ses_2",
      state: "pending",
    });
    await until(() => r.runs.get("slow") === 1, "the slow call runs");
    // A brain that gave up waiting leaves the call running; its repeat waits for the same call.
    const given = new AbortController();
    const abandoned = r.call("/sessions/ses_2/tool-calls?wait_ms=10000", {
      ...body,
      signal: given.signal,
    });
    given.abort();
    await assert.rejects(abandoned);
    const waiting = r.call("/sessions/ses_2/tool-calls?wait_ms=10000", body);
    r.release();
    const first = await (await waiting).json();
    assert.equal(first.state, "settled");
    assert.equal(first.result.structured_content.stdout, "ran slow");
    const again = await r.call("/sessions/ses_2/tool-calls", body);
    assert.equal(again.status, 200);
    assert.deepEqual(await again.json(), first);
    assert.equal(r.runs.get("slow"), 1, "the tool ran once");

    const byId = await r.call("/tool-calls/call_slow?wait_ms=10000");
    if (typeof (r.harness as { toolCall?: unknown }).toolCall === "function") {
      assert.equal(byId.status, 200);
      assert.deepEqual((await byId.json()).result, first.result);
    } else {
      // The harness finds calls by id only through a session: the route is not served.
      assert.equal(byId.status, 404);
      assert.equal((await byId.json()).error.code, "not_found");
    }
  });

  it("cancels a running call; it then settles canceled", async () => {
    const r = await rig();
    await ready(r, "ses_c");
    const body = post({ tool: "bash", input: { command: "hang" }, tool_call_id: "call_hang" });
    assert.equal((await r.call("/sessions/ses_c/tool-calls", body)).status, 202);
    await until(() => r.runs.get("hang") === 1, "the call runs");
    const canceled = await r.call(
      "/sessions/ses_c/tool-calls/call_hang/cancel",
      post({ reason: "enough" }),
    );
    assert.equal(canceled.status, 200);
    assert.deepEqual(await canceled.json(), { canceled: true });
    const settled = await (await r.call("/sessions/ses_c/tool-calls?wait_ms=10000", body)).json();
    assert.equal(settled.state, "settled");
    assert.equal(settled.result.outcome, "canceled");
    const bad = await r.call("/sessions/ses_c/tool-calls/call_hang/cancel", post({ reason: 1 }));
    assert.equal(bad.status, 400);
  });

  it("refuses bad input with a clear JSON error and sends nothing", async () => {
    const r = await rig();
    await ready(r, "ses_3");
    const cases: [string, RequestInit, number, string, unknown?][] = [
      ["/sessions", post("{not json"), 400, "bad_request"],
      ["/sessions", post("[1,2]"), 400, "bad_request"],
      ["/sessions", post({}), 400, "invalid_params", ["session_id"]],
      ["/sessions", post({ session_id: 7 }), 400, "invalid_params", ["session_id"]],
      ["/sessions", post({ session_id: "s", tools: "bash" }), 400, "invalid_params", ["tools"]],
      ["/sessions", post({ session_id: "s", executor_id: "exec_none" }), 404, "not_found"],
      ["/sessions/ses_3/tool-calls", post({ input: {} }), 400, "invalid_params", ["tool"]],
      [
        "/sessions/ses_3/tool-calls",
        post({ tool: "bash", input: { command: 5 } }),
        400,
        "invalid_params",
        ["input", "command"],
      ],
      [
        "/sessions/ses_3/tool-calls",
        post({ tool: "bash", input: { command: "x" }, timeout_ms: -1 }),
        400,
        "invalid_params",
        ["timeout_ms"],
      ],
      [
        "/sessions/ses_3/tool-calls",
        post({ tool: "bash", input: { command: "x" }, session_id: "other" }),
        400,
        "invalid_params",
        ["session_id"],
      ],
      [
        "/sessions/ses_3/tool-calls?wait_ms=soon",
        post({ tool: "bash", input: { command: "x" } }),
        400,
        "invalid_params",
        ["wait_ms"],
      ],
      ["/sessions/ses_3/events?limit=0", {}, 400, "invalid_params", ["limit"]],
      ["/sessions/ses_3/events?from=-1", {}, 400, "invalid_params", ["from"]],
      ["/sessions/ses_3?until=soon", {}, 400, "invalid_params", ["until"]],
      ["/sessions/ses_3/stop", post({ grace_ms: "long" }), 400, "invalid_params", ["grace_ms"]],
      ["/sessions/ses_none/tool-calls", post({ tool: "bash", input: {} }), 404, "not_found"],
      ["/executors/exec_none", {}, 404, "not_found"],
      ["/nothing", {}, 404, "not_found"],
      [
        "/sessions/ses_3/tool-calls",
        post({ tool: "bash", input: { command: "x".repeat(70 * 1024) } }),
        413,
        "payload_too_large",
      ],
    ];
    for (const [path, init, status, code, issuePath] of cases) {
      const response = await r.call(path, init);
      assert.equal(response.status, status, `${path} ${init.body ?? ""}`.slice(0, 200));
      assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
      const body = await response.json();
      assert.equal(body.error.code, code, path);
      assert.equal(typeof body.error.message, "string");
      if (issuePath !== undefined) {
        assert.ok(
          body.error.data.issues.some((i: { path: unknown[] }) =>
            JSON.stringify(i.path) === JSON.stringify(issuePath)
          ),
          `${path}: ${JSON.stringify(body.error.data.issues)}`,
        );
      }
    }
    assert.equal(r.runs.size, 0, "no tool ran");
    assert.equal(r.harness.session("s"), undefined, "no session was assigned");
    // The session is unharmed: a good call goes through.
    const good = await r.call(
      "/sessions/ses_3/tool-calls?wait_ms=10000",
      post({ tool: "bash", input: { command: "ok" } }),
    );
    assert.equal(good.status, 200);
  });

  it("refuses an id of more than 256 characters, and a body that is not UTF-8 text, sending nothing", async () => {
    const r = await rig();
    const longest = "s".repeat(256);
    await ready(r, longest);
    const refusals: [string, unknown, string[]][] = [
      ["/sessions", { session_id: "s".repeat(257) }, ["session_id"]],
      // Counted in characters (code points), as JSON Schema's maxLength counts.
      ["/sessions", { session_id: "\u{1F600}".repeat(257) }, ["session_id"]],
      [
        `/sessions/${longest}/tool-calls`,
        { tool: "bash", tool_call_id: "c".repeat(257), input: { command: "x" } },
        ["tool_call_id"],
      ],
    ];
    for (const [path, body, issuePath] of refusals) {
      const response = await r.call(path, post(body));
      assert.equal(response.status, 400, path);
      const answer = await response.json();
      assert.equal(answer.error.code, "invalid_params");
      assert.deepEqual(answer.error.data.issues.map((i: { path: unknown[] }) => i.path), [
        issuePath,
      ]);
    }
    // Refused by the harness's own rule (no store could key it), in the same shape.
    const lone = await r.call("/sessions", post(`{"session_id":"s\\ud800"}`));
    assert.equal(lone.status, 400);
    const loneData = (await lone.json()).error.data;
    assert.equal(loneData.field, "/session_id");
    assert.equal(loneData.issue_count, 1);
    assert.deepEqual(loneData.issues.map((i: { path: unknown[] }) => i.path), [["session_id"]]);
    assert.equal(r.harness.session("\u{1F600}".repeat(256)), undefined);
    const astral = await r.call("/sessions", post({ session_id: "\u{1F600}".repeat(256) }));
    assert.equal(astral.status, 201, "256 characters of two UTF-16 units each are 256");

    // Two ids that differ only in a byte that is not UTF-8 are not one id with U+FFFD.
    const bytes = (text: string, odd: number) => {
      const [head, tail] = text.split("@").map((part) => new TextEncoder().encode(part));
      return new Uint8Array([...head, odd, ...tail]);
    };
    const call = `{"tool":"bash","tool_call_id":"k_@","input":{"command":"one"}}`;
    for (const odd of [0xc3, 0xff]) {
      const response = await r.call(`/sessions/${longest}/tool-calls`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: bytes(call, odd),
      });
      assert.equal(response.status, 400);
      const answer = await response.json();
      assert.equal(answer.error.code, "bad_request");
      assert.match(answer.error.message, /not UTF-8/);
    }
    // A body in another charset is refused as such, not read as UTF-8.
    const latin = await r.call(`/sessions/${longest}/tool-calls`, {
      method: "POST",
      headers: { "content-type": "application/json; charset=iso-8859-1" },
      body: JSON.stringify({ tool: "bash", input: { command: "echo e" } }),
    });
    assert.equal(latin.status, 415);
    assert.equal((await latin.json()).error.code, "unsupported_media_type");
    assert.equal(r.runs.size, 0, "no tool ran");

    const good = await r.call(
      `/sessions/${longest}/tool-calls?wait_ms=10000`,
      {
        method: "POST",
        headers: { "content-type": "application/json; charset=UTF-8" },
        body: JSON.stringify({
          tool: "bash",
          tool_call_id: "c".repeat(256),
          input: { command: "ok" },
        }),
      },
    );
    assert.equal(good.status, 200);
    assert.equal((await good.json()).tool_call_id, "c".repeat(256));
  });

  it("answers 202 for a call only once its store holds it, so a harness started again knows it", async () => {
    const store = new HeldStore();
    const r = await rig(store);
    await ready(r, "ses_held");
    store.holding = ["c/call_held"];
    let answered: Response | undefined;
    const answer = r.call(
      "/sessions/ses_held/tool-calls?wait_ms=0",
      post({ tool: "bash", tool_call_id: "call_held", input: { command: "held" } }),
    ).then((response) => (answered = response));
    const [write] = await store.heldWrites(1);
    // The request has had every chance to answer: it must not while the write is held.
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(answered, undefined, `answered ${answered?.status} before the call was stored`);
    store.holding = [];
    write.commit();
    const response = await answer;
    assert.ok(response.status === 202 || response.status === 200, String(response.status));
    assert.equal((await response.json()).tool_call_id, "call_held");
  });

  it("tells a reader how many records it skipped past the log's bounds, and refuses positions that are none", async () => {
    const harness = new Harness({
      insecureNoAuth: true,
      store: new MemoryHarnessStore(),
      maxSessionEvents: 5,
    });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closing.push(() => server.close(), () => harness.close());
    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO, retry: FAST });
    closing.push(() => client.stop());
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_kept" });
    await session.ready();
    for (let n = 1; n <= 12; n++) {
      await client.call("session.event", { session_id: "ses_kept", event: { type: "tick", n } });
    }
    const { call } = await apiOn(harness);
    // Read 2; 10 more came, and a session keeps 5: records 3 to 7 are gone.
    const page = await (await call("/sessions/ses_kept/events?from=2")).json();
    assert.deepEqual(page.events.map((e: { index: number }) => e.index), [8, 9, 10, 11, 12]);
    assert.equal(page.skipped, 5);
    assert.equal(page.next, 12);
    const kept = await (await call("/sessions/ses_kept/events?from=9")).json();
    assert.equal(kept.skipped, undefined, "nothing skipped from a kept position");
    const stream = await call("/sessions/ses_kept/events?wait_ms=0", {
      headers: { accept: "text/event-stream", "last-event-id": "2" },
    });
    const reader = stream.body!.getReader();
    let text = "";
    while (!text.includes("id: 8\n")) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    assert.match(text, /^event: skipped\ndata: \{"from":2,"skipped":5\}\n\n/m);
    assert.ok(text.indexOf("event: skipped") < text.indexOf("id: 8"));

    for (const lastId of ["abc", "-1", "1e2"]) {
      const refused = await call("/sessions/ses_kept/events", {
        headers: { accept: "text/event-stream", "last-event-id": lastId },
      });
      assert.equal(refused.status, 400, lastId);
      assert.equal((await refused.json()).error.data.field, "/Last-Event-ID");
    }
    await session.stop();
    const past = await call("/sessions/ses_kept/events?from=13");
    assert.equal(past.status, 400);
    assert.match((await past.json()).error.message, /ended after record 12/);
    assert.equal((await call("/sessions/ses_kept/events?from=12")).status, 200);
  });

  it("answers a call repeated after the harness restarted on its store with the stored result", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    // The first harness "crashes" and is never touched again (its clock never moves).
    // A port no parallel test is given meanwhile: the next harness serves on it.
    const first = await rig(store, await listenPort(), new ManualClock());
    await ready(first, "ses_r");
    const fastBody = post({ tool: "bash", input: { command: "fast" }, tool_call_id: "call_fast" });
    const slowBody = post({ tool: "bash", input: { command: "slow" }, tool_call_id: "call_slow" });
    const fast = await (await first.call("/sessions/ses_r/tool-calls?wait_ms=10000", fastBody))
      .json();
    assert.equal(fast.state, "settled");
    assert.equal((await first.call("/sessions/ses_r/tool-calls", slowBody)).status, 202);
    await until(() => first.runs.get("slow") === 1, "the slow call runs");
    await first.server.close();
    first.release();

    const second = new Harness({ insecureNoAuth: true, store, takeover: true });
    const server = await second.serve({ hostname: "127.0.0.1", port: first.port });
    closing.push(() => server.close(), () => second.close());
    const api = await apiOn(second);
    const executorId = first.client.executorId!;
    await until(() => second.executor(executorId)?.connected === true, "reconnected");
    const slow = await api.call("/sessions/ses_r/tool-calls?wait_ms=10000", slowBody);
    assert.equal(slow.status, 200);
    const settled = await slow.json();
    assert.equal(settled.state, "settled");
    assert.equal(settled.result.structured_content.stdout, "ran slow");
    assert.deepEqual(
      await (await api.call("/sessions/ses_r/tool-calls?wait_ms=10000", fastBody)).json(),
      fast,
    );
    assert.equal(first.runs.get("slow"), 1, "the slow call ran once");
    assert.equal(first.runs.get("fast"), 1, "the fast call ran once");
  });

  it("drains and closes an executor", async () => {
    const r = await rig();
    const id = r.client.executorId!;
    const drained = await r.call(`/executors/${id}/drain`, post({ reason: "deploy" }));
    assert.equal(drained.status, 200);
    assert.equal((await (await r.call(`/executors/${id}`)).json()).draining, true);
    // No executor takes sessions now.
    const refused = await r.call("/sessions", post({ session_id: "ses_d" }));
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).error.code, "executor_unavailable");
    const named = await r.call("/sessions", post({ session_id: "ses_d", executor_id: id }));
    assert.equal(named.status, 409);
    assert.deepEqual((await named.json()).error.data, { reason: "draining" });
    const closed = await r.call(`/executors/${id}/close`, post({ reason: "bye" }));
    assert.deepEqual(await closed.json(), { executor_id: id, closed: true });
    const gone = await r.call(`/executors/${id}`);
    assert.ok(gone.status === 404 || (await gone.json()).gone === true);
  });
  it("starts an agent turn and answers its approval", async () => {
    const fx = new AgentFixtures();
    closing.push(() => fx.cleanup());
    const h = await fx.harness();
    const { executor } = await fx.executor(h, {
      async runTurn(turn) {
        const toolUseId = turn.eventId();
        await turn.emit({
          type: "agent.tool_use",
          name: "bash",
          input: { command: "ls" },
          evaluated_permission: "ask",
        }, { eventId: toolUseId });
        const answer = await turn.requestInteraction({
          kind: "permission",
          interaction_id: await approvalId(turn.sessionId, "bash", "ls"),
          tool_use_id: toolUseId,
          title: "Run ls?",
        });
        await turn.emit({ type: "agent.message", content: [text(answer.outcome)] });
      },
    });
    const api = await apiOn(h.harness);
    const bad = await api.call(`/executors/${executor.id}/turns`, post({ session_id: "ses_a" }));
    assert.equal(bad.status, 400);
    assert.ok(
      (await bad.json()).error.data.issues.some((i: { path: string[] }) => i.path[0] === "input"),
    );
    const started = await api.call(
      `/executors/${executor.id}/turns`,
      post({ session_id: "ses_a", input: [text("go")] }),
    );
    assert.equal(started.status, 201);
    const turn = await started.json();
    assert.equal(turn.session_id, "ses_a");
    assert.equal(turn.accepted, true);
    assert.match(turn.turn_id, /^turn_/);
    const asked = await h.platform.waitInteraction();
    const id = await approvalId("ses_a", "bash", "ls");
    assert.equal(asked.interaction_id, id);
    const answered = await api.call(
      `/sessions/ses_a/interactions/${id}/response`,
      post({ outcome: "approved" }),
    );
    assert.deepEqual(await answered.json(), { accepted: true });
    const again = await api.call(
      `/sessions/ses_a/interactions/${id}/response`,
      post({ outcome: "denied" }),
    );
    assert.deepEqual(await again.json(), { accepted: false }, "the first answer wins");
    const types: string[] = [];
    let said: unknown;
    let from = 0;
    while (!types.includes("session.status_idle")) {
      const page = await (await api.call(`/sessions/ses_a/events?from=${from}&wait_ms=10000`))
        .json();
      for (const record of page.events) {
        types.push(record.event.type);
        if (record.event.type === "agent.message") said = record.event.content[0].text;
      }
      from = page.next;
    }
    assert.ok(types.includes("agent.tool_use"), types.join());
    assert.equal(said, "approved");
  });

  it("answers the agent routes of a session whose executor is gone 409 session_ended, not 503 for ever", async () => {
    const fx = new AgentFixtures();
    closing.push(() => fx.cleanup());
    // A store: ended sessions stay readable.
    const h = await fx.harness({ harness: { store: new MemoryHarnessStore() } });
    const { executor, client } = await fx.executor(h, {
      async runTurn(turn) {
        await new Promise((resolve) => turn.signal.addEventListener("abort", resolve));
      },
    });
    const api = await apiOn(h.harness);
    const started = await api.call(
      `/executors/${executor.id}/turns`,
      post({ session_id: "ses_gone", turn_id: "t1", input: [text("go")] }),
    );
    assert.equal(started.status, 201);
    // The executor leaves for good: its session ends.
    await client.stop();
    const session = await h.harness.findSession("ses_gone");
    await session?.ended;
    for (
      const [path, body] of [
        ["/sessions/ses_gone/turns/t1/input", { input: [text("more")] }],
        ["/sessions/ses_gone/turns/cancel", {}],
        ["/sessions/ses_gone/interactions/int_x/response", { outcome: "approved" }],
      ] as const
    ) {
      const answer = await api.call(path, post(body));
      assert.equal(answer.status, 409, path);
      assert.equal((await answer.json()).error.code, "session_ended", path);
    }
    const closed = await api.call("/sessions/ses_gone/close", post({}));
    assert.equal(closed.status, 200);
    assert.deepEqual(await closed.json(), { closed: false });
  });

  it("answers 503 backend_unavailable while the store cannot record a call, and serves once it can", async () => {
    // A store whose writes fail as SQLite's do on a full disk, while told.
    const inner = new MemoryHarnessStore();
    let full = false;
    const store: HarnessStore = {
      get: (key) => inner.get(key),
      list: (prefix, options) => inner.list(prefix, options),
      write: (batch) => {
        if (full) {
          throw Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
        }
        return inner.write(batch);
      },
    };
    const r = await rig(store);
    await ready(r, "ses_full");
    full = true;
    const refused = await r.call(
      "/sessions/ses_full/tool-calls?wait_ms=10000",
      post({ tool: "bash", input: { command: "ls" }, tool_call_id: "call_full" }),
    );
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).error.code, "backend_unavailable");
    assert.equal(r.runs.get("ls"), undefined, "nothing ran that was not recorded");
    full = false;
    const served = await r.call(
      "/sessions/ses_full/tool-calls?wait_ms=10000",
      post({ tool: "bash", input: { command: "ls" }, tool_call_id: "call_full" }),
    );
    assert.equal(served.status, 200);
    assert.equal((await served.json()).result.structured_content.stdout, "ran ls");
  });

  it("answers 501 for agent routes of a harness without the agent capability", async () => {
    const r = await rig();
    const response = await r.call(
      `/executors/${r.client.executorId}/turns`,
      post({ session_id: "ses_n", input: [text("go")] }),
    );
    assert.equal(response.status, 501);
    assert.equal((await response.json()).error.code, "not_implemented");
  });
});
