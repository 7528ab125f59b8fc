/**
 * File transfer on the wire (`executor.request("file.upload" | "file.download")` from a real
 * `Harness`): chunks by offset, the whole file's SHA-256 in every answer, the contract's errors
 * and bounds, and constant memory per chunk on a sparse multi-GiB file; chunked uploads kept per
 * session, dropped with their session, and what an executor gone before left of them swept.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConflictError, ForbiddenError, NotFoundError, type Session } from "../../harness/node.ts";
import { ManualClock } from "../../protocol/clock.ts";
import { ProtocolError } from "../../protocol/errors.ts";
import { serveMachine, type ServeMachineOptions } from "../../executor/machine/serve.node.ts";
import { UPLOAD_IDLE_MS } from "../../executor/machine/pending-uploads.node.ts";
import { Fixtures, machineSession, type MachineSessionOptions } from "./files-fixture.ts";

const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");
const b64 = (bytes: Uint8Array | string) => Buffer.from(bytes).toString("base64");

/** What chunked uploads leave in `dirs` (below `root`): temporaries and their records. */
function leftovers(root: string, dirs: string[] = [""]): string[] {
  return dirs.flatMap((dir) =>
    existsSync(join(root, dir))
      ? readdirSync(join(root, dir))
        .filter((name) => /^\.bma-upload-[0-9a-f]{16}\.(tmp|ref)$/.test(name))
        .map((name) => join(dir, name))
      : []
  ).sort();
}

const temporaries = (names: string[]) => names.filter((name) => name.endsWith(".tmp"));

const offsetMismatch = (expected: number) => (error: unknown) => {
  assert.ok(error instanceof ConflictError, String(error));
  assert.deepEqual(error.data, { reason: "offset_mismatch", expected_offset: expected });
  return true;
};

describe("file transfer on the wire", { timeout: 120_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  async function transfer(options: MachineSessionOptions = {}) {
    const machine = await machineSession(fx, options);
    const { executor, session } = machine;
    const upload = (path: string, content: Uint8Array | string, extra: object = {}) =>
      executor.request("file.upload", {
        session_id: session.id,
        path,
        content: b64(content),
        ...extra,
      });
    const download = (path: string, extra: object = {}) =>
      executor.request("file.download", { session_id: session.id, path, ...extra });
    return { ...machine, upload, download };
  }

  /** Another executor (a harness of its own) serving `root`, and a session on it. */
  async function executorOn(root: string, serve: Omit<ServeMachineOptions, "workdir"> = {}) {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    const served = serveMachine(client, { workdir: root, ...serve });
    fx.defer(() => served.dispose());
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_shared" });
    const upload = (path: string, content: string, extra: object = {}) =>
      executor.request("file.upload", {
        session_id: session.id,
        path,
        content: b64(content),
        ...extra,
      });
    return { served, upload };
  }

  /** A workdir no fixture executor serves yet. */
  function sharedWorkdir(): string {
    const top = mkdtempSync(join(tmpdir(), "bma-shared-"));
    fx.defer(() => rmSync(top, { recursive: true, force: true }));
    mkdirSync(join(top, "work"));
    return join(top, "work");
  }

  it("uploads in chunks and downloads in chunks, with the whole file's sha256 each time", async () => {
    const { root, upload, download } = await transfer();
    const data = new Uint8Array(300_000).map((_, i) => (i * 7) % 251);
    const parts = [
      data.subarray(0, 100_000),
      data.subarray(100_000, 250_000),
      data.subarray(250_000),
    ];
    let offset = 0;
    for (const [i, part] of parts.entries()) {
      const last = i === parts.length - 1;
      const result = await upload("dir/sub/data.bin", part, {
        offset,
        ...(last ? { sha256: sha256(data), mode: 0o640 } : {}),
      });
      offset += part.length;
      assert.equal(result.size, offset);
      assert.equal(result.sha256, sha256(data.subarray(0, offset)));
      assert.equal(result.path, join(root, "dir/sub/data.bin"));
    }
    assert.deepEqual(new Uint8Array(readFileSync(join(root, "dir/sub/data.bin"))), data);
    assert.equal(statSync(join(root, "dir/sub/data.bin")).mode & 0o777, 0o640);

    const received: Uint8Array[] = [];
    for (let at = 0;;) {
      const chunk = await download("dir/sub/data.bin", { offset: at, max_bytes: 128 * 1024 });
      assert.equal(chunk.offset, at);
      assert.equal(chunk.size, data.length);
      assert.equal(chunk.sha256, sha256(data));
      const bytes = new Uint8Array(Buffer.from(chunk.content, "base64"));
      received.push(bytes);
      at += bytes.length;
      if (chunk.eof) break;
      assert.equal(bytes.length, 128 * 1024);
    }
    assert.deepEqual(new Uint8Array(Buffer.concat(received)), data);
    assert.equal((await download("dir/sub/data.bin", { offset: 10 ** 9 })).eof, true);
  });

  it("a later chunk must start at the current size: -32013 offset_mismatch with expected_offset", async () => {
    const { upload } = await transfer();
    await upload("a.txt", "12345");
    await assert.rejects(upload("a.txt", "x", { offset: 3 }), (error: unknown) => {
      assert.ok(error instanceof ConflictError);
      assert.deepEqual(error.data, { reason: "offset_mismatch", expected_offset: 5 });
      return true;
    });
    await assert.rejects(upload("missing.txt", "x", { offset: 1 }), (error: unknown) => {
      assert.ok(error instanceof ConflictError);
      assert.deepEqual(error.data, { reason: "offset_mismatch", expected_offset: 0 });
      return true;
    });
  });

  it("a failed sha256 check is -32013 sha256_mismatch and removes the file", async () => {
    const { root, upload } = await transfer();
    await upload("chunks.txt", "part one,");
    await assert.rejects(
      upload("chunks.txt", "part two", { offset: 9, sha256: sha256("something else") }),
      (error: unknown) =>
        error instanceof ConflictError &&
        (error.data as { reason: string }).reason === "sha256_mismatch",
    );
    assert.equal(existsSync(join(root, "chunks.txt")), false);
    await assert.rejects(
      upload("whole.txt", "all of it", { sha256: sha256("not it") }),
      ConflictError,
    );
    assert.equal(existsSync(join(root, "whole.txt")), false);
    assert.deepEqual(readdirSync(root), [], "no temporary file is left either");
  });

  it("two uploads to one path at once, 50 rounds with and without a file there: the file is one of them, whole", async () => {
    const { root, upload } = await transfer();
    const CHUNK = 64 * 1024;
    /** An upload of `bytes` in chunks (each with `upload_id`), or whole in one chunk. */
    const send = async (bytes: Uint8Array, uploadId: string | undefined) => {
      if (uploadId === undefined) return await upload("same.bin", bytes, { sha256: sha256(bytes) });
      let result;
      for (let offset = 0; offset < bytes.length; offset += CHUNK) {
        const last = offset + CHUNK >= bytes.length;
        result = await upload("same.bin", bytes.subarray(offset, offset + CHUNK), {
          offset,
          upload_id: uploadId,
          ...(last ? { sha256: sha256(bytes) } : {}),
        });
      }
      return result;
    };
    for (let round = 0; round < 50; round++) {
      const previous = round % 2 === 0 ? new Uint8Array(1000).fill(round) : undefined;
      if (previous) writeFileSync(join(root, "same.bin"), previous);
      const a = new Uint8Array(5 * CHUNK + 7).fill(0xa0 + (round % 16));
      const b = new Uint8Array(4 * CHUNK + 3).fill(0x10 + (round % 16));
      // Chunked uploads each time; one of them whole in one chunk every third round.
      const outcomes = await Promise.allSettled([
        send(a, `a${round}`),
        send(b, round % 3 === 0 ? undefined : `b${round}`),
      ]);
      const what = `round ${round} (${previous ? "a file there" : "no file there"})`;
      for (const outcome of outcomes) {
        assert.equal(
          outcome.status,
          "fulfilled",
          `${what}: ${(outcome as PromiseRejectedResult).reason}`,
        );
      }
      assert.ok(existsSync(join(root, "same.bin")), `${what}: the file is gone`);
      const now = new Uint8Array(readFileSync(join(root, "same.bin")));
      const which = [a, b, ...(previous ? [previous] : [])].find((one) =>
        Buffer.from(one).equals(now)
      );
      assert.ok(which, `${what}: the file is none of them (${now.length} bytes)`);
      assert.deepEqual(readdirSync(root), ["same.bin"], `${what}: nothing else is left`);
      rmSync(join(root, "same.bin"));
    }
  });

  it("a failed upload leaves the previous file and removes only its own temporary", async () => {
    const { root, upload } = await transfer();
    writeFileSync(join(root, "keep.txt"), "previous");
    await assert.rejects(upload("keep.txt", "other", { sha256: sha256("not it") }), ConflictError);
    await upload("keep.txt", "first half,", { upload_id: "u1" });
    assert.equal(readFileSync(join(root, "keep.txt"), "utf8"), "previous");
    await assert.rejects(
      upload("keep.txt", "second", { offset: 11, upload_id: "u1", sha256: sha256("nope") }),
      (error: unknown) =>
        error instanceof ConflictError &&
        (error.data as { reason: string }).reason === "sha256_mismatch",
    );
    assert.equal(readFileSync(join(root, "keep.txt"), "utf8"), "previous");
    assert.deepEqual(readdirSync(root), ["keep.txt"]);
    // An upload id whose start was not seen: expected_offset 0; a wrong offset: its size.
    await assert.rejects(
      upload("keep.txt", "x", { offset: 5, upload_id: "u2" }),
      (error: unknown) => {
        assert.deepEqual((error as ConflictError).data, {
          reason: "offset_mismatch",
          expected_offset: 0,
        });
        return true;
      },
    );
    await upload("keep.txt", "12345", { upload_id: "u3" });
    await assert.rejects(
      upload("keep.txt", "x", { offset: 3, upload_id: "u3" }),
      (error: unknown) => {
        assert.deepEqual((error as ConflictError).data, {
          reason: "offset_mismatch",
          expected_offset: 5,
        });
        return true;
      },
    );
    const done = await upload("keep.txt", "678", {
      offset: 5,
      upload_id: "u3",
      sha256: sha256("12345678"),
      mode: 0o600,
    });
    assert.equal(done.size, 8);
    assert.equal(readFileSync(join(root, "keep.txt"), "utf8"), "12345678");
    assert.equal(statSync(join(root, "keep.txt")).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(root), ["keep.txt"]);
  });

  it("the next chunk's hash follows the file, also when something else changed it between chunks", async () => {
    const { root, upload } = await transfer();
    await upload("f.txt", "aaaa");
    writeFileSync(join(root, "f.txt"), "bbbb"); // same size, other bytes
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(root, "f.txt"), later, later);
    const result = await upload("f.txt", "cc", { offset: 4 });
    assert.equal(result.sha256, sha256("bbbbcc"));
  });

  it("a missing file is -32002 file_not_found; a directory is not a file either", async () => {
    const { root, download } = await transfer();
    mkdirSync(join(root, "dir"));
    for (const path of ["missing.txt", "dir", "missing/deeper.txt"]) {
      await assert.rejects(download(path), (error: unknown) => {
        assert.ok(error instanceof NotFoundError, path);
        assert.equal((error.data as { reason: string }).reason, "file_not_found");
        return true;
      });
    }
  });

  it("paths outside the workdir, directly or through symlinks, are -32001 path_outside_workdir", async () => {
    const { top, root, upload, download } = await transfer();
    mkdirSync(join(top, "outside"));
    writeFileSync(join(top, "outside/secret.txt"), "secret");
    symlinkSync(join(top, "outside/secret.txt"), join(root, "out-file"));
    symlinkSync(join(top, "outside"), join(root, "out-dir"));
    symlinkSync("../outside/new.txt", join(root, "dangling"));
    for (
      const path of [
        "../outside/secret.txt",
        join(top, "outside/secret.txt"),
        "out-file",
        "out-dir/secret.txt",
        "dangling",
      ]
    ) {
      for (const call of [() => download(path), () => upload(path, "pwned")]) {
        await assert.rejects(call(), (error: unknown) => {
          assert.ok(error instanceof ForbiddenError, `${path}: ${error}`);
          assert.equal((error.data as { reason: string }).reason, "path_outside_workdir");
          return true;
        });
      }
    }
    await assert.rejects(upload("out-dir/new.txt", "x"), ForbiddenError);
    assert.equal(readFileSync(join(top, "outside/secret.txt"), "utf8"), "secret");
    assert.deepEqual(readdirSync(join(top, "outside")), ["secret.txt"]);
  });

  it("max_bytes is capped at the executor's cap (default 4 MiB)", async () => {
    const { root, download } = await transfer();
    writeFileSync(join(root, "five.bin"), new Uint8Array(5 * 1024 * 1024).fill(7));
    const first = await download("five.bin", { max_bytes: 64 * 1024 * 1024 });
    assert.equal(Buffer.from(first.content, "base64").length, 4 * 1024 * 1024);
    assert.equal(first.eof, false);
    const rest = await download("five.bin", { offset: 4 * 1024 * 1024 });
    assert.equal(Buffer.from(rest.content, "base64").length, 1024 * 1024);
    assert.equal(rest.eof, true);
  });

  it("the cap is configurable, and a smaller max_bytes is honoured", async () => {
    const { root, download } = await transfer({ serve: { limits: { downloadBytes: 1000 } } });
    writeFileSync(join(root, "k.bin"), new Uint8Array(5000));
    const capped = await download("k.bin", { max_bytes: 1_000_000 });
    assert.equal(Buffer.from(capped.content, "base64").length, 1000);
    const small = await download("k.bin", { max_bytes: 10 });
    assert.equal(Buffer.from(small.content, "base64").length, 10);
  });

  it("a few bytes of a sparse 2.25 GiB file: right bytes and hash, memory far below the file's size", async () => {
    const { root, download } = await transfer();
    const path = join(root, "sparse.bin");
    const size = 2.25 * 1024 ** 3;
    execFileSync("truncate", ["-s", String(size), path]);
    const marker = new TextEncoder().encode("the end marker!!");
    const fd = openSync(path, "r+");
    writeSync(fd, marker, 0, marker.length, size - marker.length);
    closeSync(fd);

    // The expected hash, computed outside the SDK (hashing 2.25 GiB here as well would double the
    // test's work): `{ head -c 2415919088 /dev/zero; printf 'the end marker!!'; } | sha256sum`.
    const expected = "f90678c7bc002d4dacf088c9b137056817541702d28c436ec36688725b0282e7";
    assert.equal(size - marker.length, 2415919088);

    let peak = process.memoryUsage().rss;
    const baseline = peak;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    let first;
    try {
      first = await download("sparse.bin", { offset: size - 16, max_bytes: 16 });
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, process.memoryUsage().rss);
    assert.equal(Buffer.from(first.content, "base64").toString(), "the end marker!!");
    assert.equal(first.size, size);
    assert.equal(first.eof, true);
    assert.equal(first.sha256, expected);
    assert.ok(
      peak - baseline < 256 * 1024 * 1024,
      `rss grew by ${Math.round((peak - baseline) / 2 ** 20)} MiB for a 2304 MiB file`,
    );
    // Another chunk of the same file version answers the same hash.
    const second = await download("sparse.bin", { offset: 0, max_bytes: 4 });
    assert.equal(second.sha256, first.sha256);
    assert.equal(second.eof, false);
  });

  it("mode keeps only the permission bits: 0o7777 gives 0o777, whole, in chunks and appended", async () => {
    const { root, upload } = await transfer();
    await upload("whole.sh", "#!/bin/sh\n", { mode: 0o7777 });
    assert.equal(statSync(join(root, "whole.sh")).mode & 0o7777, 0o777);
    await upload("chunked.sh", "#!/bin/sh\n", { upload_id: "u1" });
    await upload("chunked.sh", "true\n", {
      upload_id: "u1",
      offset: 10,
      sha256: sha256("#!/bin/sh\ntrue\n"),
      mode: 0o6755,
    });
    assert.equal(statSync(join(root, "chunked.sh")).mode & 0o7777, 0o755);
    await upload("appended.sh", "#!/bin/sh\n");
    await upload("appended.sh", "true\n", { offset: 10, mode: 0o4777 });
    assert.equal(statSync(join(root, "appended.sh")).mode & 0o7777, 0o777);
  });

  it("a session's end drops its chunked uploads in progress with their temporaries", async () => {
    const { root, session, upload } = await transfer();
    await upload("sub/a.bin", "partial", { upload_id: "u1" });
    await upload("b.bin", "partial", { upload_id: "u2" });
    assert.equal(temporaries(leftovers(root, ["", "sub"])).length, 2);
    await session.stop();
    assert.deepEqual(readdirSync(root), ["sub"]);
    assert.deepEqual(readdirSync(join(root, "sub")), []);
  });

  it("two sessions on one workdir using the same upload_id and path each land whole: uploads are per session", async () => {
    const { root, executor, session } = await transfer();
    const other = await executor.assignSession({ session_id: "ses_other" });
    const send = (on: Session, content: string, extra: object = {}) =>
      executor.request("file.upload", {
        session_id: on.id,
        path: "same.bin",
        content: b64(content),
        upload_id: "same",
        ...extra,
      });
    await send(session, "AAAA");
    await send(other, "BBBB"); // the same id and path, another session: not a restart of the first
    await send(session, "aaaa", { offset: 4, sha256: sha256("AAAAaaaa") });
    assert.equal(readFileSync(join(root, "same.bin"), "utf8"), "AAAAaaaa");
    await send(other, "bbbb", { offset: 4, sha256: sha256("BBBBbbbb") });
    assert.equal(readFileSync(join(root, "same.bin"), "utf8"), "BBBBbbbb");
    assert.deepEqual(readdirSync(root), ["same.bin"]);
  });

  it("past 64 uploads in progress on a workdir, the session's own oldest is dropped, not another session's older one", async () => {
    const { root, executor, session } = await transfer();
    const other = await executor.assignSession({ session_id: "ses_other" });
    const send = (on: Session, path: string, id: string, extra: object = {}) =>
      executor.request("file.upload", {
        session_id: on.id,
        path,
        content: b64("xx"),
        upload_id: id,
        ...extra,
      });
    await send(other, "other.bin", "b"); // the oldest of all
    for (let i = 0; i < 64; i++) await send(session, `f${i}.bin`, `a${i}`);
    await assert.rejects(
      send(session, "f0.bin", "a0", { offset: 2, sha256: sha256("xxxx") }),
      offsetMismatch(0),
    );
    await send(other, "other.bin", "b", { offset: 2, sha256: sha256("xxxx") });
    assert.equal(readFileSync(join(root, "other.bin"), "utf8"), "xxxx");
    assert.equal(leftovers(root).length, 63, "f1 to f63 wait; f0's temporary went with it");
  });

  it("what an executor left of its uploads is swept by the next on the workdir once 15 minutes unwritten (by its clock), not before; look-alikes stay", async () => {
    const root = sharedWorkdir();
    const gone = await executorOn(root);
    await gone.upload("deep/dir/a.bin", "partial", { upload_id: "u1" });
    await gone.upload("top.bin", "partial", { upload_id: "u2" });
    await gone.served[Symbol.asyncDispose](); // it serves no more, its uploads never continued
    const left = leftovers(root, ["", "deep/dir"]);
    assert.equal(temporaries(left).length, 2);
    // A user's own files whose names merely look alike.
    const mine = [".bma-upload-notes.tmp", "deep/dir/.bma-upload-0123456789abcdef.txt"];
    for (const name of mine) writeFileSync(join(root, name), "mine");

    const clock = new ManualClock(Date.now());
    const next = await executorOn(root, { clock });
    await next.upload("b.txt", "one");
    assert.deepEqual(
      leftovers(root, ["", "deep/dir"]),
      left,
      "within 15 minutes they may be another executor's, in use",
    );
    await clock.advance(UPLOAD_IDLE_MS + 1_000);
    await next.upload("b.txt", "two");
    assert.deepEqual(leftovers(root, ["", "deep/dir"]), []);
    for (const name of mine) assert.equal(readFileSync(join(root, name), "utf8"), "mine");
  });

  it("an executor starting on a shared workdir sweeps temporaries unwritten for 15 minutes, never another executor's live upload", async () => {
    const root = sharedWorkdir();
    const gone = await executorOn(root);
    await gone.upload("deep/dir/a.bin", "partial", { upload_id: "u1" });
    await gone.served[Symbol.asyncDispose]();
    const left = leftovers(root, ["", "deep/dir"]);
    // Last written 16 minutes ago (a link's times are its target's here: the temporary's).
    const past = new Date(Date.now() - UPLOAD_IDLE_MS - 60_000);
    for (const name of left) utimesSync(join(root, name), past, past);

    const live = await executorOn(root);
    await live.upload("deep/dir/live.bin", "first,", { upload_id: "u1" });
    const liveLeft = leftovers(root, ["", "deep/dir"]).filter((name) => !left.includes(name));
    assert.equal(temporaries(liveLeft).length, 1, "the live upload's temporary");
    const next = await executorOn(root); // sweeps as it starts; its first upload waits for that
    await next.upload("b.txt", "x");
    assert.deepEqual(leftovers(root, ["", "deep/dir"]), liveLeft);
    await live.upload("deep/dir/live.bin", "second", {
      upload_id: "u1",
      offset: 6,
      sha256: sha256("first,second"),
    });
    assert.equal(readFileSync(join(root, "deep/dir/live.bin"), "utf8"), "first,second");
    assert.deepEqual(leftovers(root, ["", "deep/dir"]), []);
  });

  it("a session's end stops a download hashing a sparse 64 GiB file: unknown_session, no result", async () => {
    const { root, session, download } = await transfer();
    // Holes cost nothing to make and take about a minute per 64 GiB to hash.
    execFileSync("truncate", ["-s", String(64 * 1024 ** 3), join(root, "huge.bin")]);
    const outcome = download("huge.bin", { max_bytes: 16 }).then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    await session.stop();
    const settled = await outcome;
    assert.ok("error" in settled, `answered a result after the session ended`);
    assert.ok(settled.error instanceof ProtocolError, String(settled.error));
    assert.equal(settled.error.code, -32002);
    assert.equal((settled.error.data as { reason?: string }).reason, "unknown_session");
  });
});
