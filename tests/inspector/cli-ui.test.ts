/**
 * `bma-harness --ui`: the real CLI process serves the inspector on 127.0.0.1 on a port of its
 * own and prints a one-time URL (a code, never the token); without the URL's cookie nothing
 * answers; with it, the page's API sees an executor that dials the CLI and runs a tool call;
 * `quit` closes the inspector with the harness. Runs the CLI on the test's own runtime.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { ExecutorClient } from "../../node.ts";
import { Lines } from "../cli/cli-helpers.ts";
import { finished, spawnTs } from "../helpers/runtime-command.ts";

describe("bma-harness --ui", { timeout: 60_000 }, () => {
  const children: ChildProcess[] = [];
  const clients: ExecutorClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.stop().catch(() => {});
    for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  });

  it("serves the inspector behind a one-time URL, and closes it on quit", async () => {
    const child = spawnTs("cli/harness.node.ts", ["--port", "0", "--ui"], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    children.push(child);
    const exit = finished(child);
    const out = new Lines(child.stdout!, "bma-harness");
    const harnessUrl = (await out.match(/^listening (ws:\/\/127\.0\.0\.1:\d+)$/)).match[1];
    const login = (await out.match(/^inspector (http:\/\/127\.0\.0\.1:\d+\/login\?code=\w+)$/))
      .match[1];
    const base = new URL(login).origin;
    assert.notEqual(new URL(base).port, new URL(harnessUrl).port, "a port of its own");

    for (const path of ["/", "/app.js", "/api/state", "/api/stream"]) {
      const refused = await fetch(`${base}${path}`);
      assert.equal(refused.status, 401, path);
      await refused.text();
    }
    const entered = await fetch(login, { redirect: "manual" });
    assert.equal(entered.status, 303);
    const cookie = (entered.headers.get("set-cookie") ?? "").split(";")[0];
    assert.match(cookie, /^bma_inspector_[0-9a-f]{8}=[0-9a-f]{64}$/);
    assert.ok(!out.lines.join("\n").includes(cookie.split("=")[1]), "the token is never printed");
    const reused = await fetch(login, { redirect: "manual" });
    assert.equal(reused.status, 401, "the printed URL works once");
    await reused.text();
    // A browser whose cookie is gone is told how to get in; login-link prints a new URL.
    const help = await fetch(`${base}/`, { headers: { accept: "text/html" } });
    assert.equal(help.status, 401);
    assert.match(await help.text(), /Type login-link in the terminal running bma-harness/);
    const printed = out.lines.length;
    child.stdin!.write("login-link\n");
    const again =
      (await out.match(/^inspector (http:\/\/127\.0\.0\.1:\d+\/login\?code=\w+)$/, printed))
        .match[1];
    assert.notEqual(again, login, "a new code");
    const back = await fetch(again, { redirect: "manual" });
    assert.equal(back.status, 303, "the new URL logs in");
    await back.text();

    const headers = { cookie, "content-type": "application/json" };
    // deno-lint-ignore no-explicit-any
    const state = async (): Promise<any> =>
      await (await fetch(`${base}/api/state`, { headers })).json();
    async function eventually<T>(pick: (s: any) => T | undefined, what: string): Promise<T> {
      for (let i = 0; i < 1000; i++) {
        const found = pick(await state());
        if (found) return found;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error(`never happened: ${what}`);
    }
    assert.deepEqual((await state()).executors, []);

    const client = new ExecutorClient({
      harnessUrl,
      executor: { name: "dialed-the-cli", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    client.tools.bash.handle(({ command }) => ({
      stdout: `ok ${command}`,
      stderr: "",
      exit_code: 0,
    }));
    clients.push(client);
    await client.start();
    const executor = await eventually(
      (s) => s.executors.find((e: { name: string }) => e.name === "dialed-the-cli"),
      "the executor on the page",
    );
    const assigned = await fetch(`${base}/api/executors/${executor.id}/sessions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ session_id: "ses_cli" }),
    });
    assert.equal(assigned.status, 201);
    await assigned.text();
    await eventually(
      (s) => s.sessions.find((x: { id: string; state: string }) => x.state === "ready"),
      "the session ready",
    );
    const called = await fetch(`${base}/api/sessions/ses_cli/calls`, {
      method: "POST",
      headers,
      body: JSON.stringify({ tool: "bash", input: { command: "from-the-page" } }),
    });
    assert.equal(called.status, 202);
    const { tool_call_id } = await called.json();
    const call = await eventually(
      (s) =>
        s.calls.find((c: { id: string; state: string }) =>
          c.id === tool_call_id && c.state === "settled"
        ),
      "the call settled",
    );
    assert.equal(call.result.structured_content.stdout, "ok from-the-page");

    child.stdin!.end("quit\n");
    const result = await exit;
    assert.equal(result.code, 0, result.stderr);
    await assert.rejects(fetch(`${base}/api/state`, { headers }), "the inspector closed with it");
  });

  it("refuses a bad --ui-port", async () => {
    const child = spawnTs("cli/harness.node.ts", ["--port", "0", "--ui-port", "nope"]);
    children.push(child);
    const result = await finished(child);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /--ui-port takes 0-65535/);
  });
});
