/**
 * The child of the `kill -9` test: opens the SQLite store at argv[2] with driver argv[3] and
 * writes the batches one durable event needs (the record, its dedup key, the acknowledged
 * sequence), one after another, printing `ack <n>` on stdout once batch n's `write` returned.
 * It never stops by itself: the test kills it.
 */
import { openSqliteStore } from "./sqlite-fixture.ts";

const [path, driver] = (globalThis as any).process.argv.slice(-2) as [string, string];
const store = await openSqliteStore(path, { driver });
const stdout = (globalThis as any).process.stdout;
const padding = "x".repeat(200);
for (let n = 1;; n++) {
  const index = String(n).padStart(10, "0");
  store.write([
    { put: `e:ses_kill:${index}`, value: { index: n, event: { type: "text", text: padding } } },
    { put: `er:ses_kill:number:${n}`, value: n },
    { put: "s:ses_kill:acked", value: n },
  ]);
  // Written before it is reported: the test trusts only what it read.
  if (!stdout.write(`ack ${n}\n`)) await new Promise((resolve) => stdout.once("drain", resolve));
}
