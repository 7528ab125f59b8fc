/**
 * `workspace.backup` on the wire: the archive is PUT to a real local HTTP server, unpacked by the
 * system's `tar`, holds links as links (nothing outside is archived), skips the excludes, keeps
 * the URL and headers out of every log and error, and is streamed in bounded memory.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { createServer, type IncomingHttpHeaders } from "node:http";
import { gunzipSync } from "node:zlib";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ForbiddenError, NotFoundError, UnavailableError } from "../../harness/node.ts";
import { Fixtures, machineSession, type MachineSessionOptions } from "./files-fixture.ts";
import { fullCollection } from "../helpers/full-collection.ts";

const OUTSIDE = "OUTSIDE-CONTENT";

interface Received {
  method: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  bytes: number;
}

describe("workspace.backup on the wire", { timeout: 120_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  /** A PUT target on 127.0.0.1 answering `status`; keeps bodies unless `count` only. */
  async function target(options: { status?: number; keep?: boolean } = {}) {
    const received: Received[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      req.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
        if (options.keep !== false) chunks.push(chunk);
      });
      req.on("end", () => {
        received.push({
          method: req.method ?? "",
          headers: req.headers,
          body: Buffer.concat(chunks),
          bytes,
        });
        res.writeHead(options.status ?? 200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    fx.defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as { port: number };
    return { url: `http://127.0.0.1:${port}/backups/ws.tar.gz?X-Sig=SECRET_SIG_123`, received };
  }

  async function workspace(options: MachineSessionOptions = {}) {
    const spool = mkdtempSync(join(tmpdir(), "bma-spool-"));
    fx.defer(() => rmSync(spool, { recursive: true, force: true }));
    const machine = await machineSession(fx, {
      ...options,
      serve: { ...options.serve, limits: { backupSpoolDir: spool, ...options.serve?.limits } },
    });
    const backup = (params: Record<string, unknown>) =>
      machine.executor.request("workspace.backup", {
        session_id: machine.session.id,
        ...params,
      } as never);
    return { ...machine, backup, spool };
  }

  it("PUTs a tar.gz that tar unpacks: links archived as links, excludes skipped, nothing from outside", async () => {
    const put = await target();
    const { top, root, backup, logger, spool } = await workspace();
    mkdirSync(join(top, "outside"));
    writeFileSync(join(top, "outside/secret.txt"), `${OUTSIDE}\n`);
    mkdirSync(join(root, "src/deep"), { recursive: true });
    writeFileSync(join(root, "src/a.ts"), "export const a = 1;\n");
    writeFileSync(join(root, "src/deep/b.ts"), "export const b = 2;\n");
    writeFileSync(join(root, "debug.log"), "noise\n");
    mkdirSync(join(root, "node_modules/pkg"), { recursive: true });
    writeFileSync(join(root, "node_modules/pkg/index.js"), "module.exports = 1;\n");
    symlinkSync(join(top, "outside"), join(root, "outside-dir"));
    symlinkSync(join(top, "outside/secret.txt"), join(root, "outside-file"));
    symlinkSync("src/a.ts", join(root, "a-link.ts"));
    const long = `${"d/".repeat(60)}long-name-${"n".repeat(120)}.txt`;
    mkdirSync(join(root, long, ".."), { recursive: true });
    writeFileSync(join(root, long), "deep\n");

    const result = await backup({
      upload_url: put.url,
      headers: { "x-amz-meta-token": "SECRET_HEADER_456" },
      exclude: ["node_modules/**", "*.log", "--checkpoint-action=exec=touch pwned"],
    });
    assert.equal(put.received.length, 1);
    const [request] = put.received;
    assert.equal(request.method, "PUT");
    assert.equal(request.headers["x-amz-meta-token"], "SECRET_HEADER_456");
    assert.equal(request.headers["content-type"], "application/gzip");
    // Sent with its length: presigned PUT URLs refuse chunked bodies.
    assert.equal(request.headers["content-length"], String(request.body.length));
    assert.equal(request.headers["transfer-encoding"], undefined);
    assert.deepEqual(result, {
      format: "tar.gz",
      size: request.body.length,
      sha256: createHash("sha256").update(request.body).digest("hex"),
      files: 6,
    });

    assert.doesNotMatch(gunzipSync(request.body).toString("latin1"), new RegExp(OUTSIDE));
    const unpacked = mkdtempSync(join(tmpdir(), "bma-unpacked-"));
    fx.defer(() => rmSync(unpacked, { recursive: true, force: true }));
    writeFileSync(join(unpacked, "..", `${unpacked.split("/").at(-1)}.tgz`), request.body);
    execFileSync("tar", ["-xzf", `${unpacked}.tgz`, "-C", unpacked]);
    rmSync(`${unpacked}.tgz`);
    assert.deepEqual(readdirSync(unpacked).sort(), [
      "a-link.ts",
      "d",
      "outside-dir",
      "outside-file",
      "src",
    ]);
    assert.equal(readFileSync(join(unpacked, "src/deep/b.ts"), "utf8"), "export const b = 2;\n");
    assert.equal(readFileSync(join(unpacked, long), "utf8"), "deep\n");
    assert.equal(readlinkSync(join(unpacked, "a-link.ts")), "src/a.ts");
    assert.equal(readlinkSync(join(unpacked, "outside-dir")), join(top, "outside"));
    assert.equal(existsSync(join(root, "pwned")), false);

    assert.doesNotMatch(logger.text(), /SECRET_SIG_123|SECRET_HEADER_456/);
    assert.deepEqual(readdirSync(spool), [], "the spooled archive is removed");
  });

  it("backs up a directory inside; a path outside (or a link out) is -32001 path_outside_workdir", async () => {
    const put = await target();
    const { top, root, backup } = await workspace();
    mkdirSync(join(top, "outside"));
    mkdirSync(join(root, "part"));
    writeFileSync(join(root, "part/only.txt"), "only\n");
    writeFileSync(join(root, "other.txt"), "other\n");
    symlinkSync(join(top, "outside"), join(root, "out"));
    const result = await backup({ upload_url: put.url, path: "part" });
    assert.equal(result.files, 1);
    assert.match(
      execFileSync("tar", ["-tz"], { input: put.received[0].body }).toString(),
      /^only\.txt$/m,
    );
    for (const path of ["..", "out", join(top, "outside")]) {
      await assert.rejects(backup({ upload_url: put.url, path }), (error: unknown) => {
        assert.ok(error instanceof ForbiddenError, path);
        assert.equal((error.data as { reason: string }).reason, "path_outside_workdir");
        return true;
      });
    }
    assert.equal(put.received.length, 1);
  });

  it("a failed upload is -32004 backend_unavailable, naming neither the URL nor the headers", async () => {
    const failing = await target({ status: 500 });
    const { root, backup, logger, spool } = await workspace();
    writeFileSync(join(root, "f.txt"), "x\n");
    for (const upload_url of [failing.url, "http://127.0.0.1:1/unreachable?X-Sig=SECRET_SIG_123"]) {
      await assert.rejects(
        backup({ upload_url, headers: { authorization: "Bearer SECRET_HEADER_456" } }),
        (error: unknown) => {
          assert.ok(error instanceof UnavailableError);
          assert.equal((error.data as { reason: string }).reason, "backend_unavailable");
          assert.doesNotMatch(JSON.stringify([error.message, error.data]), /SECRET/);
          return true;
        },
      );
    }
    assert.doesNotMatch(logger.text(), /SECRET_SIG_123|SECRET_HEADER_456/);
    assert.deepEqual(readdirSync(spool), []);
  });

  it("the session's end stops a backup in flight: unknown_session, the upload cut, then session.ended", async () => {
    // A target that takes the PUT and never answers (a stalled object store).
    let arrived!: () => void;
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    let cut!: () => void;
    const uploadCut = new Promise<void>((resolve) => (cut = resolve));
    const stalled = createServer((req) => {
      req.resume();
      req.once("close", () => cut());
      arrived();
    });
    await new Promise<void>((resolve) => stalled.listen(0, "127.0.0.1", resolve));
    fx.defer(() =>
      new Promise<void>((resolve) => {
        stalled.closeAllConnections();
        stalled.close(() => resolve());
      })
    );
    const { port } = stalled.address() as { port: number };
    const { root, backup, session, spool } = await workspace();
    writeFileSync(join(root, "f.txt"), "x\n");
    const order: string[] = [];
    const running = backup({ upload_url: `http://127.0.0.1:${port}/ws.tar.gz` }).then(
      () => assert.fail("the backup answered success after its session ended"),
      (error: unknown) => {
        order.push("backup answered");
        return error;
      },
    );
    await reached;
    const ended = session.stop().then((end) => {
      order.push("session ended");
      return end;
    });
    const error = await running;
    assert.ok(error instanceof NotFoundError, String(error));
    assert.equal((error.data as { reason: string }).reason, "unknown_session");
    await uploadCut;
    await ended;
    assert.deepEqual(order, ["backup answered", "session ended"]);
    assert.deepEqual(readdirSync(spool), [], "the spooled archive is removed");
  });

  it("a fetch given to serveMachine gets the archive as a stream with its length", async () => {
    const seen: { url: string; length: string | null; bytes: number; digest: string }[] = [];
    const fetchFn = (async (url: string | URL, init?: RequestInit) => {
      const hash = createHash("sha256");
      let bytes = 0;
      for await (const chunk of init!.body as ReadableStream<Uint8Array>) {
        hash.update(chunk);
        bytes += chunk.length;
      }
      seen.push({
        url: String(url),
        length: new Headers(init!.headers).get("content-length"),
        bytes,
        digest: hash.digest("hex"),
      });
      return new Response(null, { status: 201 });
    }) as typeof fetch;
    const { root, backup } = await workspace({ serve: { fetch: fetchFn } });
    writeFileSync(join(root, "f.txt"), "x\n");
    const result = await backup({ upload_url: "https://storage.example/put?sig=1" });
    assert.deepEqual(seen, [{
      url: "https://storage.example/put?sig=1",
      length: String(result.size),
      bytes: result.size,
      digest: result.sha256,
    }]);
  });

  it("streams: memory stays far below the size of the workspace it archives", async () => {
    const put = await target({ keep: false });
    const { root, backup } = await workspace();
    // Incompressible, so each archive is as large as what it holds.
    const fill = async (dir: string, files: number) => {
      await mkdir(join(root, dir));
      for (let i = 0; i < files; i++) {
        await writeFile(join(root, dir, `random-${i}.bin`), randomBytes(16 * 1024 * 1024));
      }
    };
    await fill("warm", 2);
    await fill("measured", 8);
    // A first backup settles the allocator (memory freed but kept by the process for reuse).
    await backup({ upload_url: put.url, path: "warm" });
    const collect = fullCollection();
    collect();
    let peak = process.memoryUsage().rss;
    const baseline = peak;
    // Garbage is not growth: a collector may let freed chunks pile up under load (Bun's for far
    // longer than V8's; Deno's V8 on a busy machine let two thirds of the archive pile up), so a
    // sample that reaches the bound counts only as read again after a full collection, which an
    // archive held in memory survives. Collections stay rare: each costs tens of milliseconds.
    const bound = 64 * 2 ** 20; // half the smallest archive asserted below
    let collected = -Infinity;
    const sampler = setInterval(() => {
      let rss = process.memoryUsage().rss;
      if (rss - baseline >= bound) {
        if (performance.now() - collected < 250) return; // judged by the next collection
        collect();
        collected = performance.now();
        rss = process.memoryUsage().rss;
      }
      peak = Math.max(peak, rss);
    }, 5);
    let result;
    try {
      result = await backup({ upload_url: put.url, path: "measured" });
    } finally {
      clearInterval(sampler);
    }
    assert.equal(result.files, 8);
    assert.equal(put.received[1].bytes, result.size);
    assert.ok(result.size > 128 * 1024 * 1024);
    assert.ok(
      peak - baseline < result.size / 2,
      `rss grew by ${Math.round((peak - baseline) / 2 ** 20)} MiB for a ${
        Math.round(result.size / 2 ** 20)
      } MiB archive`,
    );
  });
});
