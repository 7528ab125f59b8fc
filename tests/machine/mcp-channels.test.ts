/**
 * The MCP channels' bounds and ends, over real parts (`serveMachine` relaying real MCP server
 * processes, a real `Harness` on 127.0.0.1): a message the line bound lets through but no frame
 * can carry closes its channel (`message_too_large`) instead of vanishing; channels are bounded
 * per session (-32009 `too_many_channels`); a channel's server ends with the connection it was
 * opened on (a cut through a TCP proxy), and when the open that started it was aborted or timed
 * out (its answer held in the proxy); a close naming another session closes nothing; a client
 * that never starts reading ends its channel (`not_started`, past a count or a size held) rather
 * than filling the harness.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient, Harness, serveMachine } from "../../node.ts";
import {
  type McpChannel,
  type McpMessage,
  ProtocolError,
  RequestAbortedError,
  RequestTimeoutError,
  ResourceExhaustedError,
} from "../../harness/node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { runScript } from "../helpers/mcp-stdio-servers.ts";
import { alive, startMachine, until } from "./machine-fixture.ts";

const SERVER = runScript(new URL("./mcp-test-server.mjs", import.meta.url).pathname);
/** A server that leaves its pid in `pids/` of its workdir, then echoes (no MCP of its own). */
const MARKED = { command: "sh", args: ["-c", "mkdir -p pids; echo $$ > pids/$$; exec cat"] };
const CAPABILITIES = { mcp: { servers: ["test", "marked"] } };
const reasonOf = (error: unknown) =>
  error instanceof ProtocolError ? (error.data as { reason?: string })?.reason : undefined;

/** A started channel whose messages are collected, and a request on it. */
async function open(session: { mcp(name: string): Promise<McpChannel> }, name = "test") {
  const channel = await session.mcp(name);
  const messages: McpMessage[] = [];
  channel.onmessage = (message) => void messages.push(message);
  await channel.start();
  const ask = async (id: number, method: string, params?: unknown) => {
    await channel.send({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    await until(() => messages.some((m) => m.id === id) || channel.isClosed);
    return messages.find((m) => m.id === id);
  };
  return { channel, ask };
}

/** The pids the marked servers of `dir` left (each once started). */
function markedPids(dir: string): number[] {
  try {
    return readdirSync(join(dir, "pids")).map(Number);
  } catch {
    return [];
  }
}

describe("MCP channels: bounds and ends", { timeout: 90_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  const machine = (
    machineOptions: Record<string, unknown> = {},
    client: Record<string, unknown> = {},
  ) =>
    startMachine(fx, {
      machine: { mcpServers: { test: SERVER, marked: MARKED }, ...machineOptions },
      client: { capabilities: CAPABILITIES, ...client },
    });

  it("a message under the line bound that no frame can carry closes its channel (message_too_large)", async () => {
    const { session, logger } = await machine({}, { maxFrameBytes: 256 * 1024 });
    const { channel, ask } = await open(session);
    assert.ok(await ask(1, "big", { bytes: 1024 }), "a message that fits is relayed");
    assert.equal(await ask(2, "big", { bytes: 300 * 1024 }), undefined);
    assert.equal(await channel.closed, "message_too_large");
    assert.ok(logger.records.some((r) => /over the frame limit/.test(r.message)), "logged");
  });

  it("channels are bounded per session: -32009 too_many_channels, and a closed one frees its place", async () => {
    const { session } = await machine({ limits: { mcpChannelsPerSession: 2 } });
    const first = await open(session);
    await open(session);
    const refused = await session.mcp("test").catch((error: unknown) => error);
    assert.ok(refused instanceof ResourceExhaustedError, String(refused));
    assert.equal(reasonOf(refused), "too_many_channels");
    await first.channel.close();
    const again = await open(session);
    assert.ok(await again.ask(1, "dump"));
  });

  it("a close naming another session closes nothing", async () => {
    const { executor, session } = await machine();
    const { channel, ask } = await open(session);
    const closed = await executor.request("mcp.close", {
      channel_id: channel.channelId,
      session_id: "ses_other",
    });
    assert.deepEqual(closed, { closed: false });
    assert.ok(await ask(1, "dump"), "the channel still serves");
  });

  it("an aborted open: the channel the executor opened meanwhile is closed, its place freed", async () => {
    // One channel per session: the aborted open's channel holds the place until it is closed.
    const { session } = await machine({ limits: { mcpChannelsPerSession: 1 } });
    const abort = new AbortController();
    const opening = session.mcp("test", { signal: abort.signal });
    abort.abort(new Error("the caller gave up"));
    await assert.rejects(opening, RequestAbortedError);
    // The executor got the open (sent before the abort) and opened a channel: once it is closed,
    // a new open is served (before, every one was refused for as long as the session lived).
    let opened: McpChannel | undefined;
    for (let attempt = 0; attempt < 500 && !opened; attempt++) {
      opened = await session.mcp("test").catch((error: unknown) => {
        assert.equal(reasonOf(error), "too_many_channels", String(error));
        return new Promise<undefined>((resolve) => setTimeout(resolve, 10));
      });
    }
    assert.ok(opened, "the aborted open's channel was never closed");
  });

  it("a client that never starts reading ends its channel (not_started), the server with it", async () => {
    const { session } = await machine();
    const channel = await session.mcp("test");
    await channel.send({ jsonrpc: "2.0", id: 1, method: "many", params: { count: 10_001 } });
    assert.equal(await channel.closed, "not_started");
  });

  it("a client that never starts reading ends its channel (not_started) past 16 MiB held, however few the messages", async () => {
    const { session } = await machine();
    const channel = await session.mcp("test");
    // 40 answers of 512 KiB: far fewer messages than the count bound, 20 MiB in all.
    for (let id = 1; id <= 40; id++) {
      await channel.send({ jsonrpc: "2.0", id, method: "big", params: { bytes: 512 * 1024 } });
    }
    assert.equal(await channel.closed, "not_started");
  });
});

/** A harness, an executor serving the marked server through a proxy, and one ready session. */
async function throughProxy(name: string) {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-mcp-proxy-")));
  mkdirSync(join(dir, "pids"));
  const harness = new Harness({ insecureNoAuth: true });
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  const proxy = await ChaosProxy.start(server.url);
  const client = new ExecutorClient({
    harnessUrl: proxy.url,
    executor: { name, os: "linux", arch: "x64", version: "0.0.1" },
    capabilities: CAPABILITIES,
    reconnect: { initialDelayMs: 5, maxDelayMs: 50 },
  });
  const served = serveMachine(client, {
    workdir: dir,
    graceMs: 300,
    mcpServers: { marked: MARKED },
  });
  const close = async () => {
    await served.dispose();
    await client.stop();
    await harness.close();
    await server.close();
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: `ses_${name}` });
    await session.ready();
    return { dir, harness, proxy, session, close };
  } catch (error) {
    await close();
    throw error;
  }
}

describe("MCP channels across a cut or slow connection", { timeout: 60_000 }, () => {
  it("a channel's server ends with the connection it was opened on", async () => {
    const { dir, harness, proxy, session, close } = await throughProxy("mcp_cut");
    try {
      const channel = await session.mcp("marked");
      await until(() => markedPids(dir).length === 1);
      const [pid] = markedPids(dir);
      assert.equal(proxy.cut(), 1);
      assert.equal(await channel.closed, "disconnected");
      // Nothing can reach it any more: the executor ends it, not the session's end.
      await until(() => !alive(pid));
      await harness.waitExecutor({ filter: (e) => e.connected });
      assert.equal(session.state === "ended", false, "the session lives on");
    } finally {
      await close();
    }
  });

  it("an open that timed out: the server its late answer names is closed", async () => {
    const { dir, proxy, session, close } = await throughProxy("mcp_late");
    try {
      // The executor's frames wait in the proxy: the open reaches it, its answer comes late.
      proxy.stall();
      await assert.rejects(session.mcp("marked", { timeoutMs: 200 }), RequestTimeoutError);
      await until(() => markedPids(dir).length === 1);
      const [pid] = markedPids(dir);
      proxy.resume();
      // Before, it ran until the session ended.
      await until(() => !alive(pid));
      assert.equal(session.state === "ended", false, "the session lives on");
    } finally {
      await close();
    }
  });
});
