/**
 * Large output: bash output beyond INLINE_RESULT_BYTES (or marked truncated) is cut to a head
 * and tail with the omitted byte count; the full output is uploaded first and referenced by an
 * artifact content block. Also uploadArtifact itself, and the legacy artifact path.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { INLINE_RESULT_BYTES } from "../../executor/node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

const decoder = new TextDecoder();
const utf8Bytes = (text: string) => new TextEncoder().encode(text).byteLength;

describe("ExecutorClient: large output and artifacts", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  async function bashSession(output: { stdout: string; stderr: string; truncated?: boolean }) {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    client.tools.bash.handle(() => ({ ...output, exit_code: 0 }));
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    return { harness, session, client };
  }

  it("cuts bash output beyond INLINE_RESULT_BYTES to head and tail, uploads it first and references it", async () => {
    const stdout = "A".repeat(30_000) + "MIDDLE" + "Z".repeat(30_000);
    const stderr = "warning: small\n";
    const { harness, session } = await bashSession({ stdout, stderr });
    const result = await session.tools.bash.call({ command: "big" }, { toolCallId: "c_big" });
    assert.equal(result.outcome, "completed");
    const preview = result.structured_content!;
    assert.equal(preview.truncated, true);
    assert.equal(preview.exit_code, 0);
    assert.equal(preview.stderr, stderr, "a small stream stays whole");
    const match = /\n… \[(\d+) bytes omitted\] …\n/.exec(preview.stdout);
    assert.ok(match, "the marker names the omitted byte count");
    const [head, tail] = preview.stdout.split(match[0]);
    assert.match(head, /^A+$/);
    assert.match(tail, /^Z+$/);
    assert.equal(head.length + Number(match[1]) + tail.length, stdout.length);
    assert.ok(utf8Bytes(head) + utf8Bytes(tail) + utf8Bytes(stderr) <= INLINE_RESULT_BYTES);
    // The full output, uploaded as artifacts and referenced by artifact blocks.
    const blocks = result.content.filter((b) => b.type === "artifact");
    assert.equal(blocks.length, 2);
    assert.deepEqual(result.artifacts?.map((a) => a.artifact_id), blocks.map((b) => b.artifact_id));
    const stored = await Promise.all(blocks.map((b) => harness.artifacts.get(b.artifact_id)));
    assert.deepEqual(stored.map((a) => a?.name), ["c_big.stdout.txt", "c_big.stderr.txt"]);
    assert.equal(decoder.decode(stored[0]!.bytes), stdout);
    assert.equal(decoder.decode(stored[1]!.bytes), stderr);
    const text = result.content.find((b) => b.type === "text");
    assert.ok(
      text?.type === "text" && text.text.includes("bytes omitted; full output in artifacts"),
    );
  });

  it("reports a result too large for one frame as a failed call (result_too_large), and goes on", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, { maxFrameBytes: 64 * 1024 });
    client.tools.read.handle((input) => ({
      content: input.path === "big" ? "x".repeat(100_000) : "small",
    }));
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    const big = await session.tools.read.call({ path: "big" });
    assert.equal(big.outcome, "failed");
    assert.equal(big.error?.code, "result_too_large");
    assert.deepEqual(big.content, []);
    const small = await session.tools.read.call({ path: "small" });
    assert.equal(small.outcome, "completed");
    assert.deepEqual(small.structured_content, { content: "small" });
  });

  it("a result the harness refuses as too large (1009, its limit under the executor's) is reported result_too_large after one reconnect, not sent for ever", async () => {
    const { harness, server } = await fx.harness({ maxFrameBytes: 150_000 });
    const { client, logger } = fx.client(server);
    const fits = "y".repeat(50_000);
    client.tools.read.handle((input) => ({
      content: input.path === "big"
        ? "x".repeat(400_000)
        : input.path === "fits"
        ? fits
        : input.path,
    }));
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    const big = await session.tools.read.call({ path: "big" });
    assert.equal(big.outcome, "failed");
    assert.equal(big.error?.code, "result_too_large");
    const after = await session.tools.read.call({ path: "after" });
    assert.equal(after.outcome, "completed");
    assert.deepEqual(after.structured_content, { content: "after" });
    // A frame under the harness's limit but over 64 KiB (its text twice over) still goes.
    const fitting = await session.tools.read.call({ path: "fits" });
    assert.equal(fitting.outcome, "completed");
    assert.equal((fitting.structured_content as { content: string }).content, fits);
    // One connection refused the big one; the next carried the failure and all that followed.
    assert.equal(
      logger.records.filter((r) => r.message.includes("refused a frame over its size limit"))
        .length,
      1,
    );
  });

  it("previews and uploads output the handler marked truncated, even under the limit", async () => {
    const { harness, session } = await bashSession({
      stdout: "partial",
      stderr: "",
      truncated: true,
    });
    const result = await session.tools.bash.call({ command: "x" });
    assert.deepEqual(result.structured_content, {
      stdout: "partial",
      stderr: "",
      exit_code: 0,
      truncated: true,
    });
    const [block] = result.content.filter((b) => b.type === "artifact");
    assert.ok(block?.type === "artifact");
    assert.equal(
      decoder.decode((await harness.artifacts.get(block.artifact_id))!.bytes),
      "partial",
    );
  });

  it("never cuts a multi-byte character in half", async () => {
    const stdout = "é€𝄞".repeat(10_000);
    const { session } = await bashSession({ stdout, stderr: "" });
    const result = await session.tools.bash.call({ command: "unicode" });
    const preview = result.structured_content!.stdout;
    assert.ok(!preview.includes("\uFFFD"), "no replacement character");
    const [head, tail] = preview.split(/\n… \[\d+ bytes omitted\] …\n/);
    assert.ok(stdout.startsWith(head));
    assert.ok(stdout.endsWith(tail));
  });

  it("uploads an artifact with uploadArtifact (project harness)", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    await client.start();
    const bytes = new Uint8Array([0, 1, 2, 254, 255]);
    const artifact = await client.uploadArtifact({
      name: "report ü.bin",
      data: bytes,
      mimeType: "application/octet-stream",
    });
    assert.equal(artifact.name, "report ü.bin");
    assert.equal(artifact.size, 5);
    const stored = await harness.artifacts.get(artifact.artifact_id);
    assert.deepEqual(stored?.bytes, bytes);
    assert.equal(stored?.mime_type, "application/octet-stream");
  });

  it("falls back to the legacy artifact path with the executor JWT", async () => {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    harness.missingPaths = /^\/v1\/environments\/[^/]+\/artifacts$/;
    const { client } = fx.client(harness);
    await client.start();
    const artifact = await client.uploadArtifact({ name: "log.txt", data: "hello" });
    assert.equal(artifact.artifact_id, "art_1");
    const [upload] = harness.artifacts;
    assert.equal(upload.path, "/v1/executors/artifacts");
    assert.equal(upload.headers.get("authorization"), "Bearer scripted.jwt.SECRET-1");
    assert.equal(upload.headers.get("x-artifact-name"), "log.txt");
    assert.equal(upload.headers.get("content-type"), "text/plain; charset=utf-8");
    assert.equal(decoder.decode(upload.bytes), "hello");
  });
});
