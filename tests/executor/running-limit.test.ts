/**
 * The bound on tool handlers running at once, over real WebSockets on 127.0.0.1 between a
 * `Harness` and an `ExecutorClient`: calls beyond `maxRunningToolCalls` are acknowledged and wait
 * for a slot, first come first served; beyond `maxQueuedToolCalls` more are refused with -32009
 * before any ack; a waiting call that is canceled, or whose `timeout_ms` passes while it waits,
 * is reported at once without its handler ever running. (Unbounded, ten thousand `bash` calls
 * at once exhausted the machine's file descriptors and failed unrelated calls.)
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ExecutorClient,
  ExecutorConfigError,
  Harness,
  ManualClock,
  ResourceExhaustedError,
} from "../../node.ts";
import { until } from "../helpers/executor-fixture.ts";

const INFO = { name: "running-limit", os: "linux", arch: "x64", version: "0.0.1" };

/** A bash handler whose calls run until the test releases them, counting how many run at once. */
function heldBash(client: ExecutorClient) {
  const started: string[] = [];
  const release = new Map<string, () => void>();
  let running = 0;
  let mostRunning = 0;
  client.tools.bash.handle(async ({ command }) => {
    started.push(command);
    running++;
    mostRunning = Math.max(mostRunning, running);
    await new Promise<void>((resolve) => release.set(command, resolve));
    running--;
    return { stdout: command, stderr: "", exit_code: 0 };
  });
  return {
    started,
    get mostRunning() {
      return mostRunning;
    },
    release(command: string) {
      const resolve = release.get(command);
      assert.ok(resolve, `${command} is running`);
      resolve();
    },
  };
}

describe("tool calls beyond the running limit", { timeout: 60_000 }, () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  async function connected(options: {
    maxRunningToolCalls?: number;
    maxQueuedToolCalls?: number;
    clock?: ManualClock;
  }) {
    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closing.push(() => server.close(), () => harness.close());
    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO, ...options });
    closing.push(() => client.stop());
    const bash = heldBash(client);
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_limit" });
    const call = (command: string, extra: { timeout_ms?: number } = {}) =>
      session.callTool({ tool: "bash", input: { command }, tool_call_id: command, ...extra });
    return { harness, client, session, bash, call };
  }

  it("runs at most the limit, queues the rest in order and refuses beyond the queue", async () => {
    const { bash, call } = await connected({ maxRunningToolCalls: 2, maxQueuedToolCalls: 2 });
    const calls = ["a", "b", "c", "d"].map((command) => call(command));
    await until(() => bash.started.length === 2, "two handlers running");
    // c and d are acknowledged and waiting: a fifth finds every slot and the queue taken.
    await assert.rejects(call("e"), (error: unknown) => {
      assert.ok(error instanceof ResourceExhaustedError, String(error));
      assert.deepEqual(error.data, {
        reason: "too_many_tool_calls",
        max_running: 2,
        max_queued: 2,
      });
      return true;
    });
    assert.deepEqual(bash.started, ["a", "b"]);
    bash.release("b");
    await until(() => bash.started.length === 3, "c started in b's slot");
    assert.deepEqual(bash.started, ["a", "b", "c"]);
    bash.release("a");
    await until(() => bash.started.length === 4, "d started in a's slot");
    bash.release("c");
    bash.release("d");
    const results = await Promise.all(calls);
    assert.deepEqual(results.map((r) => r.structured_content?.stdout), ["a", "b", "c", "d"]);
    assert.equal(bash.mostRunning, 2);
    // Once there is room again, a new call runs.
    const later = call("f");
    await until(() => bash.started.includes("f"), "f started");
    bash.release("f");
    assert.equal((await later).outcome, "completed");
  });

  it("a waiting call canceled is reported canceled at once, its handler never run", async () => {
    const { session, bash, call } = await connected({ maxRunningToolCalls: 1 });
    const running = call("running");
    const waiting = call("waiting");
    await until(() => bash.started.length === 1, "the first handler running");
    // Until the executor has the call, it answers that there is nothing to cancel.
    while (!(await session.cancelTool("waiting")).canceled);
    assert.equal((await waiting).outcome, "canceled");
    bash.release("running");
    assert.equal((await running).outcome, "completed");
    assert.deepEqual(bash.started, ["running"]);
  });

  it("the time a call waits counts toward its timeout_ms", async () => {
    const clock = new ManualClock();
    const { harness, bash, call } = await connected({ maxRunningToolCalls: 1, clock });
    const running = call("running");
    await until(() => bash.started.length === 1, "the first handler running");
    const waiting = call("waiting", { timeout_ms: 1_000 });
    // Acknowledged, so waiting for a slot (the executor queues it as it sends the ack).
    for (;;) {
      const status = await harness.toolCall("waiting");
      if (status?.state === "dispatched") break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await clock.advance(999);
    assert.deepEqual(bash.started, ["running"]);
    await clock.advance(1);
    const result = await waiting;
    assert.equal(result.outcome, "timed_out");
    bash.release("running");
    assert.equal((await running).outcome, "completed");
    assert.deepEqual(bash.started, ["running"]);
  });

  it("refuses a limit that is not a positive integer", () => {
    for (const options of [{ maxRunningToolCalls: 0 }, { maxQueuedToolCalls: 1.5 }]) {
      assert.throws(
        () => new ExecutorClient({ harnessUrl: "ws://127.0.0.1:1", executor: INFO, ...options }),
        ExecutorConfigError,
      );
    }
  });
});
