/**
 * An executor serving the machine with this runtime's entry point, as a process of its own, for
 * the flow-control test (tests/machine/flow-control.test.ts), which measures its memory; its MCP
 * server `flood` writes messages as fast as a pipe takes them once it has read a line.
 *
 *   <runtime> tests/machine/flow-executor.ts <harness url> <workdir>
 */
import type * as Entry from "../../node.ts";
import { FLOOD_MESSAGE } from "./flood-message.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const [harnessUrl, workdir] = process.argv.slice(2);

const client = new sdk.ExecutorClient({
  harnessUrl,
  executor: { name: "flow-control", os: "linux", arch: "amd64", version: "1.0.0" },
});
// An MCP server that floods: after its first line in, one message after another, forever.
sdk.serveMachine(client, {
  workdir,
  graceMs: 300,
  mcpServers: { flood: { command: "sh", args: ["-c", `read line; exec yes '${FLOOD_MESSAGE}'`] } },
});
await client.start();
console.log("started");
process.once("SIGTERM", () => void client.stop().finally(() => process.exit(0)));
