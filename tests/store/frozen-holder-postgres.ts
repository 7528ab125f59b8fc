/**
 * A harness frozen inside a PostgreSQL transaction, for tests/store/frozen-holder.test.ts: it
 * claims table argv[-1] of the database argv[-2] (its store ending a transaction idle for 1 s),
 * then writes a batch fenced by its epoch whose transaction holds its locks when the process
 * stops itself (SIGSTOP, printing `frozen <pid>` first). Woken (SIGCONT), it prints what became
 * of that batch (`write <outcome>`) and, once its renewal finds out, `fenced <error>`.
 */
import { writeSync } from "node:fs";
import type { PostgresClientLike, PostgresQueryable } from "../../node.ts";
import { openPostgresStore, rawClient, RUNTIME } from "./postgres-fixture.ts";

const process = (globalThis as any).process;
const [url, table] = process.argv.slice(-2) as [string, string];
const { Harness } = await import(`../../${RUNTIME}.ts`);
const say = (line: string) => writeSync(1, `${line}\n`);
const quiet = () => {};
const inner = await rawClient(url);
let freeze = false;
// The client stops this process once the frozen batch's row is written, its transaction open.
const client: PostgresClientLike = {
  unsafe: (query, params, options) => inner.unsafe(query, params, options),
  begin: (body) =>
    inner.begin(async (tx) => {
      const frozen: PostgresQueryable = {
        async unsafe(query, params, options) {
          const rows = await tx.unsafe(query, params, options);
          if (freeze && /^INSERT/.test(query) && JSON.stringify(params).includes("x/frozen")) {
            freeze = false;
            say(`frozen ${process.pid}`);
            process.kill(process.pid, "SIGSTOP");
          }
          return rows;
        },
      };
      return await body(frozen);
    }),
  end: (options) => inner.end(options),
};
const store = await openPostgresStore(client, { table, idleInTransactionTimeoutMs: 1_000 });
const harness = new Harness({
  store,
  insecureNoAuth: true,
  heartbeatIntervalMs: 120_000,
  storeRenewMs: 200,
  logger: { debug: quiet, info: quiet, warn: quiet, error: quiet },
});
await harness.ready;
const epoch = await store.get<number>("w/epoch");
freeze = true;
let outcome: string;
try {
  await store.write([{ check: "w/epoch", value: epoch }, { put: "x/frozen", value: "woken" }]);
  outcome = "committed";
} catch (error) {
  outcome = (error as Error).name;
}
say(`write ${outcome}`);
while (!harness.fenced) await new Promise((resolve) => setTimeout(resolve, 20));
say(`fenced ${harness.fenced.name}`);
await harness.close();
await store.close();
process.exit(0);
