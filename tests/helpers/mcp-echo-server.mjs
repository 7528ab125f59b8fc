/**
 * A real MCP server built with the official TypeScript SDK, speaking MCP over stdio: the kind
 * of server an executor runs for a session behind the MCP channel. Run as a child process.
 *
 * Tools: `echo` (returns its text) and `add` (sums two numbers).
 *
 * Plain JavaScript, so every runtime starts it as is (no TypeScript loader in the child).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import * as z from "zod";

const server = new McpServer({ name: "echo", version: "1.0.0" });

server.registerTool(
  "echo",
  { description: "Returns its text", inputSchema: { text: z.string() } },
  ({ text }) => ({ content: [{ type: "text", text: `echo: ${text}` }] }),
);

server.registerTool(
  "add",
  { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } },
  ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }] }),
);

await server.connect(new StdioServerTransport());
