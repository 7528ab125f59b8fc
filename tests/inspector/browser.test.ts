/**
 * The inspector in a real browser: headless Chromium (the npm-shipped build of
 * `tests/helpers/chromium.ts`, driven by `playwright-core` with `executablePath`) against an inspector served on 127.0.0.1, over a
 * real harness whose executors are real `ExecutorClient`s — one serving the machine's tools
 * (`serveMachine`: real bash in a temp workdir), one the example bash agent that asks for an
 * approval before it runs a command. The page watches the executor register, calls `bash` from
 * the form built from the contract's schema and shows its progress and result, cancels a
 * running call, answers an agent turn's approval, stops a session and drains an executor,
 * renders hostile executor strings as text, and nothing answers without the token.
 *
 * Runs from Node (where playwright-core drives Chromium). `BMA_CHROMIUM` names another
 * Chromium binary; `BMA_UPDATE_SCREENSHOT=1` writes the screenshot to `docs/inspector.png`.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  AgentPlatform,
  ExecutorClient,
  Harness,
  type HarnessServer,
  inspector,
  type InspectorServer,
  randomInspectorToken,
  serveAgent,
  serveInspector,
  serveMachine,
} from "../../node.ts";
import { createBashAgent } from "../../agent/examples/bash-agent.node.ts";
import * as z from "zod";
import { CHROMIUM_ARGS, chromiumEnv, chromiumPath } from "../helpers/chromium.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const SCREENSHOT = fileURLToPath(new URL("../../docs/inspector.png", import.meta.url));

type Playwright = typeof import("playwright-core");
type Browser = Awaited<ReturnType<Playwright["chromium"]["launch"]>>;
type Page = Awaited<ReturnType<Browser["newPage"]>>;

describe("inspector in Chromium", {
  timeout: 120_000,
  skip: RUNTIME !== "node" && "playwright-core drives Chromium from Node",
}, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-inspector-"));
  const workdir = join(dir, "machine");
  const agentDir = join(dir, "agent");
  mkdirSync(workdir);
  mkdirSync(agentDir);
  const clients: ExecutorClient[] = [];
  let harness: Harness;
  let server: HarnessServer;
  let ui: ReturnType<typeof inspector>;
  let web: InspectorServer;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  before(async () => {
    const { chromium } = await import("playwright-core");
    harness = new Harness({ insecureNoAuth: true, agent: new AgentPlatform() });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    ui = inspector(harness, { token: randomInspectorToken() });
    web = await serveInspector(ui);
    browser = await chromium.launch({
      executablePath: await chromiumPath(),
      args: [...CHROMIUM_ARGS],
      env: chromiumEnv(),
    });
    page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    page.setDefaultTimeout(20_000);
    page.on("pageerror", (error) => pageErrors.push(error.message));
  });

  after(async () => {
    await browser?.close();
    for (const client of clients) await client.stop().catch(() => {});
    ui?.close();
    await web?.close();
    await harness?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(client: ExecutorClient): Promise<void> {
    clients.push(client);
    await client.start();
  }

  const card = (name: string) => page.locator(".card.executor", { hasText: name });
  const callRow = (state?: string) =>
    page.locator(state ? `tr.call[data-state="${state}"]` : "tr.call");

  it("refuses every page and endpoint without the token, in the browser too", async () => {
    const context = await browser.newContext();
    try {
      const visitor = await context.newPage();
      for (const path of ["/", "/app.js", "/api/state", "/api/stream"]) {
        const response = await visitor.goto(`${web.url}${path}`);
        assert.equal(response?.status(), 401, path);
      }
      const posted = await visitor.evaluate(async () => {
        const r = await fetch("/api/login-links", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        return r.status;
      });
      assert.equal(posted, 401);
    } finally {
      await context.close();
    }
  });

  it("logs in through a one-time URL and watches an executor register", async () => {
    const login = await ui.loginUrl(web.url);
    const response = await page.goto(login);
    assert.equal(response?.status(), 200);
    assert.equal(page.url(), `${web.url}/`, "the code is gone from the address bar");
    await page.locator("#conn", { hasText: "live" }).waitFor();
    await page.locator("#executors .empty").waitFor();
    const again = await (await fetch(login, { redirect: "manual" })).status;
    assert.equal(again, 401, "the login URL worked once");

    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "machine-executor", os: "linux", arch: "amd64", version: "1.2.3" },
    });
    serveMachine(client, { workdir, cgroups: false });
    await start(client);
    const machine = card("machine-executor");
    await machine.waitFor();
    await machine.locator(".badge", { hasText: "connected" }).waitFor();
    await machine.locator(".badge", { hasText: "bma.executor.v1.1" }).waitFor();
    await machine.locator(".lease", { hasText: "lease expires in" }).waitFor();
    for (const tool of ["bash", "read", "write", "edit", "glob", "grep"]) {
      await machine.locator(".chip.tool", { hasText: tool }).first().waitFor();
    }
  });

  it("calls bash from the form built from the contract, and shows its progress and result", async () => {
    const machine = card("machine-executor");
    await machine.locator("input[aria-label='session id']").fill("ses_browser");
    await machine.locator("button.assign").click();
    await page.locator("tr[data-session='ses_browser'] .badge", { hasText: "ready" }).waitFor();
    await page.locator("#call-session").selectOption("ses_browser");
    await page.locator("#call-tool").selectOption("bash");
    // The form's fields are the contract's: bash's input schema, with its descriptions.
    const command = page.locator("#call-fields [data-name='command']");
    assert.equal(await command.getAttribute("required"), "");
    await page.locator("#call-fields", { hasText: "Shell command line" }).waitFor();
    await page.locator("#call-fields [data-name='timeout_ms'][type='number']").waitFor();

    // Runs until the test lets it finish: its first line shows while it is running.
    await command.fill("echo first-line; while [ ! -e go ]; do sleep 0.05; done; echo second-line");
    await page.locator("#call-submit").click();
    const running = callRow("acknowledged");
    await running.waitFor();
    const id = await running.getAttribute("data-call");
    const details = page.locator(`[data-call-details="${id}"]`);
    await details.locator("pre.output", { hasText: "first-line" }).waitFor();
    assert.equal(await details.locator("pre.output").textContent(), "first-line\n");
    await running.locator(".timing", { hasText: "running" }).waitFor();

    writeFileSync(join(workdir, "go"), "");
    const done = page.locator(`tr.call[data-call="${id}"][data-state="settled"]`);
    await done.waitFor();
    assert.equal(await done.getAttribute("data-outcome"), "completed");
    await done.locator(".badge", { hasText: "completed" }).waitFor();
    await done.locator(".timing", { hasText: "done +" }).waitFor();
    await details.locator("pre.output", { hasText: "second-line" }).waitFor();
    const structured = JSON.parse(await details.locator("pre.result").textContent() ?? "");
    assert.deepEqual(structured, { stdout: "first-line\nsecond-line\n", stderr: "", exit_code: 0 });

    // Input the contract refuses is answered in the form, and nothing runs.
    await command.fill("");
    await command.evaluate((el) => el.removeAttribute("required"));
    await page.locator("#call-submit").click();
    await page.locator("#call-error", { hasText: "input.command" }).waitFor();
    await callRow("refused").waitFor();
    assert.equal(await callRow("refused").count(), 1);
  });

  it("cancels a running call (and the page is saved with a finished and a running call)", async () => {
    await page.locator("#call-fields [data-name='command']").fill("echo waiting; sleep 60");
    await page.locator("#call-submit").click();
    const running = callRow("acknowledged");
    await running.waitFor();
    const id = await running.getAttribute("data-call");
    await page.locator(`[data-call-details="${id}"] pre.output`, { hasText: "waiting" }).waitFor();

    const shot = await page.screenshot({ fullPage: true });
    assert.equal(shot.subarray(1, 4).toString(), "PNG");
    if (process.env.BMA_UPDATE_SCREENSHOT === "1") writeFileSync(SCREENSHOT, shot);

    await running.locator("button.cancel").click();
    const canceled = page.locator(`tr.call[data-call="${id}"][data-state="settled"]`);
    await canceled.waitFor();
    assert.equal(await canceled.getAttribute("data-outcome"), "canceled");
  });

  it("answers the approval an agent turn asks for", async () => {
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "agent-executor", os: "linux", arch: "amd64", version: "0.1.0" },
    });
    serveAgent(client, createBashAgent({ workdir: agentDir }));
    await start(client);
    const agent = card("agent-executor");
    await agent.waitFor();
    await agent.locator("textarea.turn-text").fill("$ echo approved-from-the-page");
    await agent.locator("input.turn-session").fill("ses_agent");
    await agent.locator("button.start-turn").click();

    const card_ = page.locator("[data-interaction][data-status='open']");
    await card_.waitFor();
    await card_.locator("pre.prompt", { hasText: "echo approved-from-the-page" }).waitFor();
    await page.locator("tr.turn[data-state='running']").waitFor();
    await card_.locator("button.approve", { hasText: "Allow" }).click();

    await page.locator("[data-interaction][data-status='resolved']").waitFor();
    const result = page.locator(".entry[data-event='agent.tool_result']");
    await result.waitFor();
    assert.match(await result.textContent() ?? "", /approved-from-the-page/);
    await page.locator("tr.turn[data-state='completed']").waitFor();
    await page.locator(".entry[data-event='agent.message']", { hasText: "done" }).waitFor();
  });

  it("stops a session and drains an executor", async () => {
    await page.locator("tr[data-session='ses_browser'] button.stop").click();
    await page.locator("tr[data-session='ses_browser'] .badge", { hasText: "ended" }).waitFor();
    const machine = card("machine-executor");
    await machine.locator("button.drain").click();
    await machine.locator(".badge", { hasText: "draining" }).waitFor();
    assert.equal(harness.executors.find((e) => e.info.name === "machine-executor")?.draining, true);
  });

  it("shows what executors send as text, never as markup", async () => {
    const hostile = '<img src=x onerror="window.__pwned=1">';
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: hostile, os: "<b>os</b>", arch: "amd64", version: "<script>x</script>" },
    });
    client.tool("danger", {
      description: "<script>window.__pwned=2</script>",
      input: z.object({ "<svg onload=window.__pwned=3>": z.string().describe(hostile).optional() }),
    }, () => ({ content: [{ type: "text", text: hostile }] }));
    await start(client);
    const evil = card(hostile);
    await evil.waitFor();
    assert.equal(await evil.locator("img").count(), 0);
    assert.match(await evil.locator("h3").textContent() ?? "", /<img src=x/);
    await evil.locator("input[aria-label='session id']").fill("ses_evil");
    await evil.locator("button.assign").click();
    await page.locator("tr[data-session='ses_evil'] .badge", { hasText: "ready" }).waitFor();
    await page.locator("#call-session").selectOption("ses_evil");
    await page.locator("#call-tool").selectOption("danger");
    await page.locator("#call-description", { hasText: "<script>" }).waitFor();
    await page.locator("#call-submit").click();
    const row = page.locator("tr.call[data-state='settled']", { hasText: "danger" });
    await row.waitFor();
    const id = await row.getAttribute("data-call");
    await page.locator(`[data-call-details="${id}"] pre.result-text`, { hasText: "<img" })
      .waitFor();
    assert.equal(await page.locator("main img, main svg, main script").count(), 0);
    assert.equal(
      await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned),
      undefined,
    );
    assert.deepEqual(pageErrors, [], "the page threw nothing");
  });
});
