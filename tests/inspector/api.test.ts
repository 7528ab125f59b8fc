/**
 * The inspector's handler without a browser, on Node, Deno and Bun: the token check (constant
 * time, bearer or cookie, one-time login codes), every page and endpoint refused without it,
 * and the API driving a real harness — a real WebSocket on 127.0.0.1, executors that are real
 * `ExecutorClient`s, the inspector served by `serveInspector` (node:http) on 127.0.0.1 — and its
 * live stream.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AgentPlatform,
  approvalId,
  DEFAULT_INSPECTOR_LIMITS,
  ExecutorClient,
  Harness,
  inspector,
  type InspectorServer,
  ManualClock,
  randomInspectorToken,
  serveAgent,
  serveInspector,
  TokenTooShortError,
} from "../../node.ts";
import { InspectorAuth, tokensEqual } from "../../http/inspector/auth.ts";
import { clip } from "../../http/inspector/clip.ts";
import { APP_JS, DOM_JS, MACHINE_JS } from "../../http/inspector/generated/pages.ts";

const INFO = { name: "inspected", os: "linux", arch: "amd64", version: "0.0.1" };

interface Rig {
  harness: Harness;
  harnessUrl: string;
  ui: ReturnType<typeof inspector>;
  web: InspectorServer;
  token: string;
  platform: AgentPlatform;
}

describe("inspector: the token", () => {
  it("compares tokens by digest: equal only when equal, whatever the length or prefix", async () => {
    const token = "a".repeat(32);
    assert.equal(await tokensEqual(token, token), true);
    assert.equal(await tokensEqual(token.slice(0, 31), token), false, "a prefix");
    assert.equal(await tokensEqual(token + "a", token), false, "longer");
    assert.equal(await tokensEqual("b" + token.slice(1), token), false, "first byte");
    assert.equal(await tokensEqual("", token), false, "empty");
  });

  it("refuses a token shorter than 16 characters, and makes random ones", () => {
    assert.throws(() => new InspectorAuth("short"), TokenTooShortError);
    assert.throws(() => inspector(new Harness(), { token: "x".repeat(15) }), TokenTooShortError);
    const a = randomInspectorToken();
    assert.match(a, /^[0-9a-f]{64}$/);
    assert.notEqual(a, randomInspectorToken());
  });

  it("admits the bearer token or a live session's cookie, nothing else; a code works once", async () => {
    const token = randomInspectorToken();
    const clock = new ManualClock();
    const auth = new InspectorAuth(token, { clock, loginCodeTtlMs: 1_000, sessionTtlMs: 5_000 });
    const headers = (init: Record<string, string>) => new Headers(init);
    const name = auth.cookieName;
    assert.match(name, /^bma_inspector_[0-9a-f]{8}$/);
    assert.notEqual(name, new InspectorAuth(token).cookieName, "each inspector its own cookie");
    assert.equal(await auth.admits(headers({ authorization: `Bearer ${token}` })), true);
    assert.equal(await auth.admits(headers({ cookie: `${name}=${token}` })), false, "no token");
    assert.equal(await auth.admits(headers({})), false);
    assert.equal(await auth.admits(headers({ authorization: `Basic ${token}` })), false);
    assert.equal(await auth.admits(headers({ authorization: `Bearer ${token}x` })), false);
    const code = await auth.issueCode();
    assert.equal(await auth.redeem(token), undefined, "the token is no login code");
    const session = await auth.redeem(code);
    assert.match(session ?? "", /^[0-9a-f]{64}$/);
    assert.notEqual(session, token);
    assert.equal(await auth.redeem(code), undefined, "used once");
    assert.equal(await auth.admits(headers({ cookie: `x=1; ${name}=${session}` })), true);
    assert.equal(await auth.admits(headers({ cookie: `${name}=${session!.slice(1)}` })), false);
    // A bad bearer header is not rescued by a good cookie.
    assert.equal(
      await auth.admits(headers({ authorization: "Bearer nope", cookie: `${name}=${session}` })),
      false,
    );
    await clock.advance(5_000);
    assert.equal(await auth.admits(headers({ cookie: `${name}=${session}` })), false, "expired");
    const late = await auth.issueCode();
    await clock.advance(1_000);
    assert.equal(await auth.redeem(late), undefined, "a code expires unused");
    const codes = [];
    for (let i = 0; i < 17; i++) codes.push(await auth.issueCode());
    assert.equal(await auth.redeem(codes[0]), undefined, "the oldest of 17 waiting is dropped");
    assert.ok(await auth.redeem(codes[16]));
  });
});

describe("inspector: clipping what executors send", () => {
  it("bounds strings, members and depth, redacts secrets, and keeps __proto__ a plain member", () => {
    assert.match(String(clip("x".repeat(100), 10)), /^x{10}… \(90 more\)$/);
    const clipped = clip({ a: "y".repeat(50), b: "z".repeat(50) }, 30) as Record<string, string>;
    assert.ok(clipped.a.length < 50, "one budget for the whole value");
    assert.equal(clipped.b, undefined);
    assert.equal(clipped["…"], "more", "what was left out is marked");
    const hostile = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}');
    const copy = clip(hostile, 1000) as Record<string, unknown>;
    assert.deepEqual(Object.keys(copy), ["__proto__", "a"]);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    let deep: unknown = "bottom";
    for (let i = 0; i < 50; i++) deep = { deep };
    assert.ok(JSON.stringify(clip(deep, 10_000)).length < 400, "depth is bounded");
    assert.deepEqual(
      clip({
        command: "deploy",
        env: { GITHUB_TOKEN: "ghp_x", HOME: "/h" },
        api_key: "k",
        git_credentials: true,
      }, 1000),
      Object.assign(Object.create(null), {
        command: "deploy",
        git_credentials: true,
        env: Object.assign(Object.create(null), { GITHUB_TOKEN: "[redacted]", HOME: "/h" }),
        api_key: "[redacted]",
      }),
      "secret-named members are never shown",
    );
    const wide = clip(Array.from({ length: 1000 }, (_, i) => i), 100_000) as unknown[];
    assert.equal(wide.length, 201);
  });

  it("ships page scripts that parse and never write markup", () => {
    for (const [name, script] of Object.entries({ APP_JS, MACHINE_JS, DOM_JS })) {
      // ES modules: their import and export keywords aside, the body parses as a function's.
      const body = script.replace(/^import .*$/gm, "").replace(/^export /gm, "");
      assert.doesNotThrow(() => new Function(body), name);
      assert.ok(!/innerHTML|outerHTML|insertAdjacentHTML|document\.write/.test(script), name);
    }
  });
});

describe("inspector: the handler", { timeout: 60_000 }, () => {
  const closing: (() => Promise<unknown> | unknown)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await Promise.resolve(close()).catch(() => {});
  });

  async function rig(): Promise<Rig> {
    const platform = new AgentPlatform({ retry: { initialDelayMs: 5, maxDelayMs: 50 } });
    const harness = new Harness({ insecureNoAuth: true, agent: platform });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closing.push(() => server.close(), () => harness.close());
    const token = randomInspectorToken();
    const ui = inspector(harness, { token, maxBodyBytes: 64 * 1024 });
    const web = await serveInspector(ui);
    closing.push(() => web.close(), () => ui.close());
    return { harness, harnessUrl: server.url, ui, web, token, platform };
  }

  async function executor(r: Rig, name = INFO.name): Promise<ExecutorClient> {
    const client = new ExecutorClient({ harnessUrl: r.harnessUrl, executor: { ...INFO, name } });
    client.tools.bash.handle(async ({ command }, ctx) => {
      ctx.progress({ output: { stream: "stdout", text: `running ${command}\n` } });
      if (command === "wait") {
        await new Promise<void>((resolve) => {
          if (ctx.signal.aborted) resolve();
          ctx.signal.addEventListener("abort", () => resolve(), { once: true });
        });
      }
      return { stdout: `ran ${command}`, stderr: "", exit_code: 0 };
    });
    closing.push(() => client.stop());
    await client.start();
    return client;
  }

  const auth = (r: Rig, init: RequestInit = {}): RequestInit => ({
    ...init,
    headers: {
      authorization: `Bearer ${r.token}`,
      ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
      ...(init.headers as Record<string, string> | undefined),
    },
  });
  const post = (r: Rig, path: string, body: unknown = {}) =>
    fetch(`${r.web.url}${path}`, auth(r, { method: "POST", body: JSON.stringify(body) }));
  // deno-lint-ignore no-explicit-any
  const state = async (r: Rig): Promise<any> =>
    await (await fetch(`${r.web.url}/api/state`, auth(r))).json();
  // deno-lint-ignore no-explicit-any
  async function eventually<T>(r: Rig, pick: (s: any) => T | undefined, what: string): Promise<T> {
    for (let i = 0; i < 500; i++) {
      const found = pick(await state(r));
      if (found !== undefined && found !== false) return found;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`never happened: ${what}`);
  }

  it("answers 401 to every page and endpoint without the token, and to a used login code", async () => {
    const r = await rig();
    const paths: [string, string][] = [
      ["GET", "/"],
      ["GET", "/app.js"],
      ["GET", "/app.css"],
      ["GET", "/api/state"],
      ["GET", "/api/stream"],
      ["GET", "/no/such/page"],
      ["POST", "/api/login-links"],
      ["POST", "/api/executors/x/sessions"],
      ["POST", "/api/executors/x/drain"],
      ["POST", "/api/executors/x/turns"],
      ["POST", "/api/sessions/x/calls"],
      ["POST", "/api/sessions/x/calls/y/cancel"],
      ["POST", "/api/sessions/x/stop"],
      ["POST", "/api/interactions/x/respond"],
      ["GET", "/login"],
      ["GET", `/login?code=${r.token}`],
    ];
    const presented: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: `Bearer ${r.token.slice(0, -1)}` },
      { authorization: r.token },
      { cookie: `bma_inspector=${"0".repeat(64)}` },
      { cookie: `bma_inspector_00000000=${r.token}` },
    ];
    for (const [method, path] of paths) {
      for (const headers of presented) {
        const response = await fetch(`${r.web.url}${path}`, {
          method,
          headers: {
            ...headers,
            ...(method === "POST" ? { "content-type": "application/json" } : {}),
          },
          ...(method === "POST" ? { body: "{}" } : {}),
        });
        const text = await response.text();
        assert.equal(response.status, 401, `${method} ${path} ${JSON.stringify(headers)}`);
        assert.ok(!text.includes(r.token), "the refusal does not carry the token");
        assert.equal(response.headers.get("set-cookie"), null);
      }
    }

    const login = await r.ui.loginUrl(r.web.url);
    assert.ok(login.startsWith(`${r.web.url}/login?code=`), login);
    assert.ok(!login.includes(r.token), "the login URL does not carry the token");
    const first = await fetch(login, { redirect: "manual" });
    assert.equal(first.status, 303);
    assert.equal(first.headers.get("location"), "/");
    const cookie = first.headers.get("set-cookie") ?? "";
    assert.match(
      cookie,
      /^bma_inspector_[0-9a-f]{8}=[0-9a-f]{64}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/,
    );
    assert.ok(!cookie.includes(r.token), "the cookie holds a session, not the token");
    const page = await fetch(`${r.web.url}/`, { headers: { cookie: cookie.split(";")[0] } });
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    assert.match(await page.text(), /<script type="module" src="app.js">/);
    const again = await fetch(login, { redirect: "manual" });
    assert.equal(again.status, 401, "a login URL works once");
    await again.text();
  });

  it("shows executors with their tools' schemas, and runs sessions and tool calls through the API", async () => {
    const r = await rig();
    await executor(r);
    const view = await eventually(
      r,
      (s) => s.executors.find((e: { name: string }) => e.name === INFO.name),
      "the executor registered",
    );
    assert.equal(view.protocol, "bma.executor.v1.1");
    assert.equal(view.connected, true);
    assert.ok(view.leaseExpiresAt > Date.now() - 1000);
    const bash = view.tools.find((t: { name: string }) => t.name === "bash");
    assert.equal(bash.builtIn, true);
    assert.deepEqual(bash.inputSchema.required, ["command"]);
    assert.match(bash.inputSchema.properties.command.description, /Shell command line/);

    const assigned = await post(r, `/api/executors/${view.id}/sessions`, { session_id: "ses_api" });
    assert.equal(assigned.status, 201);
    assert.deepEqual(await assigned.json(), { session_id: "ses_api" });
    await eventually(
      r,
      (s) =>
        s.sessions.find((x: { id: string; state: string }) =>
          x.id === "ses_api" && x.state === "ready"
        ),
      "the session ready",
    );

    const called = await post(r, "/api/sessions/ses_api/calls", {
      tool: "bash",
      input: { command: "ls" },
    });
    assert.equal(called.status, 202);
    const { tool_call_id } = await called.json();
    const call = await eventually(
      r,
      (s) =>
        s.calls.find((c: { id: string; state: string }) =>
          c.id === tool_call_id && c.state === "settled"
        ),
      "the call settled",
    );
    assert.equal(call.tool, "bash");
    assert.deepEqual(call.input, { command: "ls" });
    assert.equal(call.outcome, "completed");
    assert.deepEqual(call.result.structured_content, {
      stdout: "ran ls",
      stderr: "",
      exit_code: 0,
    });
    assert.deepEqual(call.output, [{ stream: "stdout", text: "running ls\n" }]);
    // The ack and the result may come in one read: only their order after the dispatch holds.
    assert.ok(call.dispatchedAt <= call.settledAt, "timed on the harness clock");

    // Input the contract refuses: 400 with the issue's path, nothing sent.
    const refused = await post(r, "/api/sessions/ses_api/calls", {
      tool: "bash",
      input: { command: "" },
    });
    assert.equal(refused.status, 400);
    const { error } = await refused.json();
    assert.equal(error.code, "invalid_params");
    assert.deepEqual(error.data.issues[0].path, ["input", "command"]);
    const calls = (await state(r)).calls;
    assert.equal(calls.filter((c: { state: string }) => c.state === "refused").length, 1);

    // Bad requests: typed answers, nothing done.
    assert.equal((await post(r, "/api/sessions/ses_nope/calls", { tool: "bash" })).status, 404);
    assert.equal((await post(r, "/api/executors/exec_nope/drain")).status, 404);
    assert.equal((await post(r, "/api/sessions/ses_api/calls", { input: {} })).status, 400);
    assert.equal(
      (await post(r, "/api/sessions/ses_api/calls", { tool: "bash", input: [1] })).status,
      400,
    );
    const notJson = await fetch(
      `${r.web.url}/api/sessions/ses_api/stop`,
      auth(r, { method: "POST", body: "{nope" }),
    );
    assert.equal(notJson.status, 400);
    const form = await fetch(`${r.web.url}/api/sessions/ses_api/stop`, {
      method: "POST",
      headers: { authorization: `Bearer ${r.token}`, "content-type": "text/plain" },
      body: "{}",
    });
    assert.equal(form.status, 415, "only JSON: a cross-site form cannot post");
    const foreign = await fetch(`${r.web.url}/api/sessions/ses_api/stop`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${r.token}`,
        "content-type": "application/json",
        origin: "http://evil.example",
      },
      body: "{}",
    });
    assert.equal(foreign.status, 403);
    const big = await post(r, "/api/sessions/ses_api/calls", {
      tool: "bash",
      input: { command: "x".repeat(70 * 1024) },
    });
    assert.equal(big.status, 413);
    await Promise.all([notJson.text(), form.text(), foreign.text(), big.text()]);
    assert.equal(
      (await state(r)).sessions.find((s: { id: string }) => s.id === "ses_api").state,
      "ready",
    );

    // Cancel a running call, then drain the executor and stop the session.
    const running = await (await post(r, "/api/sessions/ses_api/calls", {
      tool: "bash",
      input: { command: "wait" },
    })).json();
    await eventually(
      r,
      (s) =>
        s.calls.find((c: { id: string; output: unknown[] }) =>
          c.id === running.tool_call_id && c.output.length
        ),
      "the call runs",
    );
    const canceled = await post(r, `/api/sessions/ses_api/calls/${running.tool_call_id}/cancel`);
    assert.equal(canceled.status, 200);
    assert.equal((await canceled.json()).canceled, true);
    const ended = await eventually(
      r,
      (s) =>
        s.calls.find((c: { id: string; state: string }) =>
          c.id === running.tool_call_id && c.state === "settled"
        ),
      "the call canceled",
    );
    assert.equal(ended.outcome, "canceled");

    const drained = await post(r, `/api/executors/${view.id}/drain`);
    assert.equal(drained.status, 200);
    await drained.json();
    await eventually(
      r,
      (s) =>
        s.executors.find((e: { id: string; draining: boolean }) => e.id === view.id && e.draining),
      "the executor draining",
    );
    const stopped = await post(r, "/api/sessions/ses_api/stop", { reason: "done here" });
    assert.equal(stopped.status, 202);
    await stopped.json();
    const session = await eventually(
      r,
      (s) =>
        s.sessions.find((x: { id: string; state: string }) =>
          x.id === "ses_api" && x.state === "ended"
        ),
      "the session ended",
    );
    assert.ok(session.reason);
    const late = await post(r, "/api/sessions/ses_api/calls", {
      tool: "bash",
      input: { command: "ls" },
    });
    assert.equal(late.status, 409, "an ended session takes no call");
    assert.equal((await late.json()).error.code, "session_ended");
  });

  it("streams a snapshot, then updates, and ends the stream on close", async () => {
    const r = await rig();
    const response = await fetch(`${r.web.url}/api/stream`, auth(r));
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    // deno-lint-ignore no-explicit-any
    const next = async (): Promise<{ event: string; data: any }> => {
      for (;;) {
        const at = buffer.indexOf("\n\n");
        if (at >= 0) {
          const frame = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          if (frame.startsWith(":")) continue;
          const event = /^event: (.*)$/m.exec(frame)![1];
          return { event, data: JSON.parse(/^data: (.*)$/m.exec(frame)![1]) };
        }
        const { done, value } = await reader.read();
        if (done) throw new Error("stream ended");
        buffer += value;
      }
    };
    const snapshot = await next();
    assert.equal(snapshot.event, "snapshot");
    assert.deepEqual(snapshot.data.executors, []);
    await executor(r, "streamed");
    const ops: string[] = [];
    while (!ops.includes("executor")) {
      const { event, data } = await next();
      assert.equal(event, "update");
      for (const update of data.updates) {
        ops.push(update.op);
        if (update.op === "executor") assert.equal(update.executor.name, "streamed");
      }
    }
    r.ui.close();
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
    }
  });

  it("answers an agent turn's approval through the executor that asked", async () => {
    const r = await rig();
    const client = new ExecutorClient({ harnessUrl: r.harnessUrl, executor: INFO });
    const answers: unknown[] = [];
    serveAgent(client, {
      async runTurn(turn) {
        const toolUseId = turn.eventId();
        await turn.emit({
          type: "agent.tool_use",
          name: "bash",
          input: { command: "make" },
          evaluated_permission: "ask",
        }, { eventId: toolUseId });
        answers.push(
          await turn.requestInteraction({
            kind: "permission",
            interaction_id: await approvalId(turn.sessionId, "bash", "make"),
            tool_use_id: toolUseId,
            title: "Run make?",
          }),
        );
      },
    });
    closing.push(() => client.stop());
    await client.start();
    const agent = await eventually(
      r,
      (s) => s.executors.find((e: { agent: boolean }) => e.agent),
      "the agent executor",
    );
    const started = await post(r, `/api/executors/${agent.id}/turns`, {
      session_id: "ses_turn",
      text: "build it",
    });
    assert.equal(started.status, 201);
    const { turn_id } = await started.json();
    const open = await eventually(
      r,
      (s) => s.interactions.find((i: { status: string }) => i.status === "open"),
      "the approval asked",
    );
    assert.equal(open.sessionId, "ses_turn");
    assert.equal(open.interaction.title, "Run make?");
    assert.equal(open.interaction.turn_id, turn_id);
    const bad = await post(r, `/api/interactions/${open.id}/respond`, { outcome: "maybe" });
    assert.equal(bad.status, 400);
    await bad.text();
    const responded = await post(r, `/api/interactions/${open.id}/respond`, {
      outcome: "approved",
    });
    assert.equal(responded.status, 202);
    await responded.text();
    await eventually(r, () => answers.length === 1 || undefined, "the turn got its answer");
    assert.equal((answers[0] as { outcome: string }).outcome, "approved");
    assert.equal(r.platform.interaction(open.id)?.status, "resolved");
    const turn = await eventually(
      r,
      (s) =>
        s.turns.find((t: { turnId: string; state: string }) =>
          t.turnId === turn_id && t.state !== "running"
        ),
      "the turn ended",
    );
    assert.equal(turn.state, "completed");
    const types = (await state(r)).events.map((e: { type: string }) => e.type);
    assert.ok(
      types.includes("agent.tool_use") && types.includes("session.status_idle"),
      types.join(),
    );
  });

  it("serves under a base path: its login, page and API there, the token's cookie scoped to it", async () => {
    const harness = new Harness({ insecureNoAuth: true });
    closing.push(() => harness.close());
    const token = randomInspectorToken();
    const ui = inspector(harness, { token, basePath: "/tools/inspector/" });
    closing.push(() => ui.close());
    const login = await ui.loginUrl("http://127.0.0.1:9/ignored/path");
    assert.match(login, /^http:\/\/127\.0\.0\.1:9\/tools\/inspector\/login\?code=\w+$/);
    const entered = await ui.fetch(new Request(login));
    assert.equal(entered.status, 303);
    assert.equal(entered.headers.get("location"), "/tools/inspector/");
    assert.match(entered.headers.get("set-cookie") ?? "", /; Path=\/tools\/inspector; Max-Age=/);
    const bearer = { authorization: `Bearer ${token}` };
    const at = (path: string) =>
      ui.fetch(new Request(`http://127.0.0.1:9${path}`, { headers: bearer }));
    assert.equal((await at("/tools/inspector/api/state")).status, 200);
    assert.equal((await at("/tools/inspector/")).status, 200);
    const bare = await at("/tools/inspector");
    assert.equal(bare.status, 308);
    assert.equal(bare.headers.get("location"), "/tools/inspector/");
    assert.equal((await at("/api/state")).status, 404, "nothing outside the base path");
    const outside = await ui.fetch(new Request("http://127.0.0.1:9/api/state"));
    assert.equal(outside.status, 401, "and without the token, 401 there too");
  });

  it("keeps what it was told to: finished calls beyond the limit are forgotten, pending ones kept", async () => {
    const platform = new AgentPlatform();
    const harness = new Harness({ insecureNoAuth: true, agent: platform });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closing.push(() => server.close(), () => harness.close());
    const token = randomInspectorToken();
    const ui = inspector(harness, { token, limits: { calls: 2 } });
    closing.push(() => ui.close());
    assert.equal(DEFAULT_INSPECTOR_LIMITS.calls, 200);
    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO });
    client.tools.bash.handle(({ command }) => ({ stdout: command, stderr: "", exit_code: 0 }));
    closing.push(() => client.stop());
    await client.start();
    const session = await (await harness.waitExecutor()).assignSession({ session_id: "ses_lim" });
    await session.ready();
    for (let i = 0; i < 5; i++) {
      await session.callTool({
        tool: "bash",
        input: { command: `c${i}` },
        tool_call_id: `call_${i}`,
      });
    }
    const snapshot = await (await ui.fetch(
      new Request("http://127.0.0.1/api/state", { headers: { authorization: `Bearer ${token}` } }),
    )).json();
    assert.deepEqual(snapshot.calls.map((c: { id: string }) => c.id), ["call_3", "call_4"]);
  });
});
