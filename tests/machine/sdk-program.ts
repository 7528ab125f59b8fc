/**
 * A user's SDK program as the README shows it: an `ExecutorClient` with the machine served on it
 * (`serveMachine`) through this runtime's entry point, and no signal handler of its own. For the
 * orphan test (tests/machine/executor-death.test.ts), which ends it with a signal.
 *
 *   <runtime> tests/machine/sdk-program.ts <harness url> <workdir> [cgroups: true|false]
 */
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const [harnessUrl, workdir, cgroups = "true"] = process.argv.slice(2);

const client = new sdk.ExecutorClient({
  harnessUrl,
  executor: { name: "sdk-program", os: "linux", arch: "amd64", version: "1.0.0" },
});
sdk.serveMachine(client, {
  workdir,
  cgroups: cgroups === "true",
  // Its stdin is a pipe from the executor: it does not end when the executor does.
  mcpServers: { sleeper: { command: "sleep", args: ["1000"] } },
});
await client.start();
console.log("started");
