/// <reference lib="dom" />
/**
 * The inspector for a user who comes back to it, in a real headless Chromium (as
 * `browser.test.ts`: the npm-shipped build, driven by `playwright-core`, against inspectors on
 * 127.0.0.1 over real harnesses and real `ExecutorClient`s). A browser without a session is
 * told how to get in (an HTML page; API clients still get JSON 401s) and a new link logs it in
 * again; its cookie outlives the browser (Max-Age) and is this inspector's own (two inspectors
 * side by side stay logged in); "edit as JSON" submits whatever fields the schema requires; the
 * sessions' "since" ticks; an action's error shows once, beside its button; a gone executor
 * looks gone, its actions gone with it; the page works at 360 px wide; the favicon is served; a
 * stopped harness leaves a page that says so everywhere, every action off.
 *
 * Runs from Node (where playwright-core drives Chromium). `BMA_CHROMIUM` names another
 * Chromium binary; `BMA_UPDATE_SCREENSHOT=1` writes `docs/inspector-narrow.png` (the page at
 * 360 px; `browser.test.ts` writes the desktop one, `docs/inspector.png`).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  ExecutorClient,
  Harness,
  type HarnessServer,
  inspector,
  type InspectorServer,
  randomInspectorToken,
  serveInspector,
} from "../../node.ts";
import * as z from "zod";
import { CHROMIUM_ARGS, chromiumEnv, chromiumPath } from "../helpers/chromium.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const NARROW_SCREENSHOT = fileURLToPath(
  new URL("../../docs/inspector-narrow.png", import.meta.url),
);
const UPDATE_SCREENSHOTS = process.env.BMA_UPDATE_SCREENSHOT === "1";

type Playwright = typeof import("playwright-core");
type Browser = Awaited<ReturnType<Playwright["chromium"]["launch"]>>;
type BrowserContext = Awaited<ReturnType<Browser["newContext"]>>;
type Page = Awaited<ReturnType<Browser["newPage"]>>;

/** A harness with its inspector, served on 127.0.0.1, and the executors started on it. */
interface Rig {
  readonly harness: Harness;
  readonly server: HarnessServer;
  readonly ui: ReturnType<typeof inspector>;
  readonly web: InspectorServer;
  readonly token: string;
  readonly clients: ExecutorClient[];
  /** Stops it as `bma-harness` does: its servers, the inspector's included, then the harness. */
  stop(): Promise<void>;
}

async function rig(loginHint?: string): Promise<Rig> {
  const harness = new Harness({ insecureNoAuth: true });
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  const token = randomInspectorToken();
  const ui = inspector(harness, { token, ...(loginHint ? { loginHint } : {}) });
  const web = await serveInspector(ui);
  const clients: ExecutorClient[] = [];
  let stopped: Promise<void> | undefined;
  return {
    harness,
    server,
    ui,
    web,
    token,
    clients,
    stop: () =>
      stopped ??= (async () => {
        ui.close();
        await web.close();
        await server.close();
        await harness.close();
        for (const client of clients) await client.stop().catch(() => {});
      })(),
  };
}

/** An executor with one custom tool whose input has a required member. */
async function echoExecutor(on: Rig, name: string): Promise<ExecutorClient> {
  const client = new ExecutorClient({
    harnessUrl: on.server.url,
    executor: { name, os: "linux", arch: "amd64", version: "1.0.0" },
  });
  client.tool("echo", {
    description: "Says its text back",
    input: z.object({ text: z.string().describe("What to say") }),
  }, (args) => ({ content: [{ type: "text", text: `echo:${args.text}` }] }));
  on.clients.push(client);
  await client.start();
  return client;
}

describe("inspector in Chromium: coming back to it", {
  timeout: 180_000,
  skip: RUNTIME !== "node" && "playwright-core drives Chromium from Node",
}, () => {
  const rigs: Rig[] = [];
  let browser: Browser;
  let context: BrowserContext;
  let main: Rig;
  let page: Page;
  const pageErrors: string[] = [];

  before(async () => {
    const { chromium } = await import("playwright-core");
    browser = await chromium.launch({
      executablePath: await chromiumPath(),
      args: [...CHROMIUM_ARGS],
      env: chromiumEnv(),
    });
    context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    context.setDefaultTimeout(20_000);
    main = await rig("Type login-link in the terminal of bma-harness to print one.");
    rigs.push(main);
    page = await context.newPage();
    page.on("pageerror", (error) => pageErrors.push(error.message));
  });

  after(async () => {
    await browser?.close();
    for (const r of rigs) await r.stop().catch(() => {});
  });

  async function logIn(on: Rig, into: Page): Promise<void> {
    const response = await into.goto(await on.ui.loginUrl(on.web.url));
    assert.equal(response?.status(), 200);
    await into.locator("#conn", { hasText: "live" }).waitFor();
  }

  const card = (name: string) => page.locator(".card.executor", { hasText: name });

  /** Whether the page is wider than its window (it scrolls sideways). */
  const overflows = (p: Page) =>
    p.evaluate(() => {
      const root = document.documentElement;
      return root.scrollWidth > root.clientWidth
        ? `${root.scrollWidth} > ${root.clientWidth}: ` +
          [...document.querySelectorAll("body *")]
            .filter((el) => el.getBoundingClientRect().right > root.clientWidth + 0.5)
            .slice(0, 5)
            .map((el) => `${el.tagName.toLowerCase()}#${el.id}.${el.className}`)
            .join(", ")
        : "";
    });

  it("tells a browser without a session how to get in, and a new link logs it in again", async () => {
    const login = await main.ui.loginUrl(main.web.url);
    assert.equal((await page.goto(login))?.status(), 200);
    await page.locator("#conn", { hasText: "live" }).waitFor();

    // The session cookie outlives the browser (Max-Age: 12 h), and is this inspector's own.
    const [cookie, ...others] = await context.cookies(main.web.url);
    assert.deepEqual(others, []);
    assert.match(cookie.name, /^bma_inspector_[0-9a-f]+$/);
    assert.ok(cookie.expires > Date.now() / 1000 + 11 * 3600, `expires ${cookie.expires}`);
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");

    // The link again: a page saying it was used, and how to get another.
    const again = await page.goto(login);
    assert.equal(again?.status(), 401);
    assert.match(again?.headers()["content-type"] ?? "", /^text\/html/);
    const used = page.locator("#login-help[data-reason='link']");
    await used.waitFor();
    assert.match(await used.textContent() ?? "", /used already, or it has expired/);
    assert.match(await used.textContent() ?? "", /bma-harness --ui/);
    assert.match(await used.textContent() ?? "", /POST \/api\/login-links/);
    assert.equal(
      await page.locator("#login-hint").textContent(),
      "Type login-link in the terminal of bma-harness to print one.",
    );
    // Styled through its CSP's hash: the inline style applies.
    assert.equal(
      await page.evaluate(() => getComputedStyle(document.querySelector("main")!).maxWidth),
      "640px",
    );

    // The cookie gone (a cleared browser, an expired session): the page says how to get in.
    await context.clearCookies();
    const page401 = await page.goto(`${main.web.url}/`);
    assert.equal(page401?.status(), 401);
    await page.locator("#login-help[data-reason='session']", { hasText: "no live session" })
      .waitFor();
    await page.setViewportSize({ width: 360, height: 800 });
    assert.equal(await overflows(page), "", "the login help fits 360 px");
    await page.setViewportSize({ width: 1360, height: 900 });

    // API clients keep their JSON 401.
    for (const accept of [undefined, "application/json", "*/*", "text/event-stream"]) {
      const response = await fetch(`${main.web.url}/api/state`, {
        headers: accept ? { accept } : {},
      });
      assert.equal(response.status, 401, accept);
      assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
      assert.deepEqual(await response.json(), {
        error: { code: "unauthorized", message: "token needed" },
      });
    }

    // A new link, from the API with the token (what a script or a CLI command does).
    const minted = await fetch(`${main.web.url}/api/login-links`, {
      method: "POST",
      headers: { authorization: `Bearer ${main.token}`, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(minted.status, 201);
    const { url } = await minted.json() as { url: string };
    assert.equal((await page.goto(url))?.status(), 200);
    await page.locator("#conn", { hasText: "live" }).waitFor();
    assert.equal(page.url(), `${main.web.url}/`);
  });

  it("serves the favicon, to the page and to the login help", async () => {
    const seen: [string, number][] = [];
    const onResponse = (r: { url(): string; status(): number }) => seen.push([r.url(), r.status()]);
    page.on("response", onResponse);
    try {
      await page.reload();
      await page.locator("#conn", { hasText: "live" }).waitFor();
    } finally {
      page.off("response", onResponse);
    }
    assert.deepEqual(
      seen.filter(([, status]) => status >= 400),
      [],
      "nothing the page loads fails",
    );
    const icon = await page.evaluate(async () => {
      const link = document.querySelector<HTMLLinkElement>("link[rel='icon']");
      if (!link) return null;
      const r = await fetch(link.href);
      return { status: r.status, type: r.headers.get("content-type"), body: await r.text() };
    });
    assert.equal(icon?.status, 200);
    assert.equal(icon?.type, "image/svg+xml");
    assert.match(icon?.body ?? "", /^<svg /);
    for (const path of ["/favicon.svg", "/favicon.ico"]) {
      const r = await fetch(`${main.web.url}${path}`);
      assert.equal(r.status, 200, path);
      assert.equal(r.headers.get("content-type"), "image/svg+xml");
      await r.body?.cancel();
    }
  });

  it("keeps two inspectors side by side logged in, each with its own cookie", async () => {
    const second = await rig();
    rigs.push(second);
    const other = await context.newPage();
    try {
      await logIn(second, other);
      await page.reload();
      await page.locator("#conn", { hasText: "live" }).waitFor();
      await other.reload();
      await other.locator("#conn", { hasText: "live" }).waitFor();
      const names = (await context.cookies()).map((c) => c.name).sort();
      assert.equal(names.length, 2);
      assert.notEqual(names[0], names[1]);
      // Both pages' API calls are admitted.
      for (const p of [page, other]) {
        assert.equal(await p.evaluate(async () => (await fetch("api/state")).status), 200);
      }
    } finally {
      await other.close();
    }
  });

  it("submits the call form when edited as JSON, whatever fields the schema requires", async () => {
    await echoExecutor(main, "echo-executor");
    const echo = card("echo-executor");
    await echo.locator(".badge", { hasText: "connected" }).waitFor();
    await echo.locator("input[aria-label='session id']").fill("ses_json");
    await echo.locator("button.assign").click();
    await page.locator("tr[data-session='ses_json'] .badge", { hasText: "ready" }).waitFor();
    await page.locator("#call-session").selectOption("ses_json");
    await page.locator("#call-tool").selectOption("echo");
    const text = page.locator("#call-fields [data-name='text']");
    assert.equal(await text.getAttribute("required"), "");

    await page.locator("#call-raw").check();
    assert.equal(await page.locator("#call-fields").isVisible(), false, "the fields make way");
    await page.locator("#call-json").fill('{ "text": "from-json" }');
    await page.locator("#call-submit").click();
    const row = page.locator("tr.call[data-state='settled']", { hasText: "echo" });
    await row.waitFor();
    const id = await row.getAttribute("data-call");
    await page.locator(`[data-call-details="${id}"] pre.result-text`, { hasText: "echo:from-json" })
      .waitFor();
    assert.equal(await page.locator("#call-error").textContent(), "");

    // Back to the fields: they hold what the JSON said.
    await page.locator("#call-raw").uncheck();
    assert.equal(await text.inputValue(), "from-json");
    assert.equal(await text.isEnabled(), true);
  });

  it("ticks the sessions' since column", async () => {
    const since = page.locator("tr[data-session='ses_json'] td.since");
    const first = await since.textContent();
    assert.match(first ?? "", / ago$/);
    await page.waitForFunction(
      (before) => {
        const cell = document.querySelector("tr[data-session='ses_json'] td.since");
        return cell !== null && cell.textContent !== before;
      },
      first,
    );
  });

  it("works at 360 px wide, with no sideways scrolling", async () => {
    const narrow = await context.newPage();
    try {
      await narrow.setViewportSize({ width: 360, height: 780 });
      await narrow.goto(`${main.web.url}/`);
      await narrow.locator("#conn", { hasText: "live" }).waitFor();
      await narrow.locator(".card.executor", { hasText: "echo-executor" }).waitFor();
      await narrow.locator("tr.call").first().waitFor();
      await narrow.locator("tr.call button.details").first().click();
      await narrow.locator("tr.call-details").first().waitFor();
      await narrow.locator("#login-link").click();
      await narrow.locator("#login-url").waitFor();
      assert.equal(await overflows(narrow), "");
      await narrow.locator("#call-raw").check();
      assert.equal(await overflows(narrow), "");
      await narrow.locator("#call-raw").uncheck();
      if (UPDATE_SCREENSHOTS) {
        writeFileSync(NARROW_SCREENSHOT, await narrow.screenshot({ fullPage: true }));
      }
    } finally {
      await narrow.close();
    }
  });

  it("shows an action's error once, beside the button that caused it", async () => {
    const echo = card("echo-executor");
    await echo.locator("button.drain").click();
    await echo.locator(".badge", { hasText: "draining" }).waitFor();
    await echo.locator("input[aria-label='session id']").fill("ses_refused");
    await echo.locator("button.assign").click();
    const error = echo.locator(".action-error:not([hidden])");
    await error.waitFor();
    assert.equal(await error.count(), 1);
    const text = await error.textContent() ?? "";
    assert.match(text, /^session_refused: session ses_refused refused \(draining\)$/);
    assert.equal(text.split("draining").length, 2, `"draining" once: ${text}`);
    assert.equal(
      await error.evaluate((el) => el.previousElementSibling?.classList.contains("assign")),
      true,
      "beside the Assign button",
    );
    // Nowhere else on the page.
    assert.equal(await page.locator("#notices-section").isVisible(), false);
    assert.equal(await page.locator("text=refused (draining)").count(), 1);
  });

  it("shows a gone executor as gone, without its actions", async () => {
    const client = await echoExecutor(main, "leaving-executor");
    const leaving = card("leaving-executor");
    await leaving.locator(".badge", { hasText: "connected" }).waitFor();
    await leaving.locator(".lease", { hasText: "lease expires in" }).waitFor();
    assert.equal(await leaving.locator("button.assign").isVisible(), true);

    await client.stop();
    await page.locator(".card.executor[data-state='gone']", { hasText: "leaving-executor" })
      .waitFor();
    await leaving.locator(".badge", { hasText: "gone: closed" }).waitFor();
    assert.doesNotMatch(await leaving.locator(".lease").textContent() ?? "", /expires in/);
    for (const action of ["button.assign", "button.drain", "input[aria-label='session id']"]) {
      assert.equal(await leaving.locator(action).isVisible(), false, action);
      assert.equal(await leaving.locator(action).isEnabled(), false, action);
    }
    assert.equal(await leaving.locator("button:visible").count(), 0);
    assert.equal(await leaving.locator(".badge", { hasText: /^connected$/ }).count(), 0);
  });

  it("shows a stopped harness everywhere, every action off", async () => {
    assert.equal(await page.locator("body.offline").count(), 0);
    assert.ok(await page.locator("#live button:enabled").count() > 0);
    await main.stop();
    await page.locator("body.offline").waitFor();
    await page.locator("#offline", { hasText: "Lost the harness" }).waitFor();
    assert.doesNotMatch(await page.locator("#conn").textContent() ?? "", /live/);
    // The executor connected when the harness stopped is not known to be anything now.
    await page.locator(".card.executor[data-state='unknown']", { hasText: "echo-executor" })
      .waitFor();
    await card("echo-executor").locator(".badge", { hasText: "unknown: harness unreachable" })
      .waitFor();
    // No part of the page still reads connected or live.
    for (
      const state of await page.locator(".card.executor").evaluateAll((cards) =>
        cards.map((c) => (c as HTMLElement).dataset.state)
      )
    ) {
      assert.ok(state === "unknown" || state === "gone", state);
    }
    assert.equal(
      await page.locator(".card.executor .badge", { hasText: /^connected$/ }).count(),
      0,
    );
    assert.equal(await page.locator(".card.executor .lease", { hasText: "expires in" }).count(), 0);
    for (const badge of await page.locator("#sessions .badge").allTextContents()) {
      assert.match(badge, /last known|ended/);
    }
    // Every action is off.
    assert.equal(
      await page.locator("button:enabled, input:enabled, select:enabled, textarea:enabled").count(),
      0,
    );
    assert.equal(await page.locator("#login-link").isDisabled(), true);
    assert.deepEqual(pageErrors, [], "the page threw nothing");
  });
});
