/**
 * Event streams (the inspector's live updates, the brain API's server-sent events) against
 * clients that stop reading, over real sockets: a process of this runtime
 * (`slow-stream-server.ts`) serves both with `serveInspector` and a short `slowClientTimeoutMs`,
 * and raw TCP clients on 127.0.0.1 send an authenticated request, read the headers, then read
 * nothing (`socket.pause()`) while the session floods both streams. The server resets those
 * connections and its memory stays bounded; each such client, once it reads again, finds its
 * connection closed. Clients that read — through the flood, then idle for longer than the
 * timeout — stay connected and get every event. A brain API stream past `maxStreamMs` ends with
 * `event: end`, and its connection closes. In this process: the inspector's stream of a page that
 * reads nothing errors with `StreamBacklogError` once it holds `maxStreamQueueBytes`.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { connect, type Socket } from "node:net";
import { readFileSync } from "node:fs";
import {
  ExecutorClient,
  Harness,
  inspector,
  type LogFields,
  randomInspectorToken,
  StreamBacklogError,
} from "../../node.ts";
import { Lines } from "../cli/cli-helpers.ts";
import { until } from "../helpers/executor-fixture.ts";
import { spawnTs } from "../helpers/runtime-command.ts";

const MiB = 1024 * 1024;
const INSPECTOR_TOKEN = "inspector-token-0123456789abcdef";
const BRAIN_TOKEN = "brain-token-0123456789abcdef";
/**
 * The server's `slowClientTimeoutMs`: short, yet long enough that a client that reads, on a
 * machine busy with other tests, never waits that long for its share of the CPU.
 */
const TIMEOUT_MS = 5_000;
/** Clients of each stream that stop reading. */
const STALLED = 16;
/** What the flood sends: more than the kernel buffers of a connection hold (a few MiB). */
const FLOOD_EVENTS = 2_000;
const FLOOD_CHARS = 15_000;
/** How much of what a reading client got is searched for a marker. */
const TAIL_CHARS = 64 * 1024;

/** The resident memory of `pid`, in bytes (Linux: undefined elsewhere). */
function rss(pid: number): number | undefined {
  if (process.platform !== "linux") return undefined;
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "latin1"));
  return Number(match![1]) * 1024;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A raw HTTP/1.1 request for an event stream, its headers read. */
interface RawStream {
  readonly socket: Socket;
  /** Resolves once the server has closed the connection. */
  readonly closed: Promise<void>;
  /** Whether it has. */
  isClosed(): boolean;
  /** The error it closed with, if any. */
  error(): string | undefined;
  /** Resolves once what was read contains `text` (a client that reads); rejects on close. */
  seen(text: string): Promise<void>;
}

/**
 * Opens `path` on `port` with the credential, reads the response's headers (200 expected), then
 * reads on only if `reading`: else the socket is paused, so the server's writes pile up in the
 * kernel and then in the server.
 */
function openStream(port: number, path: string, token: string, reading: boolean) {
  return new Promise<RawStream>((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    let head = "";
    let tail = "";
    let isClosed = false;
    let error: string | undefined;
    const waiters = new Set<{ text: string; resolve: () => void; reject: (e: Error) => void }>();
    const closed = new Promise<void>((done) =>
      socket.once("close", () => {
        isClosed = true;
        for (const waiter of waiters) waiter.reject(new Error(`closed before ${waiter.text}`));
        reject(new Error(`closed before the headers: ${JSON.stringify(head)}`));
        done();
      })
    );
    // The reset of a stalled client is an ECONNRESET here.
    socket.on("error", (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    const stream: RawStream = {
      socket,
      closed,
      isClosed: () => isClosed,
      error: () => error,
      seen: (text) =>
        tail.includes(text) ? Promise.resolve() : new Promise((resolve, reject) => {
          if (isClosed) return reject(new Error(`closed before ${text}`));
          waiters.add({ text, resolve, reject });
        }),
    };
    const body = (chunk: string) => {
      const text = tail + chunk;
      for (const waiter of waiters) {
        if (!text.includes(waiter.text)) continue;
        waiters.delete(waiter);
        waiter.resolve();
      }
      tail = text.slice(-TAIL_CHARS);
    };
    socket.on("data", (chunk: Buffer) => {
      if (head.endsWith("\r\n\r\n")) return body(chunk.toString("latin1"));
      head += chunk.toString("latin1");
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      const rest = head.slice(end + 4);
      head = head.slice(0, end + 4);
      if (!/^HTTP\/1\.1 200 /.test(head)) {
        socket.destroy();
        return reject(new Error(`not a stream: ${head}`));
      }
      if (!reading) socket.pause();
      body(rest);
      resolve(stream);
    });
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\n` +
        `Accept: text/event-stream\r\n\r\n`,
    );
  });
}

describe("event streams against clients that stop reading", { timeout: 120_000 }, () => {
  let child: ChildProcess;
  let out: Lines;
  let inspectorPort: number;
  let brainPort: number;
  let briefPort: number;
  let stderr = "";
  const opened: RawStream[] = [];
  /** A brain API stream of the short-lived server, opened from far ahead. */
  let brief: Promise<RawStream>;

  const port = async (name: string) =>
    Number(new URL((await out.match(new RegExp(`^${name} (\\S+)$`))).match[1]).port);

  /** Resolves once the server has printed `count` lines matching `pattern`. */
  const printed = async (pattern: RegExp, count: number) => {
    for (let n = 0, from = 0; n < count; n++) from = (await out.match(pattern, from)).index + 1;
  };

  /** Sends a command to the server; resolves once it answered `answer`. */
  const command = async (line: string, answer: string) => {
    const from = out.lines.length;
    child.stdin!.write(`${line}\n`);
    await out.match(new RegExp(`^${answer}$`), from);
  };

  const open = async (port: number, path: string, token: string, reading: boolean) => {
    const stream = await openStream(port, path, token, reading);
    opened.push(stream);
    return stream;
  };
  const inspectorStream = (reading: boolean) =>
    open(inspectorPort, "/api/stream", INSPECTOR_TOKEN, reading);
  const brainStream = (reading: boolean, port = brainPort, from = 0) =>
    open(port, `/sessions/ses_slow/events?from=${from}`, BRAIN_TOKEN, reading);

  before(async () => {
    child = spawnTs("tests/inspector/slow-stream-server.ts", [
      INSPECTOR_TOKEN,
      BRAIN_TOKEN,
      String(TIMEOUT_MS),
    ], { stdio: ["pipe", "pipe", "pipe"] });
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    out = new Lines(child.stdout!, "slow-stream-server");
    inspectorPort = await port("inspector");
    brainPort = await port("brain");
    briefPort = await port("brief");
    await out.match(/^ready$/);
    // Its lifetime runs beside the first test (the last one awaits its end).
    brief = brainStream(true, briefPort, 1e9);
    brief.catch(() => {}); // awaited by that test, which reports a failure to open it
  });

  after(async () => {
    for (const stream of opened) stream.socket.destroy();
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
  });

  it("resets clients that read nothing; keeps clients that read, busy or idle", async () => {
    // Two pages: each gets every update, though they share its encoding.
    const readers = [
      await inspectorStream(true),
      await inspectorStream(true),
      await brainStream(true),
    ];
    // A first flood grows the heap to what the flood itself takes (the readers' share, the log).
    await command(`flood ${FLOOD_EVENTS} ${FLOOD_CHARS} warm`, "flooded warm");
    for (const reader of readers) await reader.seen("warm");
    const stalled: RawStream[] = [];
    for (let n = 0; n < STALLED; n++) {
      stalled.push(await inspectorStream(false), await brainStream(false));
    }
    const before = rss(child.pid!);
    await command(`flood ${FLOOD_EVENTS} ${FLOOD_CHARS} after-flood`, "flooded after-flood");
    // The readers are idle from here on (no event is sent until the mark below).
    for (const reader of readers) await reader.seen("after-flood");
    const idleSince = performance.now();
    // Each stalled client is disconnected once a write to it waited past the timeout. A paused
    // socket notices nothing (it polls for nothing): the server's word says when it happened.
    await printed(/^log HTTP client disconnected/, stalled.length);
    const after = rss(child.pid!);
    if (before !== undefined && after !== undefined) {
      // A stream queueing without bound would hold the rest of the flood (30 MB): the brain
      // API's 16 would hold 480 MB, each its own copy. (The pages share each update's bytes.)
      const grown = after - before;
      assert.ok(grown < 64 * MiB, `grew ${(grown / MiB).toFixed(1)} MiB`);
    }
    // Once it reads again, each finds its connection closed, the rest of the flood discarded
    // (a reset: what the kernel still held for it is gone too).
    for (const stream of stalled) stream.socket.resume();
    await Promise.all(stalled.map((stream) => stream.closed));
    const flood = FLOOD_EVENTS * FLOOD_CHARS;
    for (const stream of stalled) {
      assert.ok(stream.socket.bytesRead < flood / 2, `read ${stream.socket.bytesRead} bytes`);
    }
    // Idle for two timeouts: no write of a client that reads waits, so none is timed out.
    await sleep(idleSince + 2 * TIMEOUT_MS - performance.now());
    await command("mark after-idle", "marked after-idle");
    for (const reader of readers) await reader.seen("after-idle");
    assert.deepEqual(readers.map((reader) => reader.isClosed()), [false, false, false]);
    // A new client is served as before.
    const next = await brainStream(true);
    await next.seen("after-idle");
  });

  it("ends a brain API stream at maxStreamMs and closes its connection", async () => {
    // From far ahead: nothing to send, so only the lifetime ends it.
    const reader = await brief;
    await reader.seen("event: end");
    await reader.seen('"ended":false');
    await reader.closed;
    assert.equal(reader.error(), undefined, "closed, not reset");
  });

  it("printed no warning (a listener per write, an unhandled error)", () => {
    assert.doesNotMatch(stderr, /MaxListenersExceededWarning|Unhandled|Error/);
  });
});

describe("the inspector's stream of a page that reads nothing", { timeout: 60_000 }, () => {
  it("errors with StreamBacklogError once it holds maxStreamQueueBytes", async () => {
    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "backlog", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    const dropped: LogFields[] = [];
    const logger = {
      debug() {},
      info: (message: string, fields: LogFields = {}) => {
        if (/stopped reading/.test(message)) dropped.push(fields);
      },
      warn() {},
      error() {},
    };
    const token = randomInspectorToken();
    const limit = 256 * 1024;
    const ui = inspector(harness, { token, logger, maxStreamQueueBytes: limit });
    try {
      await client.start();
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({
        session_id: "ses_backlog",
        metadata: { source: "harness" },
      });
      await session.ready();
      const response = await ui.fetch(
        new Request("http://127.0.0.1/api/stream", {
          headers: { authorization: `Bearer ${token}` },
        }),
      );
      assert.equal(response.status, 200);
      const reader = response.body!.getReader();
      // Nothing is read while four times the bound of events goes by.
      const text = "x".repeat(15_000);
      for (let n = 0; dropped.length === 0 && n < 1_000; n++) {
        await client.call("session.event", {
          session_id: "ses_backlog",
          event: { type: "flood", n, text },
        });
      }
      await until(() => dropped.length > 0, "the stream drops its page");
      assert.ok((dropped[0].queued_bytes as number) <= limit, JSON.stringify(dropped[0]));
      // What it held is gone: the next read fails at once.
      await assert.rejects(reader.read(), (error: unknown) => {
        assert.ok(error instanceof StreamBacklogError);
        assert.equal(error.limitBytes, limit);
        return true;
      });
    } finally {
      ui.close();
      await client.stop();
      await server.close();
      await harness.close();
    }
  });
});
