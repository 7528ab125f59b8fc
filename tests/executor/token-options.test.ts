/**
 * The two credentials of one's own: `token` (one that does not change, for a harness whose
 * `authenticate` checks it) and `tokenSource` (a function returning fresh ones). A static token
 * reaches `authenticate` on every connection and never a log line; a source returning the wrong
 * shape stops the client at once with `InvalidTokenSourceResultError`, naming what is wrong and
 * never the value. Against the project's `Harness` on 127.0.0.1.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ConnectionRefusedError,
  ExecutorClient,
  type ExecutorClientOptions,
  ExecutorConfigError,
  InvalidTokenSourceResultError,
} from "../../executor/node.ts";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import { ConnectRefusedError } from "../../harness/errors.ts";
import { EXECUTOR_INFO } from "../helpers/executor-fixture.ts";
import { CapturingLogger } from "../helpers/raw.ts";

const TOKEN = "static-SECRET-token-5c1d0e9a";

const clients: ExecutorClient[] = [];
const harnesses: { harness: Harness; server: HarnessServer }[] = [];
const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.stop();
  for (const { harness, server } of harnesses.splice(0)) {
    await harness.close();
    await server.close();
  }
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/**
 * A harness whose `authenticate` admits `TOKEN` as environment `env_1`, and records each token;
 * on 127.0.0.1, or on the Unix socket `socket`.
 */
async function authenticatingHarness(
  socket?: string,
): Promise<{ server: HarnessServer; seen: unknown[] }> {
  const seen: unknown[] = [];
  const harness = new Harness({
    authenticate: ({ token }) => {
      seen.push(token);
      if (token !== TOKEN) throw new ConnectRefusedError();
      return { scope: "environment", environmentId: "env_1", credentialId: "cred_1" };
    },
  });
  const server = socket
    ? await harness.serveUnix(socket)
    : await harness.serve({ hostname: "127.0.0.1", port: 0 });
  harnesses.push({ harness, server });
  return { server, seen };
}

function client(options: Omit<ExecutorClientOptions, "executor">): {
  client: ExecutorClient;
  logger: CapturingLogger;
} {
  const logger = new CapturingLogger();
  const made = new ExecutorClient({
    executor: EXECUTOR_INFO,
    logger,
    reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
    ...options,
  });
  clients.push(made);
  return { client: made, logger };
}

describe("ExecutorClient: a static token", { timeout: 30_000 }, () => {
  it("is presented to the harness's authenticate on every connection, and never logged", async () => {
    // On a Unix socket, so that a second harness can take the first one's place at once.
    const dir = mkdtempSync(join(tmpdir(), "bma-token-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const socket = join(dir, "harness.sock");
    const first = await authenticatingHarness(socket);
    // The client logs everything (debug included) to this logger: a leak would show.
    const { client: executor, logger } = client({
      harnessUrl: first.server.url,
      token: TOKEN,
      environmentId: "env_1",
    });
    const registration = await executor.start();
    assert.equal(registration.protocol, "bma.executor.v1.1");
    assert.deepEqual(first.seen, [TOKEN]);
    // The harness goes away (1001): the client reconnects, presenting the token again.
    const reconnected = new Promise<void>((resolve) => {
      const watch = executor.onStateChange((state) => {
        if (state !== "connected") return;
        watch.dispose();
        resolve();
      });
    });
    const { harness, server } = harnesses.shift()!;
    await harness.close();
    await server.close();
    const second = await authenticatingHarness(socket);
    const executorHandle = await harnesses[0].harness.waitExecutor();
    assert.equal(executorHandle.environmentId, "env_1");
    await reconnected;
    assert.deepEqual(second.seen, [TOKEN]);
    assert.ok(!logger.text().includes(TOKEN), logger.text());
  });

  it("a token the harness refuses stops start() with ConnectionRefusedError, the token in no message", async () => {
    const { server } = await authenticatingHarness();
    const wrong = "wrong-SECRET-token-aa11bb22";
    const { client: executor, logger } = client({
      harnessUrl: server.url,
      token: wrong,
      environmentId: "env_1",
    });
    const error = await executor.start().then(
      () => assert.fail("start() resolved"),
      (error: unknown) => error,
    );
    assert.ok(error instanceof ConnectionRefusedError, String(error));
    assert.equal(error.status, 401);
    assert.ok(!String(error.message).includes(wrong));
    assert.ok(!logger.text().includes(wrong), logger.text());
  });

  it("refuses options that cannot work, at construction", () => {
    const base = { executor: EXECUTOR_INFO };
    const refused = (options: Partial<ExecutorClientOptions>, pattern: RegExp) =>
      assert.throws(
        () => new ExecutorClient({ ...base, ...options }),
        (error: unknown) =>
          error instanceof ExecutorConfigError && pattern.test(error.message) &&
          !error.message.includes(TOKEN),
      );
    refused({ token: TOKEN }, /token needs harnessUrl/);
    refused({ token: "", harnessUrl: "ws://127.0.0.1:1" }, /non-empty string/);
    refused({ token: `${TOKEN}\r\nx: y`, harnessUrl: "ws://127.0.0.1:1" }, /control characters/);
    refused(
      { token: TOKEN, harnessUrl: "ws://127.0.0.1:1", environmentKey: "ek", baseUrl: "http://x" },
      /a credential of its own/,
    );
    refused(
      {
        token: TOKEN,
        harnessUrl: "ws://127.0.0.1:1",
        tokenSource: () => Promise.resolve({ token: TOKEN, expiresAt: 0, url: "ws://x" }),
      },
      /a credential of its own/,
    );
    // A secret no Authorization header can carry: before, every exchange failed before it left,
    // retried for good as "the token endpoint is unreachable".
    const exchanged = { baseUrl: "http://127.0.0.1:1" };
    for (const bad of [`${TOKEN}\x01tail`, `${TOKEN}€`, `${TOKEN}\n`, `${TOKEN} x`]) {
      refused({ ...exchanged, environmentKey: bad, environmentId: "env_1" }, /control characters/);
      refused({ ...exchanged, machineToken: bad, machineId: "m_1" }, /control characters/);
    }
    refused({ ...exchanged, environmentKey: "", environmentId: "env_1" }, /non-empty string/);
    // Spans and sizes that cannot work: before, each was taken (-1 and NaN timers fire at once
    // or never, 2^31 ms fires at once on Node).
    const local = { harnessUrl: "ws://127.0.0.1:1" };
    for (const bad of [-1, Number.NaN, 2 ** 31, "5" as unknown as number]) {
      refused({ ...local, requestTimeoutMs: bad }, /requestTimeoutMs must be a number of ms/);
      refused({ ...local, sessionGraceMs: bad }, /sessionGraceMs must be a number of ms/);
      refused({ ...local, reconnect: { initialDelayMs: bad } }, /reconnect: initialDelayMs/);
      refused({ ...local, retry: { maxDelayMs: bad } }, /retry: maxDelayMs/);
    }
    refused({ ...local, reconnect: { multiplier: 0.5 } }, /multiplier/);
    refused({ ...local, reconnect: { jitter: 2 } }, /jitter/);
    refused({ ...local, maxFrameBytes: 0 }, /maxFrameBytes/);
    refused({ ...local, maxFrameBytes: Number.NaN }, /maxFrameBytes/);
    refused({ ...local, inlineResultBytes: -1 }, /inlineResultBytes/);
    // What stays accepted: 0 (no wait, or for a request, forever) and the defaults' shapes.
    new ExecutorClient({
      ...base,
      ...local,
      requestTimeoutMs: 0,
      sessionGraceMs: 0,
      reconnect: { initialDelayMs: 0, maxDelayMs: 0, multiplier: 1, jitter: 0 },
      maxFrameBytes: 1024,
    });
  });
});

describe("ExecutorClient: a token source returning the wrong shape", { timeout: 30_000 }, () => {
  const SHAPES: [string, unknown, RegExp][] = [
    ["the token itself, a bare string", TOKEN, /returned a string instead of an object/],
    ["nothing", undefined, /returned undefined/],
    ["null", null, /returned null/],
    ["no token", { url: "ws://127.0.0.1:1", expiresAt: Date.now() }, /returned no token/],
    ["a token of another type", { token: 42, url: "ws://127.0.0.1:1" }, /token of type number/],
    ["an empty token", { token: "", url: "ws://127.0.0.1:1" }, /an empty token/],
    ["a token with a line break", { token: `${TOKEN}\n`, url: "ws://x" }, /control characters/],
    ["no url", { token: TOKEN, expiresAt: Date.now() + 60_000 }, /returned no url/],
    ["a url of another type", { token: TOKEN, url: { href: "ws://x" } }, /url of type object/],
    [
      "an expiresAt that is no time",
      { token: TOKEN, url: "ws://127.0.0.1:1", expiresAt: "tomorrow-ish" },
      /expiresAt that is no time/,
    ],
    [
      "an expiresAt of another type",
      { token: TOKEN, url: "ws://127.0.0.1:1", expiresAt: true },
      /expiresAt of type boolean/,
    ],
  ];

  for (const [what, returned, pattern] of SHAPES) {
    it(`is refused at once: ${what}`, async () => {
      let calls = 0;
      let secondCall!: () => void;
      const calledAgain = new Promise<string>((resolve) => (secondCall = () => resolve("retried")));
      const { client: executor, logger } = client({
        environmentId: "env_1",
        tokenSource: () => {
          if (++calls === 2) secondCall();
          return Promise.resolve(returned as never);
        },
      });
      // Without a bound of time: a client that asks the source again is seen doing so.
      const outcome = await Promise.race([
        executor.start().then((value) => ({ resolved: value }), (error: unknown) => error),
        calledAgain,
      ]);
      assert.ok(
        outcome instanceof InvalidTokenSourceResultError,
        `start() must reject with InvalidTokenSourceResultError, got ${String(outcome)}`,
      );
      assert.ok(outcome instanceof ExecutorConfigError, "a configuration error");
      assert.match(outcome.message, pattern);
      assert.ok(!outcome.message.includes(TOKEN), "the value is never in the message");
      assert.ok(!logger.text().includes(TOKEN), logger.text());
      const closed = await executor.closed;
      assert.equal(closed.reason, "config");
      assert.equal(closed.error, outcome);
      assert.equal(calls, 1, "the source was asked once");
    });
  }

  it("a well-formed result without expiresAt, or without url beside harnessUrl, is used", async () => {
    const { server, seen } = await authenticatingHarness();
    const { client: withoutExpiry } = client({
      environmentId: "env_1",
      tokenSource: () => Promise.resolve({ token: TOKEN, url: server.url } as never),
    });
    await withoutExpiry.start();
    const { client: withoutUrl } = client({
      environmentId: "env_1",
      harnessUrl: server.url,
      tokenSource: () =>
        Promise.resolve({ token: TOKEN, expiresAt: Date.now() + 600_000 } as never),
    });
    await withoutUrl.start();
    assert.deepEqual(seen, [TOKEN, TOKEN]);
  });
});

describe("ExecutorClient: a credential sent in the clear", () => {
  it("warns when its key is exchanged over plain http with another machine, and only then", () => {
    const warned = (baseUrl: string) => {
      const logger = new CapturingLogger();
      new ExecutorClient({
        baseUrl,
        environmentId: "env_1",
        environmentKey: "ek_live_plain_http_0123",
        executor: EXECUTOR_INFO,
        logger,
      });
      const lines = logger.records.filter((r) => r.level === "warn");
      assert.ok(!logger.text().includes("ek_live_plain_http_0123"), "the key is not logged");
      return lines.map((r) => `${r.message} ${JSON.stringify(r.fields)}`);
    };
    const [line, ...more] = warned("http://harness.example:7700/?token=t");
    assert.match(line ?? "", /environment credential is exchanged over plain http/);
    assert.match(line ?? "", /"url":"http:\/\/harness\.example:7700"/, "shown without its query");
    assert.deepEqual(more, []);
    for (const quiet of ["https://harness.example", "http://127.0.0.1:7700", "http://localhost"]) {
      assert.deepEqual(warned(quiet), [], quiet);
    }
  });
});
