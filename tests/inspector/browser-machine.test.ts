/// <reference lib="dom" />
/**
 * The machine page of the inspector in a real headless Chromium (as `browser.test.ts`: the
 * npm-shipped build driven by `playwright-core`), over a real harness and a real
 * `ExecutorClient` serving the machine (`serveMachine`: real PTYs, processes and files in a temp
 * workdir). From the sessions table to `machine.html`: a terminal in xterm.js that types a
 * command and shows its output, follows the window's size (`stty size` says so), and shows every
 * byte after a reload, the bytes written while no page was there included; the session's
 * processes listed, their stdout and stderr read, one signalled; the workdir browsed, a file
 * downloaded and one uploaded (larger than one transfer chunk), both byte for byte; an ended
 * session turns the page's actions off; the page fits 360 px.
 *
 * Runs from Node (where playwright-core drives Chromium). `BMA_CHROMIUM` names another
 * Chromium binary; `BMA_UPDATE_SCREENSHOT=1` writes `docs/inspector-machine.png`.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  ExecutorClient,
  Harness,
  type HarnessServer,
  inspector,
  type InspectorServer,
  randomInspectorToken,
  serveInspector,
  serveMachine,
  type Session,
} from "../../node.ts";
import { CHROMIUM_ARGS, chromiumEnv, chromiumPath } from "../helpers/chromium.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const SCREENSHOT = fileURLToPath(new URL("../../docs/inspector-machine.png", import.meta.url));

type Playwright = typeof import("playwright-core");
type Browser = Awaited<ReturnType<Playwright["chromium"]["launch"]>>;
type Page = Awaited<ReturnType<Browser["newPage"]>>;

describe("inspector in Chromium: the machine of a session", {
  timeout: 180_000,
  skip: RUNTIME !== "node" && "playwright-core drives Chromium from Node",
}, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-machine-page-"));
  const workdir = join(dir, "work");
  const home = join(dir, "home");
  mkdirSync(workdir);
  mkdirSync(home);
  let harness: Harness;
  let server: HarnessServer;
  let ui: ReturnType<typeof inspector>;
  let web: InspectorServer;
  let client: ExecutorClient;
  let session: Session;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  before(async () => {
    const { chromium } = await import("playwright-core");
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    ui = inspector(harness, { token: randomInspectorToken() });
    web = await serveInspector(ui);
    client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "page-machine", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    // The terminal's shell starts in a HOME of its own: no dotfile of this machine's runs.
    serveMachine(client, { workdir, cgroups: false, env: { HOME: home } });
    await client.start();
    const executor = [...harness.executors.values()][0];
    session = await executor.assignSession({ session_id: "ses_machine_page" });
    await session.ready();
    browser = await chromium.launch({
      executablePath: await chromiumPath(),
      args: [...CHROMIUM_ARGS],
      env: chromiumEnv(),
    });
    page = await browser.newPage({ viewport: { width: 1200, height: 900 }, acceptDownloads: true });
    page.setDefaultTimeout(20_000);
    page.on("pageerror", (error) => pageErrors.push(error.message));
    await page.goto(await ui.loginUrl(web.url));
    await page.locator("#conn", { hasText: "live" }).waitFor();
  });

  after(async () => {
    await browser?.close();
    ui?.close();
    await web?.close();
    await server?.close();
    await harness?.close();
    await client?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  /** The text on the terminal's screen (xterm's DOM rows), one line a row. */
  const screen = () =>
    page.locator("#terminal .xterm-rows").evaluate((rows) =>
      [...rows.children].map((row) => row.textContent ?? "").join("\n")
    );
  async function screenShows(text: string): Promise<void> {
    try {
      await page.waitForFunction(
        (wanted) => {
          const rows = document.querySelector("#terminal .xterm-rows");
          // Rows joined as they are: a line the terminal wrapped reads as one.
          return rows !== null &&
            [...rows.children].map((row) => row.textContent ?? "").join("").includes(wanted);
        },
        text,
      );
    } catch (error) {
      const shown = await screen().catch((e) => `(no screen: ${e})`);
      throw new Error(`the terminal never showed ${JSON.stringify(text)}; it shows:\n${shown}`, {
        cause: error,
      });
    }
  }
  async function type(text: string): Promise<void> {
    await page.locator("#terminal .xterm-helper-textarea").focus();
    await page.keyboard.type(text);
    await page.keyboard.press("Enter");
  }
  /** The terminals the inspector holds for the session, as the page's API lists them. */
  const terminals = () =>
    page.evaluate(async (id) => {
      const r = await fetch(`api/sessions/${id}/terminals`);
      return (await r.json()).terminals as { id: string; cols: number; rows: number }[];
    }, session.id);

  it("opens the machine page from the sessions table", async () => {
    const link = page.locator(`tr[data-session="${session.id}"] a.machine`);
    await link.click();
    await page.waitForURL(/machine\.html\?session=ses_machine_page$/);
    await page.locator("#session-state", { hasText: "ready" }).waitFor();
    await page.locator("#executor-name", { hasText: "page-machine" }).waitFor();
  });

  it("opens a terminal that runs what is typed and shows its output", async () => {
    await page.locator("#terminal-new").click();
    await page.locator("#terminal .xterm-rows").waitFor();
    await page.locator("#terminal-status", { hasText: "connected" }).waitFor();
    await type("echo term-$((6*7))");
    await screenShows("term-42");
    assert.ok(!(await screen()).includes("term-$((6*7))term-42"), "the output is its own line");
  });

  /** The terminal's size once the program was told the size shown (the page's fit landed). */
  async function settledSize(): Promise<{ cols: number; rows: number }> {
    const handle = await page.waitForFunction(() => {
      const box = document.getElementById("terminal")!;
      return box.dataset.size !== undefined && box.dataset.size === box.dataset.sent &&
        box.dataset.size;
    });
    const [cols, rows] = String(await handle.jsonValue()).split("x").map(Number);
    return { cols, rows };
  }

  it("follows the window's size: the program sees the new rows and columns", async () => {
    const before = await settledSize();
    assert.equal((await terminals())[0].cols, before.cols);
    await page.setViewportSize({ width: 760, height: 900 });
    await page.waitForFunction((cols) => {
      const box = document.getElementById("terminal")!;
      return box.dataset.size !== `${cols.cols}x${cols.rows}`;
    }, before);
    const shown = await settledSize();
    const [resized] = await terminals();
    assert.deepEqual({ cols: resized.cols, rows: resized.rows }, shown);
    assert.ok(resized.cols < before.cols, `narrower: ${before.cols} -> ${resized.cols} columns`);
    await type("stty size");
    await screenShows(`${resized.rows} ${resized.cols}`);
  });

  it("shows every byte after a reload, those written while no page was there too", async () => {
    // The reload comes once the line has reached the shell (keys the page has not sent yet
    // would go with it), before its output does.
    await page.locator("#terminal .xterm-helper-textarea").focus();
    await page.keyboard.type("sleep 1; echo later-$((2+3))");
    await screenShows("later-$((2+3))");
    await Promise.all([
      page.waitForResponse((r) =>
        r.url().endsWith("/input") && (r.request().postData() ?? "").includes("\\r")
      ),
      page.keyboard.press("Enter"),
    ]);
    await page.reload();
    await page.locator("#terminal .xterm-rows").waitFor();
    await screenShows("term-42");
    await screenShows("later-5");
    const text = await screen();
    assert.equal(text.split("later-5").length - 1, 1, "the line once (not doubled)\n" + text);
  });

  it("lists the session's processes, reads their output and signals one", async () => {
    await session.executor.request("process.start", {
      session_id: session.id,
      process_id: "proc_page",
      argv: ["sh", "-c", "echo proc-out; echo proc-err >&2; sleep 60"],
    });
    await page.locator("#processes-refresh").click();
    const row = page.locator('tr[data-process="proc_page"]');
    await row.locator(".badge", { hasText: "running" }).waitFor();
    await row.locator("button.output").click();
    await page.locator("#process-text", { hasText: "proc-out" }).waitFor();
    await page.locator("input[name=stream][value=stderr]").check();
    await page.locator('#process-text[data-stream="stderr"]', { hasText: "proc-err" }).waitFor();
    await page.locator("#process-signal").click();
    await row.locator(".badge", { hasText: "SIGTERM" }).waitFor();
  });

  it("browses the workdir and downloads a file byte for byte", async () => {
    mkdirSync(join(workdir, "docs"));
    const content = Buffer.concat([Buffer.from("héllo ✓\n"), randomBytes(900 * 1024)]);
    writeFileSync(join(workdir, "docs", "notes ü.bin"), content);
    await page.reload();
    await page.locator('#files li[data-dir="docs"] button').click();
    const link = page.locator('#files li[data-file="notes ü.bin"] a');
    await link.waitFor();
    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    assert.equal(download.suggestedFilename(), "notes ü.bin");
    const saved = await download.path();
    assert.ok(saved);
    assert.deepEqual(readFileSync(saved), content);
  });

  it("uploads a file into the directory shown", async () => {
    const bytes = randomBytes(1300 * 1024);
    await page.locator("#upload-file").setInputFiles({
      name: "upload.bin",
      mimeType: "application/octet-stream",
      buffer: bytes,
    });
    await page.locator("#upload-submit").click();
    await page.locator("#upload-status", { hasText: "uploaded" }).waitFor();
    await page.locator('#files li[data-file="upload.bin"]').waitFor();
    assert.deepEqual(readFileSync(join(workdir, "docs", "upload.bin")), bytes);
  });

  it("fits 360 px", async () => {
    await page.setViewportSize({ width: 360, height: 800 });
    await page.reload();
    await page.locator("#terminal .xterm-rows").waitFor();
    const overflow = await page.evaluate(() =>
      document.documentElement.scrollWidth - document.documentElement.clientWidth
    );
    assert.equal(overflow, 0, "no sideways scrolling");
    await page.setViewportSize({ width: 1200, height: 900 });
    if (process.env.BMA_UPDATE_SCREENSHOT === "1") {
      await page.reload();
      await page.locator('#files li[data-dir="docs"]').waitFor();
      await type("ls -la docs");
      await screenShows("upload.bin");
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
    }
  });

  it("turns its actions off once the session has ended", async () => {
    await session.stop("done");
    await page.locator("#session-state", { hasText: "ended" }).waitFor();
    assert.equal(
      await page.locator("#live").evaluate((el) => (el as HTMLFieldSetElement).disabled),
      true,
    );
    await page.locator("#terminal-status", { hasText: "exited" }).waitFor();
    assert.deepEqual(pageErrors, []);
  });
});
