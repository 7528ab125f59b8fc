/**
 * A harness with an inspector and the brain API, each served by `serveInspector` on 127.0.0.1,
 * as a process of its own: the hostile-HTTP test measures its memory and reads its stderr.
 * Prints `inspector <url>` and `brain <url>`; the tokens come from the arguments.
 *
 *   <runtime> tests/inspector/http-server.ts <inspector token> <brain token>
 */
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const [inspectorToken, brainToken] = process.argv.slice(2);

const harness = new sdk.Harness({ insecureNoAuth: true });
const ui = sdk.inspector(harness, { token: inspectorToken });
const page = await sdk.serveInspector(ui);
const brain = sdk.brainApi(harness, { authorize: sdk.bearerAuthorize(brainToken) });
const api = await sdk.serveInspector((request) => Promise.resolve(brain.fetch(request)));
// One executor, so that the endpoints that act on one read their bodies.
const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
const client = new sdk.ExecutorClient({
  harnessUrl: server.url,
  executor: { name: "http-fixture", os: "linux", arch: "amd64", version: "1.0.0" },
});
await client.start();
await harness.waitExecutor();
console.log(`inspector ${page.url}`);
console.log(`brain ${api.url}`);
process.once("SIGTERM", () => {
  ui.close();
  void client.stop()
    .then(() => Promise.all([page.close(), api.close(), harness.close(), server.close()]))
    .finally(() => process.exit(0));
});
