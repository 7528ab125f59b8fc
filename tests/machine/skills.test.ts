/**
 * `skill.install` on the wire: inline files and tar.gz URLs served by a real local HTTP server,
 * `SKILL.md` required, atomic replacement watched by a separate process, a skills root that is a
 * link out of the workdir refused, hostile archive members refused, fetch size and time bounds, and
 * an install stopped by its session's end (or its signal) leaving nothing.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { spawn } from "node:child_process";
import { gzipSync } from "node:zlib";
import { createServer, type Server } from "node:http";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { createTarPacker, type TarHeader } from "modern-tar";
import {
  ConflictError,
  ForbiddenError,
  InvalidParamsError,
  UnavailableError,
} from "../../harness/node.ts";
import { ProtocolError } from "../../protocol/errors.ts";
import { installSkill } from "../../executor/machine/skills.node.ts";
import { Fixtures, machineSession, type MachineSessionOptions } from "./files-fixture.ts";
import { runScript } from "../helpers/mcp-stdio-servers.ts";
import { printed } from "../helpers/runtime-command.ts";

const WATCHER = fileURLToPath(new URL("./path-watcher.mjs", import.meta.url));
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A tar.gz of `entries` (names as given: hostile ones included). */
async function targz(
  entries: { header: Partial<TarHeader> & { name: string }; body?: string }[],
): Promise<Uint8Array> {
  const { readable, controller } = createTarPacker();
  const packing = (async () => {
    for (const { header, body } of entries) {
      const bytes = new TextEncoder().encode(body ?? "");
      const writer = controller.add({ size: bytes.length, type: "file", ...header }).getWriter();
      if (bytes.length) await writer.write(bytes);
      await writer.close();
    }
    controller.finalize();
  })();
  const gz = readable.pipeThrough(
    new CompressionStream("gzip") as ReadableWritablePair<Uint8Array, Uint8Array>,
  );
  const out = new Uint8Array(await new Response(gz).arrayBuffer());
  await packing;
  return out;
}

/** A local HTTP server: `routes` answer by path; everything it was asked is recorded. */
async function httpServer(
  routes: Record<string, (res: import("node:http").ServerResponse) => void>,
): Promise<{ server: Server; url: string; requests: string[] }> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(req.url ?? "");
    const route = routes[new URL(req.url ?? "/", "http://x").pathname];
    if (route) route(res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${port}`, requests };
}

describe("skill.install on the wire", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  async function skills(options: MachineSessionOptions = {}) {
    const machine = await machineSession(fx, options);
    const install = (params: Record<string, unknown>) =>
      machine.executor.request("skill.install", {
        session_id: machine.session.id,
        name: "demo",
        ...params,
      } as never);
    const skillsRoot = join(machine.root, ".bma/skills");
    return { ...machine, install, skillsRoot };
  }

  async function serve(routes: Parameters<typeof httpServer>[0]) {
    const http = await httpServer(routes);
    fx.defer(() =>
      new Promise<void>((resolve) => {
        http.server.closeAllConnections?.();
        http.server.close(() => resolve());
      })
    );
    return http;
  }

  it("installs inline files (SKILL.md at the root), with modes, and names the directory", async () => {
    const { install, skillsRoot } = await skills();
    const result = await install({
      version: "1.0.0",
      source: {
        type: "files",
        files: [
          { path: "SKILL.md", content: "# Demo\n" },
          { path: "scripts/run.sh", content: "#!/bin/sh\necho hi\n", mode: 0o755 },
          {
            path: "data/blob.bin",
            content: Buffer.from([0, 1, 2]).toString("base64"),
            encoding: "base64",
          },
        ],
      },
    });
    assert.deepEqual(result, { name: "demo", path: join(skillsRoot, "demo"), files: 3 });
    assert.equal(readFileSync(join(skillsRoot, "demo/SKILL.md"), "utf8"), "# Demo\n");
    assert.equal(statSync(join(skillsRoot, "demo/scripts/run.sh")).mode & 0o777, 0o755);
    assert.deepEqual([...readFileSync(join(skillsRoot, "demo/data/blob.bin"))], [0, 1, 2]);
  });

  it("refuses a skill without SKILL.md at its root (-32602), installing nothing", async () => {
    const { install, skillsRoot } = await skills();
    for (
      const files of [
        [{ path: "README.md", content: "x" }],
        [{ path: "nested/SKILL.md", content: "x" }],
      ]
    ) {
      await assert.rejects(install({ source: { type: "files", files } }), InvalidParamsError);
    }
    assert.equal(existsSync(join(skillsRoot, "demo")), false);
    assert.deepEqual(readdirSync(join(skillsRoot, ".versions")), [], "no staging left behind");
  });

  it("replaces an install atomically: a watcher process never finds the name missing", async () => {
    const { install, skillsRoot } = await skills();
    const version = (n: number) => ({
      source: { type: "files", files: [{ path: "SKILL.md", content: `v${n}\n` }] },
    });
    await install(version(0));
    const { command, args } = runScript(WATCHER);
    const watcher = spawn(command, [...args, join(skillsRoot, "demo/SKILL.md")], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    fx.defer(() => {
      if (watcher.exitCode === null && watcher.signalCode === null) watcher.kill("SIGKILL");
    });
    await printed(watcher, "ready");
    for (let n = 1; n <= 30; n++) await install(version(n));
    let out = "";
    watcher.stdout!.on("data", (chunk) => (out += chunk));
    const closed = new Promise((resolve) => watcher.once("close", resolve));
    watcher.stdin!.end();
    await closed;
    const [, checks, missing] = /checks (\d+) missing (\d+)/.exec(out)!.map(Number);
    assert.ok(checks > 0);
    assert.equal(missing, 0, `missing in ${missing} of ${checks} checks`);
    assert.equal(readFileSync(join(skillsRoot, "demo/SKILL.md"), "utf8"), "v30\n");
  });

  it("removes replaced versions once they are older than skillRetainMs, keeping the last one", async () => {
    const { install, skillsRoot } = await skills({ serve: { limits: { skillRetainMs: 0 } } });
    for (let n = 1; n <= 4; n++) {
      await install({
        source: { type: "files", files: [{ path: "SKILL.md", content: `v${n}\n` }] },
      });
    }
    const current = readlinkSync(join(skillsRoot, "demo")).split("/")[1];
    const versions = readdirSync(join(skillsRoot, ".versions"));
    assert.equal(versions.length, 2, "the current version and the one it replaced");
    assert.ok(versions.includes(current));
    // With the default retention, replaced versions stay for readers still in them.
    const kept = await skills();
    for (let n = 1; n <= 3; n++) {
      await kept.install({
        source: { type: "files", files: [{ path: "SKILL.md", content: "x" }] },
      });
    }
    assert.equal(readdirSync(join(kept.skillsRoot, ".versions")).length, 3);
  });

  it("replaces a plain directory left at the name by an older install", async () => {
    const { install, skillsRoot } = await skills({ serve: { limits: { skillRetainMs: 0 } } });
    mkdirSync(join(skillsRoot, "demo/old"), { recursive: true });
    await install({ source: { type: "files", files: [{ path: "SKILL.md", content: "new\n" }] } });
    assert.equal(readFileSync(join(skillsRoot, "demo/SKILL.md"), "utf8"), "new\n");
    assert.equal(existsSync(join(skillsRoot, "demo/old")), false);
    assert.equal(readdirSync(join(skillsRoot, ".versions")).length, 2, "new, and the one replaced");
    await install({ source: { type: "files", files: [{ path: "SKILL.md", content: "newer\n" }] } });
    assert.equal(readdirSync(join(skillsRoot, ".versions")).length, 2);
    assert.ok(!readdirSync(join(skillsRoot, ".versions")).some((v) => v.includes("replaced")));
  });

  it("refuses a skills root that is a symlink out of the workdir (-32001), writing nothing there", async () => {
    const { top, root, install } = await skills();
    mkdirSync(join(top, "outside"));
    mkdirSync(join(root, ".bma"));
    symlinkSync(join(top, "outside"), join(root, ".bma/skills"));
    const files = [{ path: "SKILL.md", content: "x" }];
    await assert.rejects(install({ source: { type: "files", files } }), (error: unknown) => {
      assert.ok(error instanceof ForbiddenError);
      assert.equal((error.data as { reason: string }).reason, "path_outside_workdir");
      return true;
    });
    assert.deepEqual(readdirSync(join(top, "outside")), []);
  });

  it("refuses inline paths that escape the skill (-32001 path_outside_workdir)", async () => {
    const { top, install, skillsRoot } = await skills();
    for (
      const path of ["../escape.txt", "/tmp/abs.txt", "a/../../escape.txt", "../../../../escape"]
    ) {
      const files = [{ path: "SKILL.md", content: "x" }, { path, content: "pwned" }];
      await assert.rejects(install({ source: { type: "files", files } }), (error: unknown) => {
        assert.ok(error instanceof ForbiddenError, path);
        assert.equal((error.data as { reason: string }).reason, "path_outside_workdir");
        return true;
      });
    }
    assert.equal(existsSync(join(skillsRoot, "demo")), false);
    assert.equal(existsSync(join(skillsRoot, "escape.txt")), false);
    assert.deepEqual(readdirSync(top).sort(), ["work"]);
  });

  it("installs a tar.gz from a URL verified by sha256; a mismatch is -32013 and installs nothing", async () => {
    const archive = await targz([
      { header: { name: "./", type: "directory" } },
      { header: { name: "./SKILL.md" }, body: "# From a URL\n" },
      { header: { name: "./lib/", type: "directory" } },
      { header: { name: "./lib/tool.py", mode: 0o755 }, body: "print(1)\n" },
      { header: { name: "./latest", type: "symlink", linkname: "lib/tool.py" } },
    ]);
    const http = await serve({ "/skill.tgz": (res) => res.end(Buffer.from(archive)) });
    const { install, skillsRoot, logger } = await skills();
    const url = `${http.url}/skill.tgz?X-Signature=SECRET_presigned_token`;
    await assert.rejects(
      install({ source: { type: "url", url, sha256: sha256(new Uint8Array([1])) } }),
      (error: unknown) =>
        error instanceof ConflictError &&
        (error.data as { reason: string }).reason === "sha256_mismatch",
    );
    assert.equal(existsSync(join(skillsRoot, "demo")), false);
    const result = await install({ source: { type: "url", url, sha256: sha256(archive) } });
    assert.equal(result.files, 2);
    assert.equal(readFileSync(join(skillsRoot, "demo/SKILL.md"), "utf8"), "# From a URL\n");
    assert.equal(statSync(join(skillsRoot, "demo/lib/tool.py")).mode & 0o777, 0o755);
    assert.equal(readlinkSync(join(skillsRoot, "demo/latest")), "lib/tool.py");
    assert.equal(http.requests.length, 2);
    assert.doesNotMatch(logger.text(), /SECRET_presigned_token/);
    assert.deepEqual(readdirSync(join(skillsRoot, ".versions")).length, 1, "no archive left");
  });

  it("refuses archive members that are absolute, climb with .., or link out; and hard links", async () => {
    const http = await serve({});
    const { top, install, skillsRoot } = await skills();
    mkdirSync(join(top, "outside"));
    const cases: [string, Parameters<typeof targz>[0], unknown][] = [
      ["absolute", [{ header: { name: "/etc/evil" }, body: "x" }], ForbiddenError],
      ["dot-dot", [{ header: { name: "../../outside/evil" }, body: "x" }], ForbiddenError],
      ["inner dot-dot", [{ header: { name: "a/../../evil" }, body: "x" }], ForbiddenError],
      [
        "link out",
        [{ header: { name: "out", type: "symlink", linkname: "../../../outside" } }],
        ForbiddenError,
      ],
      [
        "absolute link",
        [{ header: { name: "out", type: "symlink", linkname: "/etc" } }],
        ForbiddenError,
      ],
      [
        // Each target alone stays in; followed through the first link, the second leads to /.
        "link out through another link",
        [
          { header: { name: "a/b/up", type: "symlink", linkname: "../../" } },
          { header: { name: "root", type: "symlink", linkname: "a/b/up/../../.." } },
        ],
        ForbiddenError,
      ],
      [
        "links in a loop",
        [
          { header: { name: "a/x", type: "symlink", linkname: "y" } },
          { header: { name: "a/y", type: "symlink", linkname: "x" } },
        ],
        ForbiddenError,
      ],
      [
        "file through a link",
        [
          { header: { name: "d", type: "symlink", linkname: "." } },
          { header: { name: "d/x" }, body: "x" },
        ],
        InvalidParamsError,
      ],
      [
        "hard link",
        [{ header: { name: "h", type: "link", linkname: "SKILL.md" } }],
        InvalidParamsError,
      ],
    ];
    for (const [what, members, expected] of cases) {
      const archive = await targz([{ header: { name: "SKILL.md" }, body: "ok" }, ...members]);
      const path = `/${what.replaceAll(" ", "-")}.tgz`;
      http.server.removeAllListeners("request");
      http.server.on("request", (_req, res) => res.end(Buffer.from(archive)));
      await assert.rejects(
        install({ source: { type: "url", url: `${http.url}${path}`, sha256: sha256(archive) } }),
        expected as typeof Error,
        what,
      );
    }
    assert.deepEqual(readdirSync(join(top, "outside")), []);
    assert.equal(existsSync(join(skillsRoot, "demo")), false);
    assert.deepEqual(readdirSync(join(skillsRoot, ".versions")), []);
  });

  it("fetches with a size limit and a timeout; errors of the server are -32004 backend_unavailable", async () => {
    const big = new Uint8Array(5000);
    const http = await serve({
      "/declared.tgz": (res) => res.end(Buffer.from(big)),
      "/chunked.tgz": (res) => {
        res.writeHead(200); // no content-length: the limit is met while streaming
        res.write(Buffer.from(big.subarray(0, 2500)));
        res.end(Buffer.from(big.subarray(2500)));
      },
      "/stalls.tgz": (res) => {
        res.writeHead(200, { "content-length": "1000" });
        res.write(Buffer.alloc(10)); // and nothing more
      },
      "/gone.tgz": (res) => res.writeHead(500).end(),
    });
    const { install } = await skills({
      serve: { limits: { skillArchiveBytes: 1000, skillFetchMs: 300 } },
    });
    const url = (path: string) => ({
      source: { type: "url", url: `${http.url}${path}`, sha256: sha256(big) },
    });
    await assert.rejects(install(url("/declared.tgz")), InvalidParamsError);
    await assert.rejects(install(url("/chunked.tgz")), InvalidParamsError);
    for (const path of ["/stalls.tgz", "/gone.tgz", "/missing.tgz"]) {
      await assert.rejects(install(url(path)), (error: unknown) => {
        assert.ok(error instanceof UnavailableError, path);
        assert.equal((error.data as { reason: string }).reason, "backend_unavailable");
        return true;
      });
    }
    await assert.rejects(
      install({ source: { type: "url", url: "file:///etc/passwd", sha256: sha256(big) } }),
      InvalidParamsError,
    );
  });

  it("refuses an archive that unpacks to more than the skill's bounds allow (zeros after its end)", async () => {
    // A whole, valid skill, then a second gzip member of zeros: after the archive's end, so they
    // count toward no entry. Before, it unpacked them all (16 GiB from 16 MB: a minute of CPU).
    const archive = Buffer.concat([
      await targz([{ header: { name: "SKILL.md" }, body: "ok" }]),
      gzipSync(Buffer.alloc(8 * 1024 * 1024)),
    ]);
    const http = await serve({ "/trailing.tgz": (res) => res.end(archive) });
    const { install } = await skills({ serve: { limits: { skillBytes: 1000, skillEntries: 10 } } });
    await assert.rejects(
      install({
        source: { type: "url", url: `${http.url}/trailing.tgz`, sha256: sha256(archive) },
      }),
      (error: unknown) => {
        assert.ok(error instanceof InvalidParamsError, String(error));
        assert.match(error.message, /unpacks to more than \d+ bytes/);
        return true;
      },
    );
  });

  it("a session's end stops an install still fetching: -32002 unknown_session, nothing installed when the archive then arrives", async () => {
    const archive = await targz([{ header: { name: "SKILL.md" }, body: "too late\n" }]);
    let asked!: () => void;
    const fetching = new Promise<void>((resolve) => (asked = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const http = await serve({
      "/slow.tgz": (res) => {
        res.writeHead(200, { "content-length": String(archive.length) });
        res.write(Buffer.from(archive.subarray(0, 10)));
        asked();
        // The rest only once the session has ended (before the fix, the install then went on).
        void released.then(() => res.end(Buffer.from(archive.subarray(10))));
      },
    });
    // The fetch's own bound only keeps a broken build from waiting for the test's timeout.
    const { install, session, skillsRoot } = await skills({
      serve: { limits: { skillFetchMs: 20_000 } },
    });
    const outcome = install({
      source: { type: "url", url: `${http.url}/slow.tgz`, sha256: sha256(archive) },
    }).then((result) => ({ result }), (error: unknown) => ({ error }));
    await fetching;
    await session.stop();
    release();
    const settled = await outcome;
    assert.ok("error" in settled, `answered ${JSON.stringify(settled)} after the session ended`);
    assert.ok(settled.error instanceof ProtocolError, String(settled.error));
    assert.equal(settled.error.code, -32002);
    assert.equal((settled.error.data as { reason?: string }).reason, "unknown_session");
    assert.equal(existsSync(join(skillsRoot, "demo")), false);
    assert.deepEqual(readdirSync(join(skillsRoot, ".versions")), [], "no staging, no archive");
  });

  it("a signal that stops the install once its archive is fetched: its reason, nothing unpacked or installed", async () => {
    const archive = await targz([
      { header: { name: "SKILL.md" }, body: "x\n" },
      { header: { name: "lib/a.txt" }, body: "a\n" },
    ]);
    const http = await serve({ "/a.tgz": (res) => res.end(Buffer.from(archive)) });
    const top = mkdtempSync(join(tmpdir(), "bma-skill-stop-"));
    fx.defer(() => rmSync(top, { recursive: true, force: true }));
    const stop = new AbortController();
    const reason = new Error("stopped once fetched");
    // The real fetch, whose body stops the install as soon as it has all been read.
    const fetchFn: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const body = response.body!.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({ flush: () => stop.abort(reason) }),
      );
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const skillsRoot = join(top, "skills");
    await assert.rejects(
      installSkill(
        {
          session_id: "ses_direct",
          name: "demo",
          source: { type: "url", url: `${http.url}/a.tgz`, sha256: sha256(archive) },
        },
        skillsRoot,
        fetchFn,
        { signal: stop.signal },
      ),
      (error: unknown) => error === reason,
    );
    assert.equal(existsSync(join(skillsRoot, "demo")), false);
    assert.deepEqual(readdirSync(join(skillsRoot, ".versions")), []);
  });

  it("keeps the installed skill when a replacement fails", async () => {
    const { install, skillsRoot } = await skills();
    await install({ source: { type: "files", files: [{ path: "SKILL.md", content: "good\n" }] } });
    await assert.rejects(
      install({ source: { type: "files", files: [{ path: "x", content: "" }] } }),
    );
    assert.equal(readFileSync(join(skillsRoot, "demo/SKILL.md"), "utf8"), "good\n");
    assert.equal(lstatSync(join(skillsRoot, "demo")).isSymbolicLink(), true);
  });
});
