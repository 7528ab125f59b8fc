/**
 * A process that starts harnesses for tests/store/claim-race.test.ts, on this runtime's entry
 * point and the SQLite driver argv[-1]. It prints `ready` once everything is loaded, then obeys
 * lines on stdin (the test sends each `claim` to two of these at once, so their claims meet):
 *
 * - `claim <path>`: opens the SQLite file and starts a harness on it; prints `held` once it
 *   holds the store, or `refused <error name> <holder pid or -> <message>`.
 * - `end`: closes that harness and its store; prints `ended`.
 *
 * It exits when stdin ends.
 */
import { openSqliteStore, RUNTIME } from "./sqlite-fixture.ts";

const process = (globalThis as any).process;
const driver = process.argv.at(-1) as string;
const { Harness } = await import(`../../${RUNTIME}.ts`);
const say = (line: string) => process.stdout.write(`${line}\n`);
const quiet = () => {};

let store: any;
let harness: any;

async function claim(path: string): Promise<string> {
  try {
    store = await openSqliteStore(path, { driver });
    harness = new Harness({
      store,
      insecureNoAuth: true,
      heartbeatIntervalMs: 120_000,
      storeRenewMs: 120_000,
      logger: { debug: quiet, info: quiet, warn: quiet, error: quiet },
    });
    await harness.ready;
    return "held";
  } catch (error) {
    const e = error as Error & { holder?: { pid: number } };
    return `refused ${e.name} ${e.holder?.pid ?? "-"} ${String(e.message).replace(/\n/g, " ")}`;
  }
}

async function end(): Promise<string> {
  try {
    await harness?.close();
  } catch { /* refused at its start */ }
  try {
    store?.close();
  } catch { /* never opened */ }
  harness = store = undefined;
  return "ended";
}

let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  buffered += chunk;
  const lines = buffered.split("\n");
  buffered = lines.pop()!;
  for (const line of lines) {
    const [command, path] = line.split(" ");
    void (command === "claim" ? claim(path) : end()).then(say);
  }
});
process.stdin.on("end", () => process.exit(0));
say("ready");
