/**
 * The MCP channel end to end: the MCP TypeScript SDK `Client` on the harness side talks through
 * `session.mcp("echo")` to a real MCP server (built with the SDK) that an `ExecutorClient` runs
 * for the session as a child process over stdio. Harness and executor from this SDK, over a
 * real WebSocket on 127.0.0.1 with the token endpoint.
 *
 * The executor end has no built-in MCP server runner yet: the executor app serves `mcp.open`,
 * `mcp.message` and `mcp.close` with `client.onRequest` / `client.onNotification`, the way the
 * SDK lets any capability be served.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { ECHO_SERVER, StdioMcpServers } from "../helpers/mcp-stdio-servers.ts";

describe("MCP channel: Harness and ExecutorClient", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("lists the server's tools and calls one through session.mcp()", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, { capabilities: { mcp: { servers: ["echo"] } } });
    const servers = new StdioMcpServers(
      { echo: ECHO_SERVER },
      (params) => client.notify("mcp.message", params),
      (params) => client.call("mcp.close", params),
    );
    fx.defer(() => servers.stopAll());
    client.onRequest("mcp.open", (params) => servers.open(params));
    client.onRequest("mcp.close", (params) => servers.close(params));
    client.onNotification("mcp.message", (params) => servers.message(params));
    client.tools.bash.handle(() => "ok");
    await client.start();

    const executor = await harness.waitExecutor();
    assert.deepEqual(executor.capabilities.mcp, { servers: ["echo"] });
    const session = await executor.assignSession({ session_id: "ses_mcp" });
    const mcp = new Client({ name: "bma-harness-e2e", version: "0.1.0" });
    await mcp.connect(await session.mcp("echo"));
    const { tools } = await mcp.listTools();
    assert.deepEqual(tools.map((tool) => tool.name).sort(), ["add", "echo"]);
    const result = await mcp.callTool({ name: "echo", arguments: { text: "hello" } });
    assert.deepEqual(result.content, [{ type: "text", text: "echo: hello" }]);
    await mcp.close();
  });
});
