/**
 * A harness started again on the store a previous one used goes on where that one stopped:
 * the executor's reconnect with `resume` reattaches its session, the events and the tool result
 * it resends are accepted exactly once, and the brain gets its work back — `harness.session(id)`
 * is live, a `callTool` repeated with its `tool_call_id` resolves with the result recorded
 * before or after the restart (the tool ran once), and `session.events({ from })` continues.
 *
 * The first harness "crashes": its server goes away with the sockets, and it is never touched
 * again (its clock is a ManualClock that never moves, so none of its deadlines writes to the
 * store afterwards). The store keeps JSON text, as a database would.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ArtifactStoreFullError,
  ExecutorClient,
  Harness,
  type HarnessOptions,
  type HarnessServer,
  type HarnessStore,
  INLINE_RESULT_BYTES,
  ManualClock,
  MemoryHarnessStore,
  openSqliteStore,
  type SessionEventRecord,
  StoreArtifactStore,
  type ToolCallResult,
} from "../../node.ts";
import { until } from "../helpers/executor-fixture.ts";
import { HeldStore } from "../helpers/held-store.ts";
import { listenPort } from "../helpers/ports.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const INFO = { name: "restart-executor", os: "linux", arch: "amd64", version: "0.0.1" };
const FAST = { initialDelayMs: 5, maxDelayMs: 50 };

interface Rig {
  client: ExecutorClient;
  runs: Map<string, number>;
  release: () => void;
}

describe("Harness restart on the same store", { timeout: 30_000 }, () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  async function serve(
    store: HarnessStore,
    port = 0,
    clock?: ManualClock,
    options: Partial<HarnessOptions> = {},
  ) {
    const harness = new Harness({
      ...options,
      store,
      // A "crashed" harness lives on in this process: the next one takes its store over.
      takeover: true,
      insecureNoAuth: true,
      heartbeatIntervalMs: 5_000,
      ...(clock ? { clock } : {}),
    });
    const server = await harness.serve({ hostname: "127.0.0.1", port });
    closing.push(() => harness.close(), () => server.close());
    return { harness, server, port: Number(new URL(server.url).port) };
  }

  function executor(server: HarnessServer): Rig {
    const runs = new Map<string, number>();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: INFO,
      reconnect: FAST,
      retry: FAST,
    });
    client.tools.bash.handle(async ({ command }) => {
      runs.set(command, (runs.get(command) ?? 0) + 1);
      if (command === "slow") await gate;
      return { stdout: `ran ${command}`, stderr: "", exit_code: 0 };
    });
    closing.push(() => client.stop());
    return { client, runs, release };
  }

  const event = (n: number) => ({ session_id: "ses_r", event: { type: "tick", n } });

  async function read(
    session: { events(o: { from: number }): AsyncIterable<SessionEventRecord> },
    from: number,
    count: number,
  ): Promise<number[]> {
    const out: number[] = [];
    for await (const record of session.events({ from })) {
      out.push((record.event as unknown as { n: number }).n);
      if (out.length === count) break;
    }
    return out;
  }

  it("takes the executor's resume after a crash: events and the result reach the brain once, in order", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    // A port no parallel test is given meanwhile: the harness comes back on it.
    const first = await serve(store, await listenPort(), new ManualClock());
    const rig = executor(first.server);
    await rig.client.start();
    const executorId = rig.client.executorId!;
    const handle = await first.harness.waitExecutor();
    const session = await handle.assignSession({ session_id: "ses_r" });
    await session.ready();
    const fast = await session.callTool({
      tool: "bash",
      input: { command: "fast" },
      tool_call_id: "call_fast",
    });
    for (let n = 0; n < 5; n++) await rig.client.call("session.event", event(n));
    const slow = session.callTool({
      tool: "bash",
      input: { command: "slow" },
      tool_call_id: "call_slow",
    });
    slow.catch(() => {});
    await until(() => rig.runs.get("slow") === 1, "the slow call runs");

    // The crash: the sockets go with the server; the first harness is never used again.
    await first.server.close();
    // Meanwhile the executor emits 20 events and finishes the call: none is acknowledged.
    const acks = Array.from(
      { length: 20 },
      (_, i) => rig.client.call("session.event", event(5 + i)),
    );
    rig.release();

    const second = await serve(store, first.port);
    const recovered = second.harness.session("ses_r");
    assert.ok(recovered, "harness.session(id) is live before the executor is back");
    assert.equal(recovered.state, "ready");
    assert.equal(recovered.executor.id, executorId);
    assert.equal(recovered.executor.connected, false);

    // Every event the executor resent is accepted: none is refused as unknown.
    const answers = await Promise.all(acks);
    assert.equal(answers.length, 20);
    assert.equal(answers.filter((a) => a.duplicate).length, 0);
    assert.equal(rig.client.executorId, executorId, "the executor kept its id");
    await until(() => second.harness.executor(executorId)?.connected === true, "reconnected");

    // The brain repeats its calls: the results recorded after and before the restart.
    const again: ToolCallResult = await recovered.callTool({
      tool: "bash",
      input: { command: "slow" },
      tool_call_id: "call_slow",
    });
    assert.equal(again.outcome, "completed");
    assert.deepEqual(again.structured_content, { stdout: "ran slow", stderr: "", exit_code: 0 });
    const fastAgain = await recovered.callTool({
      tool: "bash",
      input: { command: "fast" },
      tool_call_id: "call_fast",
    });
    assert.deepEqual(fastAgain, fast);
    assert.equal(rig.runs.get("slow"), 1, "the slow call ran once");
    assert.equal(rig.runs.get("fast"), 1, "the fast call ran once");

    // The consumer read 5 events before the crash: it continues with the next 20, in order.
    assert.deepEqual(await read(recovered, 5, 20), Array.from({ length: 20 }, (_, i) => 5 + i));
    const records = recovered.eventRecords;
    assert.deepEqual(records.map((r) => r.index), Array.from({ length: 25 }, (_, i) => i + 1));
    assert.deepEqual(
      records.map((r) => (r.event as unknown as { n: number }).n),
      Array.from({ length: 25 }, (_, i) => i),
    );

    // A repeat of session.assign for the session is accepted, not refused.
    const reassigned = await second.harness.executor(executorId)!.assignSession({
      session_id: "ses_r",
    });
    assert.equal(reassigned, recovered);
    // And the session goes on: a new call, a stop.
    const next = await recovered.tools.bash.call({ command: "after" });
    assert.equal(next.structured_content?.stdout, "ran after");
    assert.deepEqual(await recovered.stop("done"), { reason: "done" });
  });

  it("keeps what it held across a graceful close as well", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const first = await serve(store, await listenPort());
    const rig = executor(first.server);
    await rig.client.start();
    const handle = await first.harness.waitExecutor();
    const session = await handle.assignSession({ session_id: "ses_r" });
    await session.ready();
    for (let n = 0; n < 3; n++) await rig.client.call("session.event", event(n));
    const slow = session.callTool({
      tool: "bash",
      input: { command: "slow" },
      tool_call_id: "call_slow",
    });
    await until(() => rig.runs.get("slow") === 1, "the slow call runs");
    await first.harness.close();
    await first.server.close();
    // This process's brain was told: its call's outcome is unknown here.
    await assert.rejects(slow, { name: "ToolOutcomeUnknownError", reason: "harness_closed" });
    rig.release();

    const second = await serve(store, first.port);
    const recovered = second.harness.session("ses_r")!;
    assert.equal(recovered.state, "ready");
    const result = await recovered.callTool({
      tool: "bash",
      input: { command: "slow" },
      tool_call_id: "call_slow",
    });
    assert.equal(result.outcome, "completed");
    assert.equal(rig.runs.get("slow"), 1);
    assert.deepEqual(await read(recovered, 0, 3), [0, 1, 2]);
  });

  it("an executor stopped with a grace period while the harness is away delivers its finished results to the next", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const first = await serve(store, await listenPort());
    const rig = executor(first.server);
    const lost: string[] = [];
    rig.client.onToolResultLost((params) => void lost.push(params.tool_call_id));
    await rig.client.start();
    const handle = await first.harness.waitExecutor();
    const session = await handle.assignSession({ session_id: "ses_r" });
    await session.ready();
    const slow = session.callTool({
      tool: "bash",
      input: { command: "slow" },
      tool_call_id: "call_drained",
    });
    await until(() => rig.runs.get("slow") === 1, "the slow call runs");
    await first.harness.close();
    await first.server.close();
    await assert.rejects(slow, { name: "ToolOutcomeUnknownError", reason: "harness_closed" });
    // The stop begins while no harness is there, and the call finishes after it began.
    const stopping = rig.client.stop({ graceMs: 20_000 });
    rig.release();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(lost, [], "nothing given up at once");

    const second = await serve(store, first.port);
    const recovered = second.harness.session("ses_r")!;
    const result = await recovered.callTool({
      tool: "bash",
      input: { command: "slow" },
      tool_call_id: "call_drained",
    });
    assert.equal(result.outcome, "completed");
    assert.equal(rig.runs.get("slow"), 1);
    const closed = await stopping;
    assert.equal(closed.reason, "stopped");
    assert.deepEqual(lost, []);
  });

  it("a stop's grace period is over when the harness closes the executor meanwhile: no wait for a connection that cannot come", async () => {
    const { harness, server } = await serve(new MemoryHarnessStore({ values: "json" }));
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: INFO,
      reconnect: FAST,
      retry: FAST,
    });
    let running!: () => void;
    const started = new Promise<void>((resolve) => (running = resolve));
    client.tool("hold").handle((_input, context) =>
      new Promise((resolve) => {
        running();
        context.signal.addEventListener("abort", () => resolve("released"), { once: true });
      })
    );
    closing.push(() => client.stop());
    await client.start();
    const handle = await harness.waitExecutor();
    const session = await handle.assignSession({ session_id: "ses_grace" });
    await session.ready();
    session.callTool({ tool: "hold", input: {} }).catch(() => {});
    await started;
    const stopping = client.stop({ graceMs: 600_000 });
    await handle.close("replaced");
    const closed = await stopping;
    assert.equal(closed.reason, "stopped");
  });

  it("keeps the artifacts results point at in its store: the next harness serves them (SQLite)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-artifacts-"));
    closing.push(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
    const path = join(dir, "harness.db");
    const firstStore = await openSqliteStore(path);
    const first = await serve(firstStore, await listenPort());
    // Three chunks' worth, and more than a result carries inline.
    const stdout = Array.from({ length: 60_000 }, (_, i) => `line ${i} of the output\n`).join("");
    assert.ok(stdout.length > 2 * 512 * 1024 && stdout.length > INLINE_RESULT_BYTES);
    const client = new ExecutorClient({
      harnessUrl: first.server.url,
      executor: INFO,
      reconnect: FAST,
      retry: FAST,
    });
    client.tools.bash.handle(() => ({ stdout, stderr: "", exit_code: 0 }));
    closing.push(() => client.stop());
    await client.start();
    const handle = await first.harness.waitExecutor();
    const session = await handle.assignSession({ session_id: "ses_art" });
    const result = await session.tools.bash.call({ command: "big" });
    const block = result.content.find((b) => b.type === "artifact");
    assert.ok(block && block.type === "artifact", JSON.stringify(result.content).slice(0, 300));
    const id = block.artifact_id;
    const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes);
    assert.equal(text((await first.harness.artifacts.get(id))?.bytes), stdout);
    await client.stop();
    await first.harness.close();
    await first.server.close();
    await firstStore.close?.();

    const size = new TextEncoder().encode(stdout).byteLength;
    const second = await serve(await openSqliteStore(path), first.port, undefined, {
      maxStoredArtifactBytes: size + 100,
    });
    const artifacts = second.harness.artifacts;
    assert.ok(artifacts instanceof StoreArtifactStore);
    const kept = await artifacts.get(id);
    assert.equal(kept?.size, size);
    assert.equal(text(kept?.bytes), stdout);
    // What they hold counts against the bound, also across the restart: the oldest go to make
    // room; one larger than the bound is refused (507).
    const fifty = await artifacts.put({ bytes: new Uint8Array(50).fill(5), name: "fifty.bin" });
    assert.equal((await artifacts.get(id))?.size, size, "room enough: nothing deleted");
    const sixty = await artifacts.put({ bytes: new Uint8Array(60).fill(6) });
    assert.equal(await artifacts.get(id), undefined, "the oldest deleted to make room");
    assert.deepEqual((await artifacts.get(fifty.artifact_id))?.bytes, new Uint8Array(50).fill(5));
    assert.equal((await artifacts.get(sixty.artifact_id))?.name, undefined);
    await assert.rejects(
      artifacts.put({ bytes: new Uint8Array(size + 101) }),
      ArtifactStoreFullError,
    );
    // Only ids it gave name artifacts: nothing else of the store is read or deleted.
    for (const other of ["art_none", "s", "a/s", "../x"]) {
      assert.equal(await artifacts.get(other), undefined, other);
      assert.equal(await artifacts.delete(other), false, other);
    }
    assert.equal(await artifacts.delete(fifty.artifact_id), true);
    assert.equal(await artifacts.delete(fifty.artifact_id), false);
    assert.equal(await artifacts.get(fifty.artifact_id), undefined);
  });

  it("an artifact whose writing fails midway leaves nothing in the store, and counts nothing", async () => {
    const store = new HeldStore();
    const artifacts = new StoreArtifactStore(store, { maxBytes: 8 * 1024 * 1024 });
    store.holding = ["art/"];
    // Two batches of chunks: the first is written, the second (with the description) fails.
    const putting = artifacts.put({ bytes: new Uint8Array(5 * 1024 * 1024).fill(1) });
    const [first] = await store.heldWrites(1);
    first.commit();
    const [, second] = await store.heldWrites(2);
    second.fail();
    await assert.rejects(putting, /connection was lost/);
    store.holding = [];
    assert.deepEqual(await store.list("art/"), [], "no chunk without its description");
    // Nothing of it counts: the whole bound is there for the next.
    const next = await artifacts.put({ bytes: new Uint8Array(8 * 1024 * 1024).fill(2) });
    assert.equal((await artifacts.get(next.artifact_id))?.size, 8 * 1024 * 1024);
  });

  it("an upload a harness left unfinished (it stopped midway) is deleted by the next on the store, and counted by none", async () => {
    const store = new HeldStore();
    const first = new StoreArtifactStore(store, { maxBytes: 8 * 1024 * 1024 });
    store.holding = ["art/"];
    void first.put({ bytes: new Uint8Array(5 * 1024 * 1024).fill(1) }).catch(() => {});
    const [written] = await store.heldWrites(1);
    written.commit();
    await store.heldWrites(2);
    // The process is gone: its second batch never lands, and nothing cleans up after it.
    store.holding = [];
    assert.ok((await store.list("art/")).length > 1, "its place and first chunks are stored");
    const next = new StoreArtifactStore(store, { maxBytes: 8 * 1024 * 1024 });
    const kept = await next.put({ bytes: new Uint8Array(8 * 1024 * 1024).fill(2) });
    const left = (await store.list("art/")).map(([key]) => key);
    assert.ok(
      left.every((key) => key.startsWith(`art/${kept.artifact_id}/`) || key.startsWith("art/o/")),
    );
    assert.equal(
      left.filter((key) => key.startsWith("art/o/")).length,
      1,
      "one place: the new one",
    );
  });

  it("counts uploads made at once by what each holds: the bound holds for the next harness too (SQLite)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-artifacts-"));
    closing.push(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
    const store = await openSqliteStore(join(dir, "a.db"));
    closing.push(async () => await store.close?.());
    const bound = 16 * 1024 * 1024;
    const first = new StoreArtifactStore(store, { maxBytes: bound });
    const sizes = [3_000_000, 5_000_000, 100, 4_000_000, 200_000];
    await Promise.all(sizes.map((n) => first.put({ bytes: new Uint8Array(n).fill(7) })));
    // A harness started again on the store fills it to its bound: the oldest make room.
    const next = new StoreArtifactStore(store, { maxBytes: bound });
    for (let i = 0; i < 3; i++) await next.put({ bytes: new Uint8Array(5_000_000) });
    let held = 0;
    for (const [key, value] of await store.list<{ size: number }>("art/")) {
      if (key.endsWith("/m")) held += value.size;
    }
    assert.ok(held <= bound, `${held} bytes held, over the bound of ${bound}`);
    assert.ok(held >= 15_000_000, `the three new ones are all there (${held} bytes)`);
  });

  it("ends the sessions of an executor that does not come back within the fresh lease", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const first = await serve(store, 0, new ManualClock());
    const rig = executor(first.server);
    await rig.client.start();
    const handle = await first.harness.waitExecutor();
    const session = await handle.assignSession({ session_id: "ses_r" });
    await session.ready();
    const slow = session.callTool({ tool: "bash", input: { command: "slow" } });
    slow.catch(() => {});
    await until(() => rig.runs.get("slow") === 1, "the slow call runs");
    // The harness goes down first, so the executor cannot say goodbye: it just never returns.
    await first.server.close();
    await rig.client.stop({ reason: "gone for good" }).catch(() => {});

    const clock = new ManualClock();
    const second = await serve(store, 0, clock);
    const recovered = second.harness.session("ses_r")!;
    const executorId = recovered.executor.id;
    assert.equal(second.harness.executor(executorId)?.leaseExpiresAt, clock.now() + 10_000);
    await clock.advance(10_000);
    assert.deepEqual(await recovered.ended, { reason: "lease_expired" });
    assert.equal(second.harness.executor(executorId), undefined);
    // Forgotten by the store too: a third harness holds nothing of it.
    const third = await serve(store, 0, new ManualClock());
    assert.equal(third.harness.executors.length, 0);
    assert.equal(third.harness.session("ses_r")?.state, "ended");
  });
});
