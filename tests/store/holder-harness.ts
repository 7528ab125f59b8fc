/**
 * A harness process for the one-writer tests (tests/store/one-writer.test.ts,
 * tests/store/postgres-one-writer.test.ts): a harness of this runtime's entry point on the store
 * argv[-2] (a SQLite file, or `postgres://…#table`: that table of a PostgreSQL database), with
 * `takeover` when argv[-1] is `takeover`. It prints `listening <url>` (or, refused, `refused <name> <message>` and exits
 * 3), then obeys lines on stdin, answering each on stdout:
 *
 * - `assign <session>`: waits for an executor, assigns the session, waits until it is ready.
 * - `call <session> <command>`: calls bash in the session (its tool_call_id is `call_<command>`).
 * - `state <session>`: the session's state here (`none` when this harness has none).
 * - `fenced`: whether another harness took the store over.
 * - `close`: closes the harness and exits.
 *
 * Its log goes to stderr, one JSON line per record.
 */
import { openSqliteStore, RUNTIME } from "./sqlite-fixture.ts";
import { openPostgresStore } from "./postgres-fixture.ts";

const process = (globalThis as any).process;
const [spec, mode] = process.argv.slice(-2) as [string, string];
const { Harness } = await import(`../../${RUNTIME}.ts`);
const say = (line: string) => process.stdout.write(`${line}\n`);
const log = (level: string) => (message: string, fields?: Record<string, unknown>) =>
  process.stderr.write(`${JSON.stringify({ level, message, ...fields })}\n`);
const logger = { debug() {}, info: log("info"), warn: log("warn"), error: log("error") };

const [url, table] = spec.split("#");
const store = spec.startsWith("postgres://")
  ? await openPostgresStore(url, { table })
  : await openSqliteStore(spec);
let harness: any;
try {
  harness = new Harness({
    store,
    insecureNoAuth: true,
    takeover: mode === "takeover",
    // Long enough that no lease or renewal runs out while the test drives it.
    heartbeatIntervalMs: 120_000,
    storeRenewMs: 120_000,
    logger,
  });
  // A store that answers with promises is claimed (or refused) by then.
  await harness.ready;
} catch (error) {
  const e = error as Error;
  say(`refused ${e.name} ${e.message}`);
  await harness?.close();
  await store.close();
  process.exit(3);
}
const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
say(`listening ${server.url}`);

const commands: Record<string, (args: string[]) => Promise<string>> = {
  async assign([id]) {
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: id });
    await session.ready();
    return `assigned ${id}`;
  },
  async call([id, command]) {
    const session = harness.session(id);
    if (!session) return "call none";
    try {
      const result = await session.callTool({
        tool: "bash",
        input: { command },
        tool_call_id: `call_${command}`,
      });
      return `call ok ${JSON.stringify(result.output)}`;
    } catch (error) {
      return `call refused ${(error as Error).name} ${(error as Error).message}`;
    }
  },
  state: ([id]) => Promise.resolve(`state ${harness.session(id)?.state ?? "none"}`),
  fenced: () => Promise.resolve(`fenced ${harness.fenced ? harness.fenced.name : "no"}`),
  async close() {
    await harness.close();
    await server.close();
    await store.close();
    setTimeout(() => process.exit(0), 10);
    return "closed";
  },
};

let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  buffered += chunk;
  const lines = buffered.split("\n");
  buffered = lines.pop()!;
  for (const line of lines) {
    const [name, ...args] = line.trim().split(" ");
    const command = commands[name];
    if (!command) say(`unknown ${name}`);
    else command(args).then(say, (error) => say(`failed ${name} ${(error as Error).message}`));
  }
});
