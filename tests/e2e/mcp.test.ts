/**
 * The MCP channel end to end, harness and executor both from this SDK: the MCP TypeScript SDK
 * `Client` on the harness side talks through `session.mcp("echo")` to a real MCP server (built
 * with the SDK) that the executor's own MCP relay (`serveMachine` with `mcpServers`) runs for the
 * session as a child process over stdio. Real WebSocket on 127.0.0.1, real token endpoint.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client";
import { serveMachine } from "../../executor/machine/serve.node.ts";
import { NotFoundError } from "../../harness/node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { ECHO_SERVER, runScript } from "../helpers/mcp-stdio-servers.ts";

describe("MCP channel: Harness and ExecutorClient", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  async function executorWithEcho() {
    const workdir = mkdtempSync(join(tmpdir(), "bma-mcp-"));
    fx.defer(() => rmSync(workdir, { recursive: true, force: true }));
    const { harness, server } = await fx.harness();
    // The relay serves mcp.*; the server names are advertised with the client's capabilities.
    const { client } = fx.client(server, { capabilities: { mcp: { servers: ["echo"] } } });
    const { command, args } = runScript(ECHO_SERVER);
    const served = serveMachine(client, { workdir, mcpServers: { echo: { command, args } } });
    fx.defer(() => served.dispose());
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_mcp" });
    return { harness, executor, session };
  }

  it("lists the server's tools and calls them through session.mcp()", async () => {
    const { executor, session } = await executorWithEcho();
    assert.deepEqual(executor.capabilities.mcp, { servers: ["echo"] });
    const mcp = new Client({ name: "bma-harness-e2e", version: "0.1.0" });
    await mcp.connect(await session.mcp("echo"));
    const { tools } = await mcp.listTools();
    assert.deepEqual(tools.map((tool) => tool.name).sort(), ["add", "echo"]);
    const echoed = await mcp.callTool({ name: "echo", arguments: { text: "hello" } });
    assert.deepEqual(echoed.content, [{ type: "text", text: "echo: hello" }]);
    const sum = await mcp.callTool({ name: "add", arguments: { a: 20, b: 22 } });
    assert.deepEqual(sum.content, [{ type: "text", text: "42" }]);
    await mcp.close();
  });

  it("ends the channel when the session stops (the executor stops its MCP servers)", async () => {
    const { session } = await executorWithEcho();
    const channel = await session.mcp("echo");
    const mcp = new Client({ name: "bma-harness-e2e", version: "0.1.0" });
    await mcp.connect(channel);
    await session.stop("done");
    assert.equal(await channel.closed, "done");
  });

  it("answers an unknown server with -32002", async () => {
    const { session } = await executorWithEcho();
    await assert.rejects(session.mcp("nope"), NotFoundError);
  });
});
