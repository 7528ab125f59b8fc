/**
 * The MCP channel, harness half: the official MCP TypeScript SDK `Client` talks through
 * `session.mcp(name)` to a real MCP server (built with the SDK) that a Peer playing the
 * executor spawns as a child process over stdio. Real WebSocket, real child process.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client";
import { CapabilityNotAdvertisedError } from "../../mod.ts";
import { Harness, type HarnessServer, McpChannelClosedError } from "../../harness/node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";
import { ECHO_SERVER, StdioMcpServers } from "../helpers/mcp-stdio-servers.ts";

describe("Harness: MCP channel", { timeout: 30_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];
  const runners: StdioMcpServers[] = [];
  let next = 0;

  before(async () => {
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  afterEach(async () => {
    for (const runner of runners.splice(0)) await runner.stopAll();
    for (const peer of peers.splice(0)) await peer.close().catch(() => {});
  });
  after(async () => {
    await harness.close();
    await server.close();
  });

  /** An executor advertising the MCP server "echo", which it runs over stdio per channel. */
  async function mcpExecutor() {
    const machineId = `m_mcp${++next}`;
    const peer = await ExecutorPeer.dial(server.url);
    peers.push(peer);
    const servers = new StdioMcpServers(
      { echo: ECHO_SERVER },
      (params) => peer.peer.notify("mcp.message", params),
      (params) => peer.peer.call("mcp.close", params),
    );
    runners.push(servers);
    peer.peer.onRequest("mcp.open", (params) => servers.open(params));
    peer.peer.onRequest("mcp.close", (params) => servers.close(params));
    peer.peer.onNotification("mcp.message", (params) => servers.message(params));
    await peer.start(registerParams({
      environment_id: "",
      machine_id: machineId,
      capabilities: { process: true, tools: ["bash"], mcp: { servers: ["echo"] } },
    }));
    const executor = await harness.waitExecutor({ filter: (e) => e.id === `exec_${machineId}` });
    const session = await executor.assignSession({ session_id: `ses_${machineId}` });
    return { peer, servers, executor, session };
  }

  it("lets the MCP SDK client list the server's tools and call one", async () => {
    const { servers, session } = await mcpExecutor();
    const channel = await session.mcp("echo");
    assert.equal(channel.server, "echo");
    assert.equal(channel.bmaSessionId, session.id);
    const client = new Client({ name: "bma-harness-test", version: "0.1.0" });
    await client.connect(channel);
    assert.equal(client.getServerVersion()?.name, "echo");
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["add", "echo"]);
    const echoed = await client.callTool({ name: "echo", arguments: { text: "over the wire" } });
    assert.deepEqual(echoed.content, [{ type: "text", text: "echo: over the wire" }]);
    const sum = await client.callTool({ name: "add", arguments: { a: 2, b: 40 } });
    assert.deepEqual(sum.content, [{ type: "text", text: "42" }]);
    assert.equal(servers.running, 1);

    await client.close();
    assert.equal(channel.isClosed, true);
    await assert.rejects(
      channel.send({ jsonrpc: "2.0", method: "ping", id: 9 }),
      McpChannelClosedError,
    );
  });

  it("runs one server per channel", async () => {
    const { servers, session } = await mcpExecutor();
    const a = new Client({ name: "a", version: "1" });
    const b = new Client({ name: "b", version: "1" });
    await a.connect(await session.mcp("echo"));
    await b.connect(await session.mcp("echo"));
    assert.equal(servers.running, 2);
    const [ra, rb] = await Promise.all([
      a.callTool({ name: "echo", arguments: { text: "a" } }),
      b.callTool({ name: "echo", arguments: { text: "b" } }),
    ]);
    assert.deepEqual(ra.content, [{ type: "text", text: "echo: a" }]);
    assert.deepEqual(rb.content, [{ type: "text", text: "echo: b" }]);
    await a.close();
    await b.close();
  });

  it("closes the channel when the server exits on the executor (mcp.close from the executor)", async () => {
    const { servers, session } = await mcpExecutor();
    const channel = await session.mcp("echo");
    const client = new Client({ name: "c", version: "1" });
    let clientClosed = false;
    client.onclose = () => {
      clientClosed = true;
    };
    await client.connect(channel);
    servers.child(channel.channelId)!.kill("SIGKILL");
    assert.equal(await channel.closed, "server exited");
    assert.equal(clientClosed, true);
  });

  it("ends the session's channels when the session stops", async () => {
    const { session } = await mcpExecutor();
    const channel = await session.mcp("echo");
    const client = new Client({ name: "d", version: "1" });
    await client.connect(channel);
    await session.stop("done");
    assert.equal(await channel.closed, "done");
  });

  it("refuses session.mcp locally when the executor does not advertise mcp", async () => {
    const peer = await ExecutorPeer.dial(server.url);
    peers.push(peer);
    await peer.start(registerParams({ environment_id: "", machine_id: `m_nomcp${++next}` }));
    const executor = await harness.waitExecutor({ filter: (e) => e.id === `exec_m_nomcp${next}` });
    const session = await executor.assignSession({ session_id: `ses_nomcp${next}` });
    const error = await session.mcp("echo").catch((e) => e);
    assert.ok(error instanceof CapabilityNotAdvertisedError, String(error));
    assert.equal(error.capability, "mcp");
  });
});
