/**
 * A harness with an inspector and the brain API, each served by `serveInspector` on 127.0.0.1
 * (the brain API by the harness's own server too, as `bma-harness serve` serves it), and an
 * executor serving its machine with one session, as a process of its own: the hostile-HTTP test
 * measures its memory and reads its stderr. Prints `inspector <url>`, `brain <url>`,
 * `harness-brain <url>` and `session <id>`; the tokens come from the arguments.
 *
 *   <runtime> tests/inspector/http-server.ts <inspector token> <brain token>
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const [inspectorToken, brainToken] = process.argv.slice(2);

const harness = new sdk.Harness({ insecureNoAuth: true });
// Uploads larger than the server's 8 MiB: an upload past it meets the server's bound first.
const ui = sdk.inspector(harness, { token: inspectorToken, maxUploadBytes: 16 * 1024 * 1024 });
const page = await sdk.serveInspector(ui);
const brain = sdk.brainApi(harness, { authorize: sdk.bearerAuthorize(brainToken) });
const api = await sdk.serveInspector((request) => Promise.resolve(brain.fetch(request)));
// One executor, so that the endpoints that act on one read their bodies.
const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
const harnessBrain = await harness.serve({ hostname: "127.0.0.1", port: 0, fetch: brain.fetch });
const workdir = mkdtempSync(join(tmpdir(), "bma-http-server-"));
const client = new sdk.ExecutorClient({
  harnessUrl: server.url,
  executor: { name: "http-fixture", os: "linux", arch: "amd64", version: "1.0.0" },
});
sdk.serveMachine(client, { workdir, cgroups: false });
await client.start();
const executor = await harness.waitExecutor();
const session = await executor.assignSession({ session_id: "ses_http_fixture" });
await session.ready();
console.log(`inspector ${page.url}`);
console.log(`brain ${api.url}`);
console.log(`harness-brain ${harnessBrain.httpUrl}`);
console.log(`session ${session.id}`);
process.once("SIGTERM", () => {
  ui.close();
  void client.stop()
    .then(() =>
      Promise.all([
        page.close(),
        api.close(),
        harness.close(),
        server.close(),
        harnessBrain.close(),
      ])
    )
    .then(() => rmSync(workdir, { recursive: true, force: true }))
    .finally(() => process.exit(0));
});
