/**
 * The MCP TypeScript SDK baseline: `tools/call` of an `echo` tool returning a small text
 * result, through the SDK's `McpServer` and `Client`, over its in-memory pair and over a
 * WebSocket (the SDK's own `WebSocketClientTransport`, given `ws` as the WebSocket class on
 * Node 20, against the minimal `ws` server transport below).
 */
import { createServer as createHttpServer } from "node:http";
import { WebSocket as WsWebSocket, WebSocketServer } from "ws";
import * as z from "zod";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/server/mcp.d.ts"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.d.ts"
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/inMemory.d.ts"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/client/websocket.d.ts"
import { WebSocketClientTransport } from "@modelcontextprotocol/sdk/client/websocket.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/shared/transport.d.ts"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
// @ts-types="../../node_modules/@modelcontextprotocol/sdk/dist/esm/types.d.ts"
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { INPUT_TEXT, type Measured, measureLoop, TOOL } from "./common.ts";

function echoServer(): McpServer {
  const server = new McpServer({ name: "bench", version: "0.0.0" });
  server.registerTool(
    TOOL,
    { description: "Returns ok", inputSchema: { text: z.string() } },
    () => ({ content: [{ type: "text", text: "ok" }] }),
  );
  return server;
}

function benchClient(): Client {
  return new Client({ name: "bench", version: "0.0.0" });
}

/** One `tools/call`, checked to have succeeded. */
async function callOnce(client: Client): Promise<void> {
  const result = await client.callTool({ name: TOOL, arguments: { text: INPUT_TEXT } });
  if (result.isError) throw new Error(`MCP tool call failed: ${JSON.stringify(result)}`);
}

/** An MCP client connected to a server. */
export interface McpDriver {
  run(inflight: number, ms: number): Promise<Measured>;
  close(): Promise<void>;
}

/** A server and a client in one process over the SDK's in-memory pair. */
export async function mcpMemory(): Promise<McpDriver> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = echoServer();
  await server.connect(serverSide);
  const client = benchClient();
  await client.connect(clientSide);
  return {
    run: (inflight, ms) => measureLoop(() => callOnce(client), inflight, ms),
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

/**
 * A minimal MCP server transport over one `ws` socket: each text frame is one JSON-RPC
 * message, checked with the SDK's schema as the SDK's own transports do.
 */
class WsServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #socket: WsWebSocket;

  constructor(socket: WsWebSocket) {
    this.#socket = socket;
  }

  start(): Promise<void> {
    this.#socket.on("message", (data) => {
      let message: JSONRPCMessage;
      try {
        message = JSONRPCMessageSchema.parse(JSON.parse(String(data)));
      } catch (error) {
        this.onerror?.(error as Error);
        return;
      }
      this.onmessage?.(message);
    });
    this.#socket.on("close", () => this.onclose?.());
    this.#socket.on("error", (error) => this.onerror?.(error));
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    this.#socket.send(JSON.stringify(message));
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.#socket.close();
    return Promise.resolve();
  }
}

/** An MCP server over WebSocket on 127.0.0.1 (one `McpServer` per connection). */
export async function serveMcpWebSocket(): Promise<{ url: string; close(): Promise<void> }> {
  const http = createHttpServer();
  const wss = new WebSocketServer({
    server: http,
    handleProtocols: (offered) => (offered.has("mcp") ? "mcp" : false),
  });
  wss.on("connection", (socket) => {
    void echoServer().connect(new WsServerTransport(socket));
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const port = (http.address() as { port: number }).port;
  return {
    url: `ws://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        http.close(() => resolve());
      }),
  };
}

/** An MCP client over the SDK's WebSocket client transport. */
export async function mcpWebSocketClient(url: string): Promise<McpDriver> {
  // Node 20 has no global WebSocket: the SDK's transport gets `ws`, a WHATWG-compatible one.
  const global = globalThis as { WebSocket?: unknown };
  global.WebSocket ??= WsWebSocket;
  const client = benchClient();
  await client.connect(new WebSocketClientTransport(new URL(url)));
  return {
    run: (inflight, ms) => measureLoop(() => callOnce(client), inflight, ms),
    close: () => client.close(),
  };
}
