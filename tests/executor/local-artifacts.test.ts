/**
 * Nothing lost with a local harness: an executor that dialed a harness directly (`ws://` on
 * 127.0.0.1, `unix:///path.sock`), without any base URL, uploads a large bash result to that
 * harness's artifact endpoint (over HTTP on the same origin, or through the same Unix socket),
 * and the artifact block of `tool.result` names what the harness stored. With this runtime's
 * presets on both ends (Node, Deno, Bun), and with the `bma-executor` CLI as a child process.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ArtifactBlock, ContentBlock } from "../../protocol/mod.ts";
import {
  type Harness as NodeHarness,
  type HarnessServer,
  MemoryArtifactStore,
} from "../../harness/node.ts";
import {
  ArtifactUploadError,
  type ExecutorClient as NodeExecutorClient,
  UPLOAD_ATTEMPTS,
} from "../../executor/node.ts";
import { localHarnessOrigin } from "../../executor/credentials.ts";
import { EXECUTOR_CLI, printed, spawnTs } from "../helpers/runtime-command.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const { Harness } = await import(`../../harness/${RUNTIME}.ts`) as {
  Harness: typeof NodeHarness;
};
const { ExecutorClient } = await import(`../../executor/${RUNTIME}.ts`) as {
  ExecutorClient: typeof NodeExecutorClient;
};

const INFO = { name: "local-artifacts", os: "linux", arch: "x64", version: "0.0.1" };
/** Far over the inline limit, with a recognizable middle (cut from the preview). */
const STDOUT = `${"head ".repeat(20_000)}THE MIDDLE${" tail".repeat(20_000)}\n`;

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function localHarness(
  unix: boolean,
): Promise<{ harness: NodeHarness; server: HarnessServer }> {
  const harness = new Harness({ insecureNoAuth: true });
  cleanups.push(() => harness.close());
  let server: HarnessServer;
  if (unix) {
    const dir = mkdtempSync(join(tmpdir(), "bma-local-artifacts-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    server = await harness.serveUnix(join(dir, "harness.sock"));
  } else server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  cleanups.push(() => server.close());
  return { harness, server };
}

function artifactBlocks(content: ContentBlock[]): ArtifactBlock[] {
  return content.filter((b): b is ArtifactBlock => b.type === "artifact");
}

for (const unix of [false, true]) {
  const over = unix ? "unix://" : "ws://";
  describe(`a local harness over ${over} (${RUNTIME} presets)`, { timeout: 30_000 }, () => {
    it("receives the large output of a bash call as an artifact it can read", async () => {
      const { harness, server } = await localHarness(unix);
      assert.ok(server.url.startsWith(over), server.url);
      const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO });
      cleanups.push(() => client.stop());
      client.tools.bash.handle(() => ({ stdout: STDOUT, stderr: "", exit_code: 0 }));
      await client.start();
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_big" });
      const result = await session.tools.bash.call({ command: "make big" });
      assert.equal(result.outcome, "completed");
      assert.equal(result.structured_content?.truncated, true);
      assert.ok(!String(result.structured_content?.stdout).includes("THE MIDDLE"), "a preview");
      const [block, ...more] = artifactBlocks(result.content);
      assert.equal(more.length, 0);
      assert.ok(block, "an artifact block");
      assert.deepEqual(result.artifacts.map((a) => a.artifact_id), [block.artifact_id]);
      const stored = await harness.artifacts.get(block.artifact_id);
      assert.ok(stored, "the harness stored what the block names");
      assert.equal(new TextDecoder().decode(stored.bytes), STDOUT);
      assert.equal(block.size, new TextEncoder().encode(STDOUT).byteLength);
      assert.equal(stored.environment_id, "local");
      assert.match(block.name ?? "", /\.stdout\.txt$/);
    });
  });
}

describe("an upload answered 503 (a harness restarting, a standby)", { timeout: 30_000 }, () => {
  it("is tried again after the client's backoff, and the result names the artifact", async () => {
    const { harness, server } = await localHarness(false);
    let answered503 = 0;
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: INFO,
      retry: { initialDelayMs: 5, maxDelayMs: 10 },
      // The first six uploads meet a harness that cannot take them yet (a restart's seconds).
      fetch: (input, init) => {
        if (String(input).endsWith("/artifacts") && answered503 < 6) {
          answered503++;
          return Promise.resolve(Response.json({ error: "standby" }, { status: 503 }));
        }
        return fetch(input, init);
      },
    });
    cleanups.push(() => client.stop());
    client.tools.bash.handle(() => ({ stdout: STDOUT, stderr: "", exit_code: 0 }));
    await client.start();
    const session = await (await harness.waitExecutor()).assignSession({ session_id: "ses_503" });
    const result = await session.tools.bash.call({ command: "make big" });
    assert.equal(answered503, 6);
    const [block] = artifactBlocks(result.content);
    // Before, the first 503 left the result with its preview only ("full output not uploaded").
    assert.ok(block, JSON.stringify(result.content));
    const stored = await harness.artifacts.get(block.artifact_id);
    assert.equal(new TextDecoder().decode(stored?.bytes), STDOUT);
  });

  it("lets go of each attempt's stream of bytes when the answer came without reading it", async () => {
    const { server } = await localHarness(false);
    let opened = 0;
    let cancelled = 0;
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: INFO,
      retry: { initialDelayMs: 5, maxDelayMs: 10 },
      // Answered at once, the body never read (a 503 before it, as a proxy may).
      fetch: (input, init) =>
        String(input).endsWith("/artifacts")
          ? Promise.resolve(Response.json({ error: "unavailable" }, { status: 503 }))
          : fetch(input, init),
    });
    cleanups.push(() => client.stop());
    const error = await client.uploadArtifact({
      name: "spooled.bin",
      // A file read as it is sent, as a spooled bash output is on Deno.
      data: () => {
        opened++;
        return new ReadableStream<Uint8Array>({
          pull: (controller) => controller.enqueue(new Uint8Array(64 * 1024)),
          cancel: () => void cancelled++,
        });
      },
    }).then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof ArtifactUploadError, String(error));
    assert.equal(error.status, 503);
    assert.equal(opened, UPLOAD_ATTEMPTS, "each attempt with a stream of its own");
    // Before, every stream stayed open, held by the fetch that never read it.
    assert.equal(cancelled, UPLOAD_ATTEMPTS);
  });
});

describe("a full artifact store", { timeout: 30_000 }, () => {
  it("refuses the upload (507): the result keeps its preview and names no artifact", async () => {
    const store = new MemoryArtifactStore({ maxBytes: 50_000 });
    const harness = new Harness({ insecureNoAuth: true, artifacts: store });
    cleanups.push(() => harness.close());
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    cleanups.push(() => server.close());
    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO });
    cleanups.push(() => client.stop());
    client.tools.bash.handle(({ command }) => ({
      stdout: command === "big" ? STDOUT : "small",
      stderr: "",
      exit_code: 0,
    }));
    await client.start();
    const session = await (await harness.waitExecutor()).assignSession({ session_id: "ses_full" });
    const result = await session.tools.bash.call({ command: "big" });
    assert.equal(result.outcome, "completed");
    assert.equal(result.structured_content?.truncated, true);
    assert.deepEqual(artifactBlocks(result.content), []);
    assert.deepEqual(result.artifacts, []);
    assert.equal(store.size, 0);
    const next = await session.tools.bash.call({ command: "small" });
    assert.equal(next.structured_content?.stdout, "small");
  });
});

describe("bma-executor --harness without BMA_BASE_URL", { timeout: 60_000 }, () => {
  for (const unix of [false, true]) {
    it(`uploads a large bash result to the harness it dialed (${unix ? "unix://" : "ws://"})`, async () => {
      const { harness, server } = await localHarness(unix);
      const workdir = mkdtempSync(join(tmpdir(), "bma-local-artifacts-work-"));
      mkdirSync(join(workdir, "w"));
      cleanups.push(() => rmSync(workdir, { recursive: true, force: true }));
      const env: Record<string, string> = { ...process.env as Record<string, string> };
      delete env.BMA_BASE_URL;
      delete env.BMA_HARNESS_URL;
      const child = spawnTs(EXECUTOR_CLI, [
        "--harness",
        server.url,
        "--workdir",
        join(workdir, "w"),
        "--name",
        "cli-local",
        "--log-level",
        "warn",
      ], { env });
      const exited = new Promise((resolve) => child.once("exit", resolve));
      cleanups.push(async () => {
        child.kill("SIGTERM");
        await exited;
      });
      await printed(child, "registered ");
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_cli_big" });
      await session.ready();
      const result = await session.tools.bash.call({
        command: "head -c 300000 /dev/zero | tr '\\0' a; echo; echo done",
      });
      assert.equal(result.outcome, "completed");
      const [block] = artifactBlocks(result.content);
      assert.ok(block, "an artifact block");
      const stored = await harness.artifacts.get(block.artifact_id);
      assert.ok(stored, "the harness stored it");
      const text = new TextDecoder().decode(stored.bytes);
      assert.equal(text, `${"a".repeat(300_000)}\ndone\n`);
    });
  }
});

describe("localHarnessOrigin", () => {
  it("is the same origin over HTTP, or the socket through socketFetch", async () => {
    assert.deepEqual(localHarnessOrigin("ws://127.0.0.1:7700/v1/executors/connect", undefined), {
      baseUrl: "http://127.0.0.1:7700",
    });
    assert.deepEqual(localHarnessOrigin("wss://harness.example:8443/", undefined), {
      baseUrl: "https://harness.example:8443",
    });
    assert.deepEqual(localHarnessOrigin("unix:///run/bma.sock", undefined), {
      baseUrl: undefined,
    });
    const seen: [string, string][] = [];
    const viaSocket = localHarnessOrigin("unix:///run/bma.sock", (path, request) => {
      seen.push([path, request.url]);
      return Promise.resolve(new Response("{}", { status: 201 }));
    });
    assert.equal(viaSocket.baseUrl, "http://localhost");
    const response = await viaSocket.fetch!("http://localhost/v1/executors/artifacts", {
      method: "POST",
      body: "x",
    });
    assert.equal(response.status, 201);
    assert.deepEqual(seen, [["/run/bma.sock", "http://localhost/v1/executors/artifacts"]]);
  });
});
