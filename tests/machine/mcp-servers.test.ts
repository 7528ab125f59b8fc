/**
 * MCP servers run by the executor's relay, real child processes: they start in the session's
 * workdir; a server that writes an endless line has its channel closed instead of growing the
 * executor; many messages in one write and one message in many writes are framed exactly; the
 * contract's error reasons; a server that exits closes its channel; session.stop ends servers
 * before session.ended.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  type McpChannel,
  type McpMessage,
  NotFoundError,
  ProtocolError,
  UnavailableError,
} from "../../harness/node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { runScript } from "../helpers/mcp-stdio-servers.ts";
import { alive, startMachine, until } from "./machine-fixture.ts";

const SERVER = runScript(new URL("./mcp-test-server.mjs", import.meta.url).pathname);
const reasonOf = (error: unknown) =>
  error instanceof ProtocolError ? (error.data as { reason?: string })?.reason : undefined;

/** A channel whose messages are collected. */
async function open(session: { mcp(name: string): Promise<McpChannel> }, name: string) {
  const channel = await session.mcp(name);
  const messages: McpMessage[] = [];
  channel.onmessage = (message) => void messages.push(message);
  await channel.start();
  let next = 1;
  const ask = async (method: string, params?: unknown): Promise<McpMessage> => {
    const id = next++;
    await channel.send({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    await until(() => messages.some((m) => m.id === id) || channel.isClosed);
    return messages.find((m) => m.id === id)!;
  };
  return { channel, messages, ask };
}

describe("MCP servers of a session", { timeout: 90_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  const machine = (extra: Record<string, unknown> = {}) =>
    startMachine(fx, {
      machine: {
        mcpServers: {
          test: SERVER,
          nested: { ...SERVER, cwd: "nested" },
          broken: { command: "/no/such/mcp-server" },
        },
        ...extra,
      },
      client: { capabilities: { mcp: { servers: ["test", "nested", "broken"] } } },
    });

  it("start in the session's workdir (a configured relative cwd inside it)", async () => {
    const { dir, session } = await machine();
    const { ask, channel } = await open(session, "test");
    const dumped = (await ask("dump")).result as { cwd: string };
    assert.equal(dumped.cwd, dir);
    await channel.close();
    mkdirSync(join(dir, "nested"));
    const nested = await open(session, "nested");
    assert.equal(((await nested.ask("dump")).result as { cwd: string }).cwd, join(dir, "nested"));
  });

  it("a server writing 32 MiB without a newline has its channel closed (message_too_large)", async () => {
    const { session, logger } = await machine();
    const { ask, channel } = await open(session, "test");
    const { pid } = (await ask("dump")).result as { pid: number };
    const before = process.memoryUsage().rss;
    await channel.send({ jsonrpc: "2.0", id: 99, method: "flood", params: { bytes: 32 << 20 } });
    assert.equal(await channel.closed, "message_too_large");
    await until(() => !alive(pid));
    const grown = process.memoryUsage().rss - before;
    assert.ok(grown < 160 * 1024 * 1024, `the executor grew by ${grown >> 20} MiB`);
    assert.ok(logger.records.some((r) => /over the limit/.test(r.message)), "the reason is logged");
  });

  it("the line bound is an option; what fits is relayed", async () => {
    const { session } = await machine({ mcpMaxLineBytes: 64 * 1024 });
    const small = await open(session, "test");
    assert.ok((await small.ask("dump")).result, "a message under the bound is relayed");
    await small.channel.send({
      jsonrpc: "2.0",
      id: 7,
      method: "flood",
      params: { bytes: 65 * 1024 },
    });
    assert.equal(await small.channel.closed, "message_too_large");
  });

  it("frames many messages in one write and one message across writes, in order", async () => {
    const { session } = await machine();
    const { channel, messages } = await open(session, "test");
    const count = 5_000;
    await channel.send({ jsonrpc: "2.0", id: 1, method: "many", params: { count } });
    await until(() => messages.length === count);
    assert.deepEqual(
      messages.map((m) => (m.result as { index: number }).index),
      Array.from({ length: count }, (_, i) => i),
    );
  });

  it("errors are the contract's: unknown_server (-32002), mcp_unavailable (-32004)", async () => {
    const { session } = await machine();
    const unknown = await session.mcp("nope").catch((e) => e);
    assert.ok(unknown instanceof NotFoundError);
    assert.equal(reasonOf(unknown), "unknown_server");
    const broken = await session.mcp("broken").catch((e) => e);
    assert.ok(broken instanceof UnavailableError);
    assert.equal(reasonOf(broken), "mcp_unavailable");
    await until(() => session.reportedStatus?.detail === "mcp_unavailable");
  });

  it("a server that exits closes its channel (server_exited)", async () => {
    const { session } = await machine();
    const { channel } = await open(session, "test");
    await channel.send({ jsonrpc: "2.0", id: 1, method: "exit" });
    assert.equal(await channel.closed, "server_exited");
  });

  it("session.stop ends every server of the session before session.ended", async () => {
    const { session } = await machine();
    const first = await open(session, "test");
    const second = await open(session, "test");
    const pids = await Promise.all(
      [first, second].map(async ({ ask }) => ((await ask("dump")).result as { pid: number }).pid),
    );
    assert.ok(pids.every(alive));
    await session.stop("done", { graceMs: 200 });
    assert.deepEqual(pids.map(alive), [false, false]);
  });
});
