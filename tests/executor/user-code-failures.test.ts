/**
 * What the user's own code does wrong never ends the executor (or the harness): a hook that
 * throws a value with no string form (`Object.create(null)`), a logger whose sink throws, and
 * options the client would only call later (a logger without its methods, a clock, a dialer, a
 * token origin it could never fetch) refused at construction with `ExecutorConfigError`.
 *
 * Before: the first three ended the process (`TypeError: Cannot convert object to primitive
 * value` from describing the thrown value, `Cannot read properties of undefined (reading
 * 'call')` from the logger); a `baseUrl` that is no http(s) URL was found out only at the first fetch.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ExecutorClient,
  type ExecutorClientOptions,
  ExecutorConfigError,
  Harness,
  HarnessConfigError,
  type Logger,
  ProtocolError,
} from "../../node.ts";
import { EXECUTOR_INFO, Fixtures } from "../helpers/executor-fixture.ts";

describe("user code that fails", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("an onSessionAssign that throws a value with no string form refuses the session (-32603), and the executor goes on", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    let refuse = true;
    client.onSessionAssign((session) => {
      if (refuse) throw Object.create(null);
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    await client.start();
    const executor = await harness.waitExecutor();
    await assert.rejects(
      executor.assignSession({ session_id: "ses_refused" }),
      (error) => error instanceof ProtocolError && error.code === -32603,
    );
    refuse = false;
    const session = await executor.assignSession({ session_id: "ses_next" });
    await session.ready();
    assert.equal(executor.connected, true);
  });

  it("cleanup and stop hooks that throw a value with no string form still end the session", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, { sessionGraceMs: 100 });
    client.onSessionAssign((session) => {
      session.onCleanup(() => {
        throw Object.create(null);
      });
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    client.onSessionStop(() => {
      throw Object.create(null);
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_hooks" });
    await session.ready();
    assert.deepEqual(await session.stop("done"), { reason: "done" });
    assert.equal(client.session("ses_hooks"), undefined);
  });

  it("a logger whose sink throws loses its records, never the client's work", async () => {
    const { harness, server } = await fx.harness();
    const failing = () => {
      throw new Error("the log sink is gone");
    };
    const logger: Logger = { debug: failing, info: failing, warn: failing, error: failing };
    const { client } = fx.client(server, { logger });
    client.tools.bash.handle(({ command }) => ({ stdout: command, stderr: "", exit_code: 0 }));
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_logged" });
    const result = await session.tools.bash.call({ command: "still works" });
    assert.equal(result.structured_content?.stdout, "still works");
  });

  it("refuses at construction what the client would call later, or could never reach", async () => {
    const base: ExecutorClientOptions = {
      harnessUrl: "ws://127.0.0.1:9/",
      executor: EXECUTOR_INFO,
      token: "t",
    };
    const refused: [string, Record<string, unknown>][] = [
      ["logger without methods", { logger: {} }],
      ["logger with one method", { logger: { info: () => {} } }],
      ["logger as a string", { logger: "console" }],
      ["clock as a string", { clock: "x" }],
      ["clock without clearTimeout", { clock: { now: Date.now, setTimeout } }],
      ["dial as a string", { dial: "x" }],
      ["random as a number", { random: 4 }],
      ["fetch as an object", { fetch: {} }],
      ["harnessUrl as a number", { harnessUrl: 42 }],
      ["baseUrl as a number", { baseUrl: 5 }],
      ["baseUrl of ws", { baseUrl: "ws://127.0.0.1:9" }],
      ["baseUrl that is no URL", { baseUrl: "not a url" }],
    ];
    for (const [what, options] of refused) {
      assert.throws(
        () => new ExecutorClient({ ...base, ...options } as ExecutorClientOptions),
        ExecutorConfigError,
        what,
      );
    }
    // Taken: what the client can reach, and any URL for a dialer of the caller's own.
    for (
      const options of [
        { harnessUrl: "wss://harness.example/" },
        { harnessUrl: "unix:///tmp/harness.sock" },
        { harnessUrl: "\\\\.\\pipe\\harness" },
        { harnessUrl: "memory://edge", dial: () => Promise.reject(new Error("unused")) },
        { baseUrl: "https://bma.example/api/v1" },
        { logger: console },
      ]
    ) {
      new ExecutorClient({ ...base, ...options } as ExecutorClientOptions);
    }
    assert.throws(
      () => new Harness({ insecureNoAuth: true, logger: {} as Logger }),
      HarnessConfigError,
    );
    // `listen` with no socket URL at all: the same typed refusal as a URL of another kind.
    const listener = new ExecutorClient(base);
    await assert.rejects(listener.listen(5 as unknown as string), ExecutorConfigError);
    await listener.stop();
  });
});
