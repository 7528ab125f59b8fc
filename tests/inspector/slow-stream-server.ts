/**
 * A harness with an inspector and the brain API, each served by `serveInspector` on 127.0.0.1
 * with a short `slowClientTimeoutMs`, and one executor holding session `ses_slow`, as a process of
 * its own: the slow-stream test holds its event streams open, measures its memory, and has it
 * send events. A second brain API server has a short `maxStreamMs`.
 *
 *   <runtime> tests/inspector/slow-stream-server.ts <inspector token> <brain token> <timeout ms>
 *
 * Prints `inspector <url>`, `brain <url>`, `brief <url>` (the short-lived streams) and `ready`,
 * then `log <message>` for each client the first two disconnect.
 * Reads commands on stdin, one a line, and answers each once it is done:
 *
 * - `flood <count> <chars> <tag>`: `count` events of `chars` characters each, then the marker
 *   event `<tag>`; answers `flooded <tag>`.
 * - `mark <tag>`: the marker event `<tag>`; answers `marked <tag>`.
 */
import { createInterface } from "node:readline";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const [inspectorToken, brainToken, timeout] = process.argv.slice(2);
const slowClientTimeoutMs = Number(timeout);
/** What the servers report (the clients they disconnect), as `log <message>` lines. */
const logger = {
  debug() {},
  info: (message: string) => console.log(`log ${message}`),
  warn: (message: string) => console.log(`log ${message}`),
  error: (message: string) => console.log(`log ${message}`),
};
const SESSION = "ses_slow";
/** Events sent at once: the executor's outbox holds this many. */
const BATCH = 64;

// A small log and inspector, so that the flood itself grows the process little.
const harness = new sdk.Harness({ insecureNoAuth: true, maxSessionEventBytes: 4 * 1024 * 1024 });
// The pages' queue bound is far above what a reading page falls behind by on a busy machine (the
// default 1 MiB is tested in-process): the clients that stop reading are dropped by the timeout.
const ui = sdk.inspector(harness, {
  token: inspectorToken,
  limits: { events: 50 },
  logger,
  maxStreamQueueBytes: 16 * 1024 * 1024,
});
const page = await sdk.serveInspector(ui, { slowClientTimeoutMs, logger });
const brainOptions = { authorize: sdk.bearerAuthorize(brainToken) };
const brain = sdk.brainApi(harness, brainOptions);
const api = await sdk.serveInspector((request) => Promise.resolve(brain.fetch(request)), {
  slowClientTimeoutMs,
  logger,
});
const brief = sdk.brainApi(harness, { ...brainOptions, maxStreamMs: 2 * slowClientTimeoutMs });
const briefApi = await sdk.serveInspector((request) => Promise.resolve(brief.fetch(request)), {
  slowClientTimeoutMs,
});
const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
const client = new sdk.ExecutorClient({
  harnessUrl: server.url,
  executor: { name: "slow-stream-fixture", os: "linux", arch: "amd64", version: "1.0.0" },
});
await client.start();
const executor = await harness.waitExecutor();
const session = await executor.assignSession({
  session_id: SESSION,
  metadata: { source: "harness" },
});
await session.ready();

const send = (event: Record<string, unknown> & { type: string }) =>
  client.call("session.event", { session_id: SESSION, event });

async function flood(count: number, chars: number, tag: string): Promise<void> {
  const text = "x".repeat(chars);
  for (let n = 0; n < count; n += BATCH) {
    const batch = Array.from(
      { length: Math.min(BATCH, count - n) },
      (_, i) => send({ type: "flood", n: n + i, text }),
    );
    await Promise.all(batch);
  }
  await send({ type: "marker", tag });
}

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const [command, ...args] = line.trim().split(" ");
  if (command === "flood") {
    const [count, chars, tag] = args;
    void flood(Number(count), Number(chars), tag).then(() => console.log(`flooded ${tag}`));
  } else if (command === "mark") {
    void send({ type: "marker", tag: args[0] }).then(() => console.log(`marked ${args[0]}`));
  }
});

console.log(`inspector ${page.url}`);
console.log(`brain ${api.url}`);
console.log(`brief ${briefApi.url}`);
console.log("ready");
process.once("SIGTERM", () => {
  lines.close();
  ui.close();
  void client.stop()
    .then(() =>
      Promise.all([page.close(), api.close(), briefApi.close(), harness.close(), server.close()])
    )
    .finally(() => process.exit(0));
});
