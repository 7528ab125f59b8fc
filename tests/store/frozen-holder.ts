/**
 * A harness frozen inside a write transaction, for tests/store/frozen-holder.test.ts: it claims
 * the SQLite file argv[-2] (renewing every argv[-1] ms), commits a session's record, opens a
 * group commit's transaction (a grouped write whose commit waits for this task's microtasks),
 * prints `frozen <pid>` and stops itself (SIGSTOP) before that transaction ends: the file's
 * write lock stays held while the process lives.
 */
import { writeSync } from "node:fs";
import { openSqliteStore, RUNTIME } from "./sqlite-fixture.ts";

const process = (globalThis as any).process;
const [path, renew] = process.argv.slice(-2) as [string, string];
const { Harness } = await import(`../../${RUNTIME}.ts`);
const quiet = () => {};
const store = await openSqliteStore(path);
const harness = new Harness({
  store,
  insecureNoAuth: true,
  heartbeatIntervalMs: 120_000,
  storeRenewMs: Number(renew),
  logger: { debug: quiet, info: quiet, warn: quiet, error: quiet },
});
await harness.ready;
store.write([{ put: "x/committed", value: "before the freeze" }]);
// Opens the transaction (BEGIN IMMEDIATE): the write lock is this process's until it commits.
void store.writeGrouped!([{ put: "x/uncommitted", value: "inside the frozen transaction" }]);
// Written synchronously, so the line is out before the process stops.
writeSync(1, `frozen ${process.pid}\n`);
process.kill(process.pid, "SIGSTOP");
