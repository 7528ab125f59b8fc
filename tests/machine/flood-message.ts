/**
 * The message the flow-control test's MCP server `flood` writes over and over (one line each),
 * shared by the executor that configures it (flow-executor.ts) and the test that finds it running
 * (flow-control.test.ts): `yes` with this argument.
 */
export const FLOOD_MESSAGE: string = JSON.stringify({
  jsonrpc: "2.0",
  method: "notifications/message",
  params: { level: "info", data: "m".repeat(1000) },
});
