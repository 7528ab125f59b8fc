/**
 * The harness as a library drives it with executors that come, go and stop: what an
 * independent probe of its orchestration API found, each case through the public API.
 * - A settled tool call kept the connection it went out on (socket, peer, buffers: ~6 KB) for as
 *   long as the ledger remembered the call (10,000 by default), after its executor was gone.
 * - `return()` on a `session.events()` iterator whose `next()` waited did not end either until
 *   the next event or the session's end, and the reader stayed until then.
 * - A `waitExecutor` filter that threw for a later executor left the wait pending for good.
 * - `session.stop()` while the executor was away within its lease failed at once (and the
 *   session went on after the executor was back); raced by the executor's own stop, it rejected
 *   although the session had ended.
 * - A tool call in a session that was stopping went to the executor, to be refused there (-32002).
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  createLinkedTransportPair,
  ExecutorClient,
  Harness,
  RequestAbortedError,
  SessionEndedError,
  type Transport,
} from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { EXECUTOR_INFO, Fixtures, until } from "../helpers/executor-fixture.ts";
import { fullCollection } from "../helpers/full-collection.ts";

const PROTOCOL = "bma.executor.v1.1";

describe("the harness's orchestration API", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("a settled tool call does not keep the connection it went out on once its executor is gone", async () => {
    const harness = new Harness({ insecureNoAuth: true });
    fx.defer(() => harness.close());
    // Everything of the executor lives in this function: only a weak reference leaves it.
    const connection = async (): Promise<WeakRef<Transport>> => {
      const [executorSide, harnessSide] = createLinkedTransportPair({ protocol: PROTOCOL });
      await harness.accept(harnessSide);
      const client = new ExecutorClient({
        executor: EXECUTOR_INFO,
        harnessUrl: "ws://in-memory.invalid/",
        dial: () => Promise.resolve(executorSide),
      });
      client.tools.bash.handle(({ command }) => ({ stdout: command, stderr: "", exit_code: 0 }));
      await client.start();
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_kept" });
      await session.ready();
      const result = await session.tools.bash.call({ command: "once" }, {
        toolCallId: "call_kept",
      });
      assert.equal(result.structured_content?.stdout, "once");
      await session.stop("done");
      await client.stop();
      await executor.closed;
      return new WeakRef(harnessSide);
    };
    const weak = await connection();
    // The call is still remembered, for a repeat of its id.
    assert.equal((await harness.toolCall("call_kept"))?.state, "settled");
    const collect = fullCollection();
    for (let round = 0; round < 5 && weak.deref() !== undefined; round++) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      collect();
    }
    assert.equal(weak.deref(), undefined, "the gone executor's transport is still referenced");
  });

  /** A harness and an executor over 127.0.0.1 with session `sessionId` ready. */
  /** Cuts the executor off: its proxy leads nowhere until retargeted at the harness again. */
  async function goAway(proxy: ChaosProxy, executor: { readonly connected: boolean }) {
    const closed = await ChaosProxy.start("ws://127.0.0.1:1");
    fx.defer(() => closed.close());
    proxy.retarget(`ws://127.0.0.1:${closed.port}`);
    closed.cut();
    proxy.cut();
    await until(() => !executor.connected, "the harness sees the executor gone");
  }

  async function readySession(sessionId: string) {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: sessionId });
    await session.ready();
    return { client, session };
  }

  it("return() on an events iterator whose next() waits ends both at once", async () => {
    const { client, session } = await readySession("ses_events");
    await client.call("session.event", { session_id: "ses_events", event: { type: "one" } });
    const events = session.events({ from: 1 });
    const waiting = events.next();
    // Both settle although no event comes and the session goes on.
    assert.deepEqual(await events.return(), { done: true, value: undefined });
    assert.deepEqual(await waiting, { done: true, value: undefined });
    assert.deepEqual(await events.next(), { done: true, value: undefined });
    // A reader that breaks out of `for await` after a record is unchanged.
    for await (const record of session.events()) {
      assert.deepEqual(record.event, { type: "one" });
      break;
    }
    // `await using` returns it the same way.
    {
      await using reader = session.events({ from: 5 });
      const next = reader.next();
      await reader[Symbol.asyncDispose]();
      assert.deepEqual(await next, { done: true, value: undefined });
    }
    assert.equal(session.state, "ready");
  });

  it("a waitExecutor filter that throws rejects the wait with its error", async () => {
    const { harness, server } = await fx.harness();
    const failure = new Error("the filter failed");
    const later = assert.rejects(
      harness.waitExecutor({
        filter: () => {
          throw failure;
        },
      }),
      (error) => error === failure,
    );
    const { client } = fx.client(server);
    await client.start();
    await later;
    // With the executor held already: a rejected promise too, not a throw.
    let returned: Promise<unknown> | undefined;
    assert.doesNotThrow(() => {
      returned = harness.waitExecutor({
        filter: () => {
          throw failure;
        },
      });
    });
    await assert.rejects(returned!, (error) => error === failure);
  });

  it("session.stop() while the executor is away waits for it, then stops the session there", async () => {
    const { harness, server } = await fx.harness();
    const proxy = await ChaosProxy.start(server.url);
    fx.defer(() => proxy.close());
    const { client } = fx.client(server, { harnessUrl: proxy.url });
    const stoppedThere: string[] = [];
    client.onSessionStop((session, params) =>
      void stoppedThere.push(`${session.id}:${params.reason}`)
    );
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_away" });
    await session.ready();

    await goAway(proxy, executor);
    const stopped = session.stop("while away");
    let settled = false;
    stopped.then(() => (settled = true), () => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(settled, false, "the stop waits for the executor");

    proxy.retarget(server.url);
    assert.deepEqual(await stopped, { reason: "while away" });
    assert.equal(session.state, "ended");
    assert.deepEqual(stoppedThere, ["ses_away:while away"]);
    assert.equal(client.session("ses_away")?.state ?? "ended", "ended");
  });

  it("session.stop() aborted while the executor is away lets go of its wait at once", async () => {
    const { harness, server } = await fx.harness();
    const proxy = await ChaosProxy.start(server.url);
    fx.defer(() => proxy.close());
    const { client } = fx.client(server, { harnessUrl: proxy.url });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_gave_up" });
    await session.ready();
    await goAway(proxy, executor);

    // Each stop given up on while the executor is away: nothing of it may stay behind. (In a
    // function of its own: a suspended frame may keep its last values.)
    const givenUp = async () => {
      const controller = new AbortController();
      const stopped = session.stop("given up", { signal: controller.signal });
      await new Promise((resolve) => setTimeout(resolve, 0));
      controller.abort();
      await assert.rejects(stopped, RequestAbortedError);
      return new WeakRef(controller.signal);
    };
    const signals = [await givenUp(), await givenUp(), await givenUp()];
    const collect = fullCollection();
    await new Promise((resolve) => setTimeout(resolve, 0));
    collect();
    assert.deepEqual(signals.map((ref) => ref.deref() === undefined), [true, true, true]);
    // The session is untouched: a stop once the executor is back stops it.
    proxy.retarget(server.url);
    assert.deepEqual(await session.stop("later"), { reason: "later" });
  });

  it("session.stop() raced by the executor's own stop resolves with the session's end", async () => {
    const { client, session } = await readySession("ses_race");
    const stopped = session.stop("racing");
    await client.stop();
    const end = await stopped;
    assert.equal(session.state, "ended");
    assert.deepEqual(end, await session.ended);
  });

  it("a tool call in a session that is stopping is refused at the harness, never sent", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    const ran: string[] = [];
    client.tools.bash.handle(({ command }) => {
      ran.push(command);
      return { stdout: command, stderr: "", exit_code: 0 };
    });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    client.onSessionAssign((assigned) => {
      assigned.onCleanup(() => gate);
      queueMicrotask(() => void client.sessionReady(assigned.id));
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_stopping" });
    await session.ready();
    const stopped = session.stop("done");
    await until(() => session.state === "stopping", `the session is stopping (${session.state})`);
    await assert.rejects(
      session.tools.bash.call({ command: "too late" }),
      (error) =>
        error instanceof SessionEndedError && error.sessionId === "ses_stopping" &&
        error.reason === "stopping",
    );
    release();
    assert.deepEqual(await stopped, { reason: "done" });
    assert.deepEqual(ran, []);
  });
});
