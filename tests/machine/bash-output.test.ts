/**
 * Large output of the machine's `bash` tool: the artifact is the output byte for byte (binary
 * output uploaded as bytes, `application/octet-stream`), a stream past the executor's memory
 * bound is spooled to a private temp file, and that file is gone once the call ends: completed,
 * canceled or timed out. Real bash children, a real Harness with its artifact store over a real
 * WebSocket on 127.0.0.1, `serveMachine` on an `ExecutorClient`.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { ArtifactBlock, ContentBlock } from "../../protocol/mod.ts";
import { ManualClock } from "../../executor/node.ts";
import { runBash } from "../../executor/machine/bash.node.ts";
import { Workdir } from "../../executor/machine/workdir.node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { startMachine, until } from "./machine-fixture.ts";
import { PEAK_MEMORY_SKIP, peakGrowth } from "../helpers/peak-memory.ts";

/** Bytes from a fixed seed (xorshift32): the same on every run, far from valid UTF-8. */
function seededBytes(length: number, seed = 0x2545f491): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

function artifactBlocks(content: ContentBlock[]): ArtifactBlock[] {
  return content.filter((b): b is ArtifactBlock => b.type === "artifact");
}

const sameBytes = (a: Uint8Array, b: Uint8Array) =>
  a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength)
    .equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

describe(
  "bash: large output as exact artifacts, spooled and cleaned up",
  { timeout: 60_000 },
  () => {
    const fx = new Fixtures();
    // The executor spools into the temp dir: this test's own, to see what is left in it.
    let temp = "";
    const savedTmpdir = process.env.TMPDIR;
    const spools = () => readdirSync(temp).filter((name) => name.startsWith("bma-bash-"));
    before(() => {
      temp = realpathSync(mkdtempSync(join(tmpdir(), "bma-bash-output-test-")));
      process.env.TMPDIR = temp;
    });
    after(() => {
      if (savedTmpdir === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmpdir;
      rmSync(temp, { recursive: true, force: true });
    });
    afterEach(() => fx.cleanup());

    it("uploads binary output byte for byte, as application/octet-stream", async () => {
      const { dir, harness, session } = await startMachine(fx);
      const bytes = seededBytes(3 * 1024 * 1024);
      writeFileSync(join(dir, "seeded.bin"), bytes);
      const result = await session.tools.bash.call(
        { command: "cat seeded.bin; echo done >&2" },
        { toolCallId: "c_bin" },
      );
      assert.equal(result.outcome, "completed");
      assert.equal(result.structured_content?.truncated, true);
      const [block, errBlock] = artifactBlocks(result.content);
      assert.equal(block.name, "c_bin.stdout.bin");
      assert.equal(errBlock.name, "c_bin.stderr.txt", "a text stream stays text");
      const storedErr = await harness.artifacts.get(errBlock.artifact_id);
      assert.equal(storedErr?.mime_type, "text/plain; charset=utf-8");
      assert.equal(new TextDecoder().decode(storedErr?.bytes), "done\n");
      const stored = await harness.artifacts.get(block.artifact_id);
      assert.ok(stored, "the harness stored what the block names");
      assert.equal(stored.mime_type, "application/octet-stream");
      assert.equal(stored.bytes.byteLength, bytes.byteLength);
      assert.ok(sameBytes(stored.bytes, bytes), "the artifact is the output, byte for byte");
      assert.deepEqual(spools(), [], "no spool file is left");
    });

    it(
      "uploads a spooled stream from its file as it is sent: the peak memory grows by less than the output",
      { skip: PEAK_MEMORY_SKIP },
      async () => {
        // The upload goes through this runtime's own fetch to a server on 127.0.0.1 that counts
        // the bytes and keeps none (the token exchange goes to the harness).
        const size = 256 * 1024 * 1024;
        let uploaded = 0;
        const counter = createServer((request, response) => {
          request.on("data", (chunk: Uint8Array) => (uploaded += chunk.byteLength));
          request.on("end", () => {
            response.writeHead(201, { "content-type": "application/json" });
            response.end(JSON.stringify({ artifact_id: "art_counted" }));
          });
        });
        await new Promise<void>((resolve) => counter.listen(0, "127.0.0.1", resolve));
        const counterUrl = `http://127.0.0.1:${(counter.address() as AddressInfo).port}/artifacts`;
        after(() => new Promise<void>((resolve) => counter.close(() => resolve())));
        const countingFetch = (url: string | URL | Request, init?: RequestInit) =>
          fetch(String(url).endsWith("/artifacts") ? counterUrl : url, init);
        // A handler of its own around `runBash`, without live output (which would travel to the
        // harness in this process as it runs).
        const { harness, server } = await fx.harness();
        const { client } = fx.client(server, { fetch: countingFetch });
        const workdir = new Workdir(realpathSync(mkdtempSync(join(temp, "workdir-"))));
        client.tools.bash.handle((input, ctx) => runBash(input, { workdir, signal: ctx.signal }));
        await client.start();
        const executor = await harness.waitExecutor();
        const session = await executor.assignSession({ session_id: "ses_peak" });
        const { value: result, grown } = await peakGrowth(() =>
          session.tools.bash.call(
            { command: `head -c ${size} /dev/zero` },
            { toolCallId: "c_huge" },
          )
        );
        assert.equal(result.outcome, "completed");
        assert.equal(uploaded, size, "the whole stream was sent");
        // Never held whole: before, Deno's `openAsBlob` read the file into memory twice over.
        assert.ok(
          grown < size,
          `the peak grew by ${(grown / 1048576).toFixed(0)} MiB for ${size / 1048576} MiB sent`,
        );
        assert.deepEqual(spools(), [], "the spool file is gone after the upload");
      },
    );

    it("spools a long text stream and uploads it whole, its middle included; the omitted count is exact", async () => {
      const { harness, session } = await startMachine(fx);
      // The middle is printed once the executor has spooled the stream (the 1.5 MB before it pass
      // a 64 KiB pipe only as fast as the executor reads them); it says whether it saw the spool.
      const half = 1_500_000;
      const command = `head -c ${half} /dev/zero | tr '\\0' a; ` +
        `for i in $(seq 100); do ls -d '${temp}'/bma-bash-* >/dev/null 2>&1 && break; sleep 0.05; done; ` +
        `if ls -d '${temp}'/bma-bash-* >/dev/null 2>&1; then echo; echo MIDDLE-spooled; ` +
        `else echo; echo MIDDLE-in-memory; fi; head -c ${half} /dev/zero | tr '\\0' z`;
      const result = await session.tools.bash.call({ command }, { toolCallId: "c_text" });
      assert.equal(result.outcome, "completed");
      const expected = `${"a".repeat(half)}\nMIDDLE-spooled\n${"z".repeat(half)}`;
      const [block] = artifactBlocks(result.content);
      assert.equal(block?.name, "c_text.stdout.txt");
      const stored = await harness.artifacts.get(block.artifact_id);
      assert.equal(stored?.mime_type, "text/plain; charset=utf-8");
      assert.equal(new TextDecoder().decode(stored!.bytes), expected);
      const preview = String(result.structured_content?.stdout);
      const match = /\n… \[(\d+) bytes omitted\] …\n/.exec(preview);
      assert.ok(match, preview.slice(0, 200));
      const [head, tail] = preview.split(match[0]);
      assert.match(head, /^a+$/);
      assert.match(tail, /^z+$/);
      assert.equal(head.length + Number(match[1]) + tail.length, expected.length);
      assert.deepEqual(spools(), [], "the spool file is gone after the upload");
    });

    it("keeps what memory held for the artifact when no temp file can be made, and says why it is short", async () => {
      const { harness, session } = await startMachine(fx);
      // A temp dir below a file: the spool cannot be made (ENOTDIR), as on a full disk (ENOSPC).
      const blocked = join(temp, "a-file");
      writeFileSync(blocked, "");
      process.env.TMPDIR = join(blocked, "tmp");
      let result;
      try {
        result = await session.tools.bash.call(
          { command: "head -c 2000000 /dev/zero | tr '\\0' q" },
          { toolCallId: "c_nospool" },
        );
      } finally {
        process.env.TMPDIR = temp;
      }
      assert.equal(result.outcome, "completed");
      const [block] = artifactBlocks(result.content);
      const stored = await harness.artifacts.get(block.artifact_id);
      const kept = stored!.bytes.byteLength;
      assert.ok(kept >= 256 * 1024, `the artifact holds what memory held, not nothing: ${kept}`);
      assert.match(new TextDecoder().decode(stored!.bytes), /^q+$/);
      const note = JSON.stringify(result.content);
      assert.match(
        note,
        new RegExp(
          `holds the first ${kept} of 2000000 bytes of stdout \\(its temp file failed: ENOTDIR\\)`,
        ),
      );
      assert.doesNotMatch(note, /executor's bound/);
    });

    it("removes the spool of a canceled call", async () => {
      const { session } = await startMachine(fx);
      const call = session.tools.bash.call(
        { command: "head -c 1000000 /dev/zero | tr '\\0' x; exec sleep 1000" },
        { toolCallId: "c_cancel" },
      );
      await until(() => spools().length === 1);
      assert.deepEqual(await session.cancelTool("c_cancel"), { canceled: true });
      assert.equal((await call).outcome, "canceled");
      await until(() => spools().length === 0);
    });

    it("removes the spool of a call past its timeout_ms, and reports the timeout in the preview", async () => {
      // The timeout runs on an injected clock, struck once the command has printed everything.
      const clock = new ManualClock();
      const { dir, harness, session } = await startMachine(fx, { machine: { clock } });
      const call = session.tools.bash.call({
        command: "head -c 1000000 /dev/zero | tr '\\0' x; echo; echo LAST; touch printed; " +
          "exec sleep 1000",
        timeout_ms: 1_000,
      });
      await until(() => existsSync(join(dir, "printed")));
      await clock.advance(1_000);
      const result = await call;
      // The contract's BashInput.timeout_ms: outcome timed_out, with the output so far.
      assert.equal(result.outcome, "timed_out");
      assert.equal(result.error?.code, "timeout");
      assert.notEqual(result.is_error, true);
      assert.equal(result.structured_content?.exit_code, 124);
      assert.match(String(result.structured_content?.stderr), /timed out/);
      assert.match(String(result.structured_content?.stdout), /\nLAST\n$/);
      const [block] = artifactBlocks(result.content);
      const stored = await harness.artifacts.get(block.artifact_id);
      assert.equal(stored?.bytes.byteLength, 1_000_000 + "\nLAST\n".length);
      assert.deepEqual(spools(), []);
    });

    it("cuts a stream's artifact at the bound, and says so in the result", async () => {
      // A handler of its own around `runBash`, with a bound small enough for a test.
      const { harness, server } = await fx.harness();
      const { client } = fx.client(server);
      const dir = realpathSync(mkdtempSync(join(temp, "workdir-")));
      const workdir = new Workdir(dir);
      client.tools.bash.handle((input, ctx) =>
        runBash(input, { workdir, signal: ctx.signal, maxOutputBytes: 400_000 })
      );
      await client.start();
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_cut" });
      const result = await session.tools.bash.call(
        { command: "head -c 1000000 /dev/zero | tr '\\0' x" },
        { toolCallId: "c_cut" },
      );
      const [block] = artifactBlocks(result.content);
      const stored = await harness.artifacts.get(block.artifact_id);
      assert.equal(stored?.bytes.byteLength, 400_000);
      assert.ok(stored!.bytes.every((byte) => byte === 0x78));
      const text = result.content.find((b) => b.type === "text");
      assert.ok(text?.type === "text");
      assert.match(
        text.text,
        /c_cut\.stdout\.txt holds the first 400000 of 1000000 bytes of stdout/,
      );
      assert.deepEqual(spools(), []);
    });
  },
);
