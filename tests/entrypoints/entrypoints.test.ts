/**
 * The runtime entry points (`node.ts`, `deno.ts`, `bun.ts`, `workers.ts`): each re-exports the
 * whole portable API with its runtime's transports injected. Runs on every runtime with that
 * runtime's entry point; the Workers entry runs in workerd (Miniflare), from Node.
 *
 * The conformance matrix (tests/conformance/) pairs runtimes with each other; this file checks
 * what a single runtime does with its own entry point: its harness over a Unix socket, its
 * harness dialing its own listening executor, and the listener's rules.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type * as Entry from "../../node.ts";
import * as portable from "../../mod.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const INFO = { name: "entry", os: "linux", arch: "amd64", version: "1.0.0" };
const dir = mkdtempSync(join(tmpdir(), "bma-entry-"));
let sockets = 0;
const socket = () => join(dir, `s${++sockets}.sock`);

after(() => rmSync(dir, { recursive: true, force: true }));

function bash(client: Entry.ExecutorClient): void {
  client.tools.bash.handle(({ command }) => ({
    stdout: `${RUNTIME} ran ${command}`,
    stderr: "",
    exit_code: 0,
  }));
}

describe(`${RUNTIME}.ts entry point`, { timeout: 60_000 }, () => {
  it("re-exports every name of mod.ts, the same objects but ExecutorClient and Harness", () => {
    const entry = sdk as unknown as Record<string, unknown>;
    for (const [name, value] of Object.entries(portable)) {
      assert.ok(name in entry, name);
      if (name === "ExecutorClient" || name === "Harness") continue;
      assert.equal(entry[name], value, name);
    }
    // The runtime's classes are the portable ones with defaults injected.
    assert.notEqual(sdk.ExecutorClient, portable.ExecutorClient);
    assert.ok(sdk.ExecutorClient.prototype instanceof portable.ExecutorClient);
    assert.ok(sdk.Harness.prototype instanceof portable.Harness);
    assert.equal(typeof sdk.dialWebSocket, "function");
    assert.equal(typeof sdk.serveWebSocket, "function");
  });

  it("serves and dials over a Unix socket with no options but the URL", async () => {
    const harness = new sdk.Harness();
    const server = await harness.serveUnix(socket());
    assert.match(server.url, /^unix:\/\//);
    const client = new sdk.ExecutorClient({ harnessUrl: server.url, executor: INFO });
    bash(client);
    try {
      assert.equal((await client.start()).protocol, "bma.executor.v1.1");
      const session = await (await harness.waitExecutor()).assignSession({ session_id: "s1" });
      await session.ready();
      const result = await session.tools.bash.call({ command: "ls" });
      assert.equal(result.structured_content?.stdout, `${RUNTIME} ran ls`);
    } finally {
      await client.stop();
      await harness.close();
    }
  });

  it("takes a named pipe name through the Unix socket code path", async () => {
    // Windows named pipes cannot exist here; on Linux node:net treats `\\.\pipe\name` as a
    // socket file relative to the working directory, so the pipe branch of every preset (URL,
    // server, dialer) runs on the tested Unix socket path.
    const pipe = `\\\\.\\pipe\\bma-entry-${RUNTIME}-${process.pid}`;
    const harness = new sdk.Harness();
    try {
      const server = await harness.serveUnix(pipe);
      assert.equal(server.url, pipe);
      const client = new sdk.ExecutorClient({ harnessUrl: pipe, executor: INFO });
      bash(client);
      assert.equal((await client.start()).protocol, "bma.executor.v1.1");
      await client.stop();
    } finally {
      await harness.close();
      rmSync(pipe, { force: true });
    }
  });

  it("listens while the harness dials: register, a tool call, and the end of the link", async () => {
    const path = socket();
    const client = new sdk.ExecutorClient({ executor: INFO });
    bash(client);
    const listener = await client.listen(`unix://${path}`);
    assert.equal(listener.url, `unix://${path}`);
    const harness = new sdk.Harness();
    try {
      const link = await harness.dial(listener.url);
      const registration = await listener.registered;
      assert.equal(registration.protocol, "bma.executor.v1.1");
      const executor = await harness.waitExecutor();
      assert.equal(executor.id, registration.executor_id);
      assert.ok(link.connected);
      const session = await executor.assignSession({ session_id: "s1" });
      await session.ready();
      const result = await session.tools.bash.call({ command: "pwd" });
      assert.equal(result.structured_content?.stdout, `${RUNTIME} ran pwd`);
      // A second harness is refused before the upgrade while one is connected.
      const second = await sdk.dialWebSocket(listener.url, { protocols: ["bma.executor.v1.1"] })
        .then(() => "connected", (error: Entry.DialError) => error.status);
      assert.equal(second, 409);
      // The executor stops for good (executor.close, 1000): the link ends instead of redialing.
      await client.stop();
      assert.deepEqual(await link.closed, { code: 1000, reason: "executor stopped" });
      assert.equal(existsSync(path), false);
    } finally {
      await client.stop();
      await harness.close();
    }
  });

  it("refuses listen() on a URL that is not a local socket, and a second start", async () => {
    const client = new sdk.ExecutorClient({ executor: INFO });
    await assert.rejects(client.listen("ws://127.0.0.1:1"), sdk.ExecutorConfigError);
    await client.listen(`unix://${socket()}`);
    await assert.rejects(client.listen(`unix://${socket()}`), sdk.ExecutorConfigError);
    await client.stop();
    // Stopped before any harness dialed in: the first registration never comes.
    const late = new sdk.ExecutorClient({ executor: INFO });
    const { registered } = await late.listen(`unix://${socket()}`);
    await late.stop();
    await assert.rejects(registered, sdk.ClientStoppedError);
  });

  it("portable classes without transports say what is missing", async () => {
    const harness = new portable.Harness();
    await assert.rejects(harness.dial("unix:///nowhere.sock"), portable.NoDialerError);
    const client = new portable.ExecutorClient({ executor: INFO });
    await assert.rejects(client.listen("unix:///nowhere.sock"), portable.ExecutorConfigError);
  });
});

describe("package entry points", () => {
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const read = (file: string) => JSON.parse(readFileSync(join(root, file), "utf8"));
  const jsr: Record<string, string> = read("deno.json").exports;
  const npm: Record<string, { types: string; default: string }> = read("package.json").exports;

  it("npm exports the same subpaths as JSR (deno.json), /agent included", () => {
    assert.deepEqual(Object.keys(npm).sort(), Object.keys(jsr).sort());
    assert.ok("./agent" in npm);
  });

  it("each npm subpath is the compiled form of the same source module as on JSR", () => {
    for (const [subpath, source] of Object.entries(jsr)) {
      assert.ok(existsSync(join(root, source)), source);
      const compiled = source.replace(/^\.\//, "./dist/").replace(/\.ts$/, "");
      assert.deepEqual(npm[subpath], { types: `${compiled}.d.ts`, default: `${compiled}.js` });
    }
  });
});

describe("workers.ts entry point", {
  timeout: 60_000,
  skip: RUNTIME !== "node" && "Miniflare runs from Node",
}, () => {
  it("its ExecutorClient runs in workerd and dials a harness with fetch + Upgrade", async () => {
    const { build } = await import("esbuild");
    const { Miniflare } = await import("miniflare");
    const bundle = await build({
      entryPoints: [fileURLToPath(new URL("./executor-worker.ts", import.meta.url))],
      bundle: true,
      write: false,
      format: "esm",
      platform: "browser",
      target: "es2022",
      conditions: ["workerd", "worker", "browser"],
      logLevel: "silent",
    });
    const mf = new Miniflare({
      modules: true,
      script: bundle.outputFiles[0].text,
      compatibilityDate: "2025-09-01",
    });
    const harness = new sdk.Harness({ insecureNoAuth: true });
    try {
      const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      const running = mf.dispatchFetch(
        `http://localhost/run?url=${encodeURIComponent(server.url)}`,
      );
      const executor = await harness.waitExecutor();
      assert.equal(executor.info.os, "workerd");
      const session = await executor.assignSession({ session_id: "s1" });
      await session.ready();
      const result = await session.tools.bash.call({ command: "ls" });
      assert.equal(result.structured_content?.stdout, "workerd ran ls");
      await executor.close("done");
      const response = await running;
      assert.deepEqual(await response.json(), {
        protocol: "bma.executor.v1.1",
        closed: "executor_close",
      });
    } finally {
      await harness.close();
      await mf.dispose();
    }
  });
});
