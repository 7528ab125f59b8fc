/**
 * `AbortSignal` and streams on real parts, on Node, Deno and Bun: a harness serving WebSocket on
 * 127.0.0.1 and an `ExecutorClient` of this runtime's entry point (serving the machine, real
 * PTYs, where a terminal is needed). An already-aborted signal rejects each waiting call with
 * `RequestAbortedError` and starts nothing; one aborted mid-wait rejects it and stops only the
 * wait (the session still becomes ready, still stops; the client still connects, still stops);
 * a `for await` that breaks releases its reader (a second one may read), an aborted read ends
 * quietly, and `serveMachine` and `serveWebSocket` are `AsyncDisposable` (the machine's
 * processes are gone when its block ends). Nothing waits on a timer: each step waits for the
 * event it needs.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const EXECUTOR = { name: "aborting", os: "linux", arch: "amd64", version: "1.0.0" } as const;
/** Per test (Bun does not pass a suite's timeout on to its tests). */
const SLOW = { timeout: 30_000 };

/** A promise with its resolve exposed. */
function deferred<T = void>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Rejects with `RequestAbortedError` whose cause is `reason`. */
async function abortedWith(promise: Promise<unknown>, reason: unknown): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof sdk.RequestAbortedError, String(error));
    assert.equal(error.cause, reason);
    return true;
  });
}

/** Whether anything still accepts a TCP connection at `url`'s host and port. */
async function refuses(url: string): Promise<boolean> {
  const { host } = new URL(url.replace(/^ws/, "http"));
  try {
    await fetch(`http://${host}/`, { signal: AbortSignal.timeout(5_000) });
    return false;
  } catch {
    return true;
  }
}

/** Whether process `pid` exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A harness on 127.0.0.1, a connected client whose `bash` handler counts its runs (`ran`), and a
 * ready session `sessionId`; disposed in the reverse order.
 */
async function countingRig(sessionId: string) {
  const held: AsyncDisposable[] = [];
  const dispose = async () => {
    for (const part of held.splice(0).reverse()) await part[Symbol.asyncDispose]();
  };
  try {
    const harness = new sdk.Harness({ insecureNoAuth: true });
    held.push(harness);
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    held.push(server);
    const client = new sdk.ExecutorClient({ harnessUrl: server.url, executor: EXECUTOR });
    held.push(client);
    let ran = 0;
    client.tools.bash.handle(() => {
      ran++;
      return "ran";
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: sessionId });
    held.push(session);
    await session.ready();
    return {
      harness,
      client,
      executor,
      session,
      get ran() {
        return ran;
      },
      [Symbol.asyncDispose]: dispose,
    };
  } catch (error) {
    await dispose();
    throw error;
  }
}

describe(`AbortSignal and streams (${RUNTIME})`, { timeout: 120_000 }, () => {
  it("an already-aborted signal rejects each waiting call and starts nothing", SLOW, async () => {
    await using rig = await countingRig("ses_gone");
    const { harness, client, executor, session } = rig;

    const reason = new Error("not any more");
    const signal = AbortSignal.abort(reason);
    // The harness end.
    await abortedWith(harness.waitExecutor({ signal }), reason);
    // Before, each was recorded and sent, then cancelled: a fast handler ran all the same.
    await abortedWith(
      session.callTool({ tool: "bash", input: { command: "x" } }, { signal }),
      reason,
    );
    await abortedWith(session.tools.bash.call({ command: "x" }, { signal }), reason);
    await abortedWith(
      session.callTool({ tool: "bash", input: { command: "x" }, tool_call_id: "call_a" }, {
        signal,
      }),
      reason,
    );
    assert.equal(await harness.toolCall("call_a"), undefined, "no call was recorded");
    // Before, the harness marked the executor draining and never told it.
    await abortedWith(executor.drain({}, { signal }), reason);
    assert.equal(executor.draining, false, "the executor is not draining");
    await abortedWith(session.ready({ signal }), reason);
    await abortedWith(session.terminal({ argv: ["sh"], signal }), reason);
    await abortedWith(session.mcp("echo", { signal }), reason);
    await abortedWith(session.cancelTool("call_none", "no longer needed", { signal }), reason);
    await abortedWith(session.stop("done", { signal }), reason);
    await abortedWith(executor.close("done", { signal }), reason);
    assert.equal(session.state, "ready", "the session was not stopped");
    assert.ok(executor.connected, "the executor was not closed");
    // The executor end.
    await abortedWith(client.start({ signal }), reason);
    await abortedWith(client.sessionReady("ses_gone", { signal }), reason);
    await abortedWith(client.call("session.ready", { session_id: "ses_gone" }, { signal }), reason);
    await abortedWith(client.sessionEnded("ses_gone", "done", { signal }), reason);
    await abortedWith(client.stop({ signal }), reason);
    assert.ok(client.session("ses_gone"), "the session was not ended");
    assert.equal(client.state, "connected", "the client was not stopped");
    // The calls above reached nothing: the executor's handler runs for the next call only.
    const result = await session.callTool({ tool: "bash", input: { command: "x" } });
    assert.equal(result.outcome, "completed");
    assert.equal(rig.ran, 1, "only the call that was not aborted ran");
  });

  it(
    "a call's options that are none get InvalidCallOptionError, and nothing is sent",
    SLOW,
    async () => {
      await using rig = await countingRig("ses_options");
      const { harness, client, executor, session } = rig;
      const invalid = (option: string) => (error: unknown) => {
        assert.ok(error instanceof sdk.InvalidCallOptionError, String(error));
        assert.equal(error.option, option);
        return true;
      };
      // An AbortController for its signal: before, the call was sent, and when it ended the
      // process died of an unhandled TypeError.
      const controller = new AbortController() as unknown as AbortSignal;
      const bash = { tool: "bash", input: { command: "x" } };
      await assert.rejects(session.callTool(bash, { signal: controller }), invalid("signal"));
      await assert.rejects(session.ready({ signal: controller }), invalid("signal"));
      await assert.rejects(
        client.call("session.ready", { session_id: "ses_options" }, { signal: controller }),
        invalid("signal"),
      );
      // A timeout that is no span of time: before, -1 and NaN waited forever, 2^31 fired at once.
      for (const timeoutMs of [-1, Number.NaN, 2 ** 31, Infinity]) {
        await assert.rejects(
          client.call("session.ready", { session_id: "ses_options" }, { timeoutMs }),
          invalid("timeoutMs"),
        );
        await assert.rejects(
          executor.request("executor.drain", {}, { timeoutMs }),
          invalid("timeoutMs"),
        );
      }
      // No params at all: before, a TypeError from deep inside.
      const noParams = (error: unknown) => error instanceof sdk.InvalidOutgoingParamsError;
      await assert.rejects(session.callTool(null as never), noParams);
      await assert.rejects(executor.assignSession(null as never), noParams);
      // A position that is no count: before, NaN yielded `undefined` without end.
      for (const from of [Number.NaN, 1.5, -1, "1" as unknown as number]) {
        await assert.rejects(session.events({ from }).next(), invalid("from"));
      }
      assert.equal(executor.draining, false, "no drain was sent");
      // The harness's own options: before, each was taken (a heartbeat of -1 or NaN, a count of
      // Infinity), and serve({ hostname: "" }) listened on every interface as `ws://:port`.
      const config = (option: string) => (error: unknown) => {
        assert.ok(error instanceof sdk.HarnessConfigError, String(error));
        assert.equal(error.option, option);
        return true;
      };
      for (const bad of [-1, 0, Number.NaN, 1e12, "abc" as unknown as number]) {
        assert.throws(
          () => new sdk.Harness({ heartbeatIntervalMs: bad }),
          config("heartbeatIntervalMs"),
        );
        assert.throws(
          () => new sdk.Harness({ handshakeTimeoutMs: bad }),
          config("handshakeTimeoutMs"),
        );
      }
      assert.throws(() => new sdk.Harness({ requestTimeoutMs: -5 }), config("requestTimeoutMs"));
      assert.throws(() => new sdk.Harness({ maxFrameBytes: Number.NaN }), config("maxFrameBytes"));
      assert.throws(() => new sdk.Harness({ maxSessionEvents: -1 }), config("maxSessionEvents"));
      assert.throws(
        () => new sdk.Harness({ rememberToolCalls: Infinity }),
        config("rememberToolCalls"),
      );
      await assert.rejects(harness.serve({ hostname: "" }), config("hostname"));
      for (const port of [-1, 70_000, 1.5, Number.NaN, "80" as unknown as number]) {
        await assert.rejects(harness.serve({ hostname: "127.0.0.1", port }), config("port"));
      }
      const result = await session.callTool(bash);
      assert.equal(result.outcome, "completed");
      assert.equal(rig.ran, 1, "only the last call ran");
    },
  );

  it(
    "aborting the harness's waits stops them only: the session becomes ready, then stops",
    SLOW,
    async () => {
      await using harness = new sdk.Harness({ insecureNoAuth: true });
      await using server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      await using client = new sdk.ExecutorClient({ harnessUrl: server.url, executor: EXECUTOR });
      // With a set-up of its own the executor reports the session ready when it says so, and it
      // sends session.ended once its stop handler is done.
      client.onSessionAssign(() => {});
      const stopHeld = deferred();
      client.onSessionStop(() => stopHeld.promise);
      await client.start();
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_waits" });

      const readying = new AbortController();
      const ready = session.ready({ signal: readying.signal });
      readying.abort("enough");
      await abortedWith(ready, "enough");
      assert.equal(session.state, "assigned");
      await client.sessionReady(session.id);
      await session.ready();

      const stopping = deferred();
      const watch = harness.observe((o) => {
        if (o.type === "session.state" && o.sessionId === session.id && o.state === "stopping") {
          stopping.resolve();
        }
      });
      const waiting = new AbortController();
      const stop = session.stop("done", { signal: waiting.signal });
      await stopping.promise;
      watch.dispose();
      waiting.abort("enough");
      await abortedWith(stop, "enough");
      assert.equal(session.state, "stopping", "the stop goes on");
      stopHeld.resolve();
      assert.equal((await session.ended).reason, "done");
    },
  );

  it("aborting the executor's start and stop stops the waits only", SLOW, async () => {
    // An authenticate that waits holds the client's start until it is told.
    const authenticating = deferred();
    const verdict = deferred();
    await using gated = new sdk.Harness({
      authenticate: async () => {
        authenticating.resolve();
        await verdict.promise;
        throw new Error("refused");
      },
    });
    await using gatedServer = await gated.serve({ hostname: "127.0.0.1", port: 0 });
    {
      await using client = new sdk.ExecutorClient({
        harnessUrl: gatedServer.url,
        executor: EXECUTOR,
      });
      const starting = new AbortController();
      const start = client.start({ signal: starting.signal });
      await authenticating.promise;
      starting.abort("enough");
      await abortedWith(start, "enough");
      assert.notEqual(client.state, "stopped", "the client goes on connecting");
      verdict.resolve();
    }

    // A stop with a grace period waits for a running call: aborting stops that wait only.
    await using harness = new sdk.Harness({ insecureNoAuth: true });
    await using server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const client = new sdk.ExecutorClient({ harnessUrl: server.url, executor: EXECUTOR });
    const running = deferred();
    client.tool("hold").handle((_input, context) =>
      new Promise((resolve) => {
        running.resolve();
        context.signal.addEventListener("abort", () => resolve("released"), { once: true });
      })
    );
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_hold" });
    await session.ready();
    const call = session.callTool({ tool: "hold", input: {} }).catch((error) => error);
    await running.promise;
    const waiting = new AbortController();
    const stop = client.stop({ graceMs: 60_000, signal: waiting.signal });
    waiting.abort("enough");
    await abortedWith(stop, "enough");
    assert.equal(client.state, "stopping", "the stop goes on");
    // A stop without grace cuts the grace period short.
    assert.equal((await client.stop()).reason, "stopped");
    await call;
  });

  it(
    "a loop that breaks releases the terminal's reader; an aborted read ends quietly",
    SLOW,
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "bma-abort-"));
      try {
        await using harness = new sdk.Harness({ insecureNoAuth: true });
        await using server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
        await using client = new sdk.ExecutorClient({ harnessUrl: server.url, executor: EXECUTOR });
        let pid: number | undefined;
        {
          await using machine = sdk.serveMachine(client, {
            workdir: dir,
            cgroups: false,
            env: { HOME: dir },
          });
          const _disposes: AsyncDisposable = machine;
          await client.start();
          const executor = await harness.waitExecutor();
          const session = await executor.assignSession({ session_id: "ses_streams" });
          await session.ready();

          const terminal = await session.terminal({ argv: ["sh"], cols: 80, rows: 24 });
          pid = terminal.pid;
          assert.ok(pid !== undefined && alive(pid));
          await terminal.write("echo first-$((40+2))\n");
          for await (const text of terminal) if (text.includes("first-42")) break;
          // The loop's end released the reader: a second one may read (one at a time).
          await terminal.write("echo second-$((40+3)); exit 7\n");
          let rest = "";
          for await (const text of terminal.text()) rest += text;
          assert.match(rest, /second-43/);
          assert.equal(await terminal.exited, 7);

          // A read of the events waiting for the next one ends when its signal aborts.
          const reading = new AbortController();
          const records: unknown[] = [];
          const read = (async () => {
            for await (const record of session.events({ signal: reading.signal })) {
              records.push(record);
            }
          })();
          reading.abort();
          await read;
          assert.deepEqual(records, []);

          // The machine holds a process when its block ends: the next terminal's shell.
          const next = await session.terminal({ argv: ["sh"], cols: 80, rows: 24 });
          pid = next.pid;
          assert.ok(pid !== undefined && alive(pid));
        }
        assert.ok(!alive(pid!), "the machine's processes are gone when its disposal resolves");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it("serveWebSocket's server is closed at the end of its block", SLOW, async () => {
    let url = "";
    {
      await using running = await sdk.serveWebSocket({
        hostname: "127.0.0.1",
        port: 0,
        upgrade: () =>
          Promise.resolve({ accept: false, response: new Response(null, { status: 403 }) }),
      });
      url = running.url;
      assert.ok(!(await refuses(url)));
    }
    assert.ok(await refuses(url));
  });
});
