/**
 * How the executor starts an MCP server for the MCP channel: one entry of an `mcp.json`'s
 * `mcpServers` map. Kept apart from the relay (`mcp.node.ts`) so that the declarations of
 * `serveMachine`'s options name no Node types.
 */

/** One server of an `mcp.json`: how to start it over stdio. */
export interface McpServerConfig {
  /** The program. */
  command: string;
  /** Its arguments. */
  args?: string[];
  /** Variables set for the server, over the executor's child environment. */
  env?: Record<string, string>;
  /** Working directory: relative paths resolve in the session workdir (the default). */
  cwd?: string;
}
