/**
 * `start()` against a URL that answers as no harness does: an answer that retrying cannot change
 * (HTTP 404, a 200 without an upgrade, a redirect, another 4xx) rejects it at once with
 * `NotAHarnessError`, and nothing is tried again; an answer that may change (5xx, 408, 429, a
 * refused connection) is retried, and a `start({ signal })` aborted meanwhile carries the last
 * attempt's failure as its cause. Real HTTP servers (`node:http`) and the project's own
 * `Harness` on 127.0.0.1, dialed with this runtime's own dialer and with `ws`. The same holds for
 * a `baseUrl` whose token endpoint answers as none does (a mistyped `BMA_BASE_URL`): 404 on every
 * token path, or a web page.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  ClientStoppedError,
  ExecutorClient,
  type ExecutorClientOptions,
  NotAHarnessError,
  TokenExchangeError,
} from "../../executor/mod.ts";
import { Harness } from "../../harness/node.ts";
import { RequestAbortedError } from "../../protocol/errors.ts";
import { type Dialer, DialError } from "../../transport/transport.ts";
import { dialWebSocket, OWN_AND_WS } from "../helpers/dialers.ts";
import { EXECUTOR_INFO, SECRETS, until } from "../helpers/executor-fixture.ts";
import { CapturingLogger } from "../helpers/raw.ts";
import { refusedPort } from "../helpers/ports.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";

/** A plain HTTP server answering every request with `status`, counting the requests. */
interface Answering {
  readonly url: string;
  /** The server's HTTP origin, as a `baseUrl`. */
  readonly base: string;
  /** The paths requested so far, in order. */
  readonly paths: string[];
  /** Requests received so far. */
  readonly requests: () => number;
  /** Resolves when the `n`th request has arrived. */
  readonly request: (n: number) => Promise<void>;
}

const servers: Server[] = [];
const clients: ExecutorClient[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.stop();
  for (const cleanup of cleanups.splice(0)) await cleanup();
  for (const server of servers.splice(0)) {
    server.closeAllConnections?.();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function answering(status: number): Promise<Answering> {
  let count = 0;
  const paths: string[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const server = createServer((req, res) => {
    count++;
    paths.push(req.url ?? "");
    for (const waiter of waiters.filter((w) => w.n <= count)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    res.statusCode = status;
    if (status >= 300 && status < 400) res.setHeader("location", "http://127.0.0.1:1/elsewhere");
    res.setHeader("connection", "close");
    res.end(status === 200 ? "<html>a web page</html>" : "");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  const port = (server.address() as AddressInfo).port;
  return {
    url: `ws://127.0.0.1:${port}/v1/executors/connect`,
    base: `http://127.0.0.1:${port}`,
    paths,
    requests: () => count,
    request: (n) =>
      count >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })),
  };
}

/** What `start({ signal })` rejects with when aborted once `server` had `requests` requests. */
async function abortedAfter(
  executor: ExecutorClient,
  server: Answering,
  requests: number,
): Promise<unknown> {
  const abort = new AbortController();
  const started = executor.start({ signal: abort.signal });
  await server.request(requests);
  abort.abort();
  return await started.then(() => assert.fail("start() resolved"), (error: unknown) => error);
}

/** A capturing logger that also tells when the client first says it is retrying. */
class RetryWatchingLogger extends CapturingLogger {
  #retried!: () => void;
  /** Resolves at the first "retrying" line. */
  readonly retried = new Promise<void>((resolve) => (this.#retried = resolve));
  override warn(message: string, fields?: Record<string, unknown>): void {
    super.warn(message, fields);
    if (/retrying/.test(message)) this.#retried();
  }
}

function client(
  harnessUrl: string,
  dial: Dialer,
  options: Partial<ExecutorClientOptions> = {},
): { client: ExecutorClient; logger: RetryWatchingLogger } {
  const logger = new RetryWatchingLogger();
  const made = new ExecutorClient({
    harnessUrl,
    dial,
    executor: EXECUTOR_INFO,
    logger,
    reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
    ...options,
  });
  clients.push(made);
  return { client: made, logger };
}

/**
 * How `start()` ends, unless a second attempt comes first: without a bound of time, a client
 * that retries what it should not is seen retrying, and the test fails instead of hanging.
 */
async function startOrRetry(
  started: Promise<unknown>,
  secondAttempt: Promise<void>,
): Promise<unknown> {
  return await Promise.race([
    started.then(
      (value) => ({ resolved: value }),
      (error: unknown) => error,
    ),
    secondAttempt.then(() => "retried"),
  ]);
}

for (const [dialerName, dial] of OWN_AND_WS) {
  describe(`ExecutorClient.start() over ${dialerName}: an answer no harness gives`, {
    timeout: 30_000,
  }, () => {
    for (const status of [404, 200, 400, 405, 410, 426, 301]) {
      it(`rejects at once with NotAHarnessError for HTTP ${status}, trying nothing again`, async () => {
        const server = await answering(status);
        const { client: executor, logger } = client(server.url, dial);
        const outcome = await startOrRetry(executor.start(), server.request(2));
        assert.ok(
          outcome instanceof NotAHarnessError,
          `start() must reject with NotAHarnessError, got ${String(outcome)}`,
        );
        assert.equal(outcome.status, status);
        assert.equal(outcome.url, server.url);
        assert.equal(
          outcome.message,
          `${server.url} answered HTTP ${status}: it is not a harness`,
        );
        assert.ok(outcome.cause instanceof DialError, "the refused dial is its cause");
        const closed = await executor.closed;
        assert.equal(closed.reason, "not_a_harness");
        assert.equal(closed.error, outcome);
        assert.equal(executor.state, "stopped");
        assert.equal(server.requests(), 1, "nothing was tried again");
        // The default logger is silent; a logger of one's own is told why, once, as an error.
        const errors = logger.records.filter((r) => r.level === "error");
        assert.equal(errors.length, 1, logger.text());
        assert.doesNotMatch(logger.text(), /retrying/);
        // A later start() says it has stopped.
        await assert.rejects(executor.start(), ClientStoppedError);
      });
    }

    it("rejects a harness's own 404 (a path it does not serve) at once", async () => {
      const harness = new Harness({ insecureNoAuth: true });
      const served = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      cleanups.push(async () => {
        await harness.close();
        await served.close();
      });
      const url = `${served.url.replace(/\/v1\/executors\/connect$|\/$/, "")}/not-the-connect-path`;
      const { client: executor, logger } = client(url, dial);
      const outcome = await startOrRetry(executor.start(), logger.retried);
      assert.ok(outcome instanceof NotAHarnessError, `got ${String(outcome)}`);
      assert.equal(outcome.status, 404);
      assert.equal(harness.executors.length, 0);
    });

    for (const status of [503, 500, 502, 429, 408]) {
      it(`retries HTTP ${status}; start({ signal }) aborted meanwhile carries that answer as its cause`, async () => {
        const server = await answering(status);
        const { client: executor } = client(server.url, dial);
        const error = await abortedAfter(executor, server, 3);
        assert.ok(error instanceof RequestAbortedError, String(error));
        assert.ok(
          error.cause instanceof DialError,
          `the cause is the last attempt's failure, not the signal's reason: ${
            String(error.cause)
          }`,
        );
        assert.equal(error.cause.status, status);
        // Aborting stopped the wait, not the client: it goes on trying until stopped.
        assert.notEqual(executor.state, "stopped");
        await server.request(server.requests() + 1);
      });
    }

    it("retries a refused connection; the aborted start carries the refusal as its cause", async () => {
      const port = await refusedPort();
      const { client: executor, logger } = client(`ws://127.0.0.1:${port}`, dial);
      const abort = new AbortController();
      const started = executor.start({ signal: abort.signal });
      const retries = () =>
        logger.records.filter((r) => r.message === "connection attempt failed: retrying").length;
      await until(() => retries() >= 2, "two failed attempts");
      abort.abort(new Error("the caller gave up"));
      const error = await started.then(
        () => assert.fail("start() resolved"),
        (error: unknown) => error,
      );
      assert.ok(error instanceof RequestAbortedError, String(error));
      assert.ok(error.cause instanceof DialError, String(error.cause));
      assert.equal(error.cause.status, undefined);
      assert.notEqual(executor.state, "stopped");
    });

    it("an abort before any attempt failed carries the signal's reason", async () => {
      const server = await answering(503);
      const { client: executor } = client(server.url, dial);
      const reason = new Error("no time");
      const abort = new AbortController();
      abort.abort(reason);
      await assert.rejects(
        executor.start({ signal: abort.signal }),
        (error: unknown) => error instanceof RequestAbortedError && error.cause === reason,
      );
      assert.equal(server.requests(), 0, "an aborted signal starts nothing");
    });
  });
}

/** The credentials of a client that exchanges them at a token endpoint, by scope. */
const EXCHANGED = {
  environment: {
    environmentId: SECRETS.environmentId,
    environmentKey: SECRETS.environmentKey,
  },
  machine: { machineId: SECRETS.machineId, machineToken: SECRETS.machineToken },
} as const;

/** A client exchanging `scope`'s credential at `baseUrl` (no `harnessUrl`). */
function exchanging(
  baseUrl: string,
  scope: keyof typeof EXCHANGED,
): { client: ExecutorClient; logger: RetryWatchingLogger } {
  const logger = new RetryWatchingLogger();
  const made = new ExecutorClient({
    baseUrl,
    ...EXCHANGED[scope],
    dial: dialWebSocket,
    executor: EXECUTOR_INFO,
    logger,
    reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
  });
  clients.push(made);
  return { client: made, logger };
}

describe("ExecutorClient.start() with baseUrl: a token endpoint no harness has", {
  timeout: 30_000,
}, () => {
  const cases = [
    // A mistyped BMA_BASE_URL: a web server answering 404 to the path and to its legacy alias.
    {
      scope: "environment",
      status: 404,
      paths: [`/v1/environments/${SECRETS.environmentId}/token`, "/v1/executors/token"],
    },
    // A web page (a site answering every path with its index): no token endpoint's JSON.
    {
      scope: "environment",
      status: 200,
      paths: [`/v1/environments/${SECRETS.environmentId}/token`],
    },
    { scope: "machine", status: 404, paths: [`/v1/machines/${SECRETS.machineId}/token`] },
    { scope: "machine", status: 200, paths: [`/v1/machines/${SECRETS.machineId}/token`] },
  ] as const;
  for (const { scope, status, paths } of cases) {
    it(`rejects at once with NotAHarnessError for HTTP ${status} (${scope} credential), trying nothing again`, async () => {
      const server = await answering(status);
      const { client: executor, logger } = exchanging(server.base, scope);
      const outcome = await startOrRetry(executor.start(), server.request(paths.length + 1));
      assert.ok(
        outcome instanceof NotAHarnessError,
        `start() must reject with NotAHarnessError, got ${String(outcome)}; log: ${logger.text()}`,
      );
      const url = `${server.base}${paths[paths.length - 1]}`;
      assert.equal(outcome.status, status);
      assert.equal(outcome.url, url);
      assert.equal(outcome.message, `${url} answered HTTP ${status}: it is not a harness`);
      assert.ok(outcome.cause instanceof TokenExchangeError, "the failed exchange is its cause");
      const closed = await executor.closed;
      assert.equal(closed.reason, "not_a_harness");
      assert.equal(closed.error, outcome);
      assert.equal(executor.state, "stopped");
      assert.deepEqual(server.paths, paths, "nothing was tried again");
      assert.equal(logger.records.filter((r) => r.level === "error").length, 1, logger.text());
      assert.doesNotMatch(logger.text(), /retrying/);
      const secret = scope === "environment" ? SECRETS.environmentKey : SECRETS.machineToken;
      assert.ok(!logger.text().includes(secret), "the credential is never logged");
      await assert.rejects(executor.start(), ClientStoppedError);
    });
  }

  for (const status of [503, 429, 408]) {
    it(`retries HTTP ${status} from the token endpoint`, async () => {
      const server = await answering(status);
      const { client: executor, logger } = exchanging(server.base, "environment");
      const error = await abortedAfter(executor, server, 3);
      assert.ok(error instanceof RequestAbortedError, String(error));
      assert.ok(error.cause instanceof TokenExchangeError, String(error.cause));
      assert.equal(error.cause.status, status);
      assert.match(logger.text(), /retrying/);
      assert.notEqual(executor.state, "stopped");
      // Only a 404 sends the exchange to the legacy alias.
      assert.ok(server.paths.every((p) => p === `/v1/environments/${SECRETS.environmentId}/token`));
    });
  }
});

describe(
  "an answer as no harness gives, once the client has registered",
  { timeout: 30_000 },
  () => {
    it("is retried, not final: an ingress that answers 404 for a while during a deploy", async () => {
      const harness = new Harness({ insecureNoAuth: true, heartbeatIntervalMs: 60_000 });
      const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      const proxy = await ChaosProxy.start(server.url);
      let dials = 0;
      let notFound = 0;
      // After the first connection, two upgrades are answered 404 (the route not there yet).
      const dial: Dialer = (url, options) => {
        dials++;
        if (dials >= 2 && notFound < 2) {
          notFound++;
          return Promise.reject(new DialError("upgrade answered HTTP 404", 404));
        }
        return dialWebSocket(url, options);
      };
      const logger = new CapturingLogger();
      const client = new ExecutorClient({
        harnessUrl: proxy.url,
        executor: EXECUTOR_INFO,
        dial,
        logger,
        reconnect: { initialDelayMs: 5, maxDelayMs: 20, jitter: 0 },
      });
      let closed: unknown;
      void client.closed.then((info) => (closed = info));
      try {
        await client.start();
        const first = await harness.waitExecutor();
        proxy.cut();
        await until(() => dials >= 4 && first.connected);
        assert.equal(notFound, 2);
        assert.equal(closed, undefined, `the client stopped: ${JSON.stringify(closed)}`);
        assert.ok(
          logger.records.some((r) => r.message === "connection attempt failed: retrying"),
          "said it retries",
        );
        assert.ok(!logger.records.some((r) => r.message === "connection refused for good"));
      } finally {
        await client.stop();
        await proxy.close();
        await harness.close();
        await server.close();
      }
    });
  },
);
