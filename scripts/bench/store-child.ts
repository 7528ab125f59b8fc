/**
 * The child of the store benchmark (store.ts), on one runtime: for each store it is given,
 * writes durable events' batches — the batch an accepted `session.event` needs: the harness's
 * epoch check and the stored event — for `durationMs` after a warm-up, and prints the rate as
 * one JSON line. One batch after another (`write`), or, with `:grouped`, 64 events per turn of
 * the event loop as a windowed executor sends them and the harness's event log writes them
 * through `writeGrouped` (group commit): one batch, the epoch check and the events packed in
 * rows of consecutive events, a row within a block of 100 indexes.
 *
 *   <runtime> store-child.ts <durationMs> <warmupMs> <runs> <label=kind[:driver[:synchronous[:grouped]]]>...
 *
 * Kind `postgres` writes into a new table of the database at `$BMA_BENCH_POSTGRES_URL` per run.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type HarnessStore, MemoryHarnessStore, type StoreOp } from "../../mod.ts";
// Each runtime's opener; they load their driver only when called, so all three import anywhere.
import { openSqliteStore as openOnBun } from "../../harness/store/sqlite.bun.ts";
import { openSqliteStore as openOnDeno } from "../../harness/store/sqlite.deno.ts";
import { openSqliteStore as openOnNode } from "../../harness/store/sqlite.node.ts";
import { openPostgresStore } from "../../harness/store/postgres.node.ts";
import { EVENT_BLOCK, keys } from "../../harness/records.ts";

const RUNTIME: "node" | "deno" | "bun" = "Deno" in globalThis
  ? "deno"
  : "Bun" in globalThis
  ? "bun"
  : "node";

/** Events per session before the next session starts (keys spread as a harness's would). */
const PER_SESSION = 10_000;
/** At most this many events per run, to bound the memory store's heap. */
const MAX_EVENTS = 400_000;

const args = process.argv.slice(process.argv.findIndex((a) => /store-child\.m?[jt]s$/.test(a)) + 1);
const [durationMs, warmupMs, runs] = args.slice(0, 3).map(Number);
const specs = args.slice(3);
const dir = mkdtempSync(join(tmpdir(), "bma-bench-store-"));

let tables = 0;

async function open(spec: string, run: string): Promise<HarnessStore> {
  const [kind, driver, synchronous] = spec.split(":");
  if (kind === "memory") return new MemoryHarnessStore();
  if (kind === "postgres") {
    const url = process.env.BMA_BENCH_POSTGRES_URL;
    if (!url) throw new Error("kind postgres needs BMA_BENCH_POSTGRES_URL");
    return await openPostgresStore(url, { table: `bench_store_${RUNTIME}_${++tables}` });
  }
  const openSqliteStore = { node: openOnNode, deno: openOnDeno, bun: openOnBun }[RUNTIME] as (
    path: string,
    options: Record<string, unknown>,
  ) => Promise<HarnessStore>;
  return await openSqliteStore(join(dir, `${run}.db`), {
    driver: driver === "node" || driver === "bun" ? `${driver}:sqlite` : driver,
    synchronous: synchronous ?? "normal",
  });
}

/** The stored form of the `count`th event, and its session's key prefix and index. */
function storedEvent(count: number, run: string) {
  const session = `ses_${run}_${Math.floor(count / PER_SESSION)}`;
  const index = (count % PER_SESSION) + 1;
  const record = {
    index,
    session_id: session,
    event: { type: "text", text: "the tool printed a line of output" },
    turn_id: "turn_1",
    event_id: `evt_${count}`,
    sequence: index,
    received_at: 1764547200000 + count,
  };
  return { session, index, stored: { record, rpc: `string:evt_${count}`, bytes: 180 } };
}

/** The batch of the `count`th event: the epoch check, the stored event (as the harness writes them). */
function eventBatch(count: number, run: string): StoreOp[] {
  const { session, index, stored } = storedEvent(count, run);
  return [{ check: "w/epoch", value: 1 }, { put: keys.event(session, index), value: stored }];
}

/**
 * The batch of events `from` to `from + count - 1` accepted in one turn: the epoch check, and a
 * row per run of consecutive events of one session within a block of `EVENT_BLOCK` indexes.
 */
function turnBatch(from: number, count: number, run: string): StoreOp[] {
  const batch: StoreOp[] = [{ check: "w/epoch", value: 1 }];
  let row: unknown[] = [];
  let key = "";
  let block = "";
  for (let n = from; n < from + count; n++) {
    const { session, index, stored } = storedEvent(n, run);
    const at = `${session}/${Math.floor(index / EVENT_BLOCK)}`;
    if (at !== block) {
      if (row.length > 0) batch.push({ put: key, value: row.length === 1 ? row[0] : row });
      row = [];
      key = keys.event(session, index);
      block = at;
    }
    row.push(stored);
  }
  if (row.length > 0) batch.push({ put: key, value: row.length === 1 ? row[0] : row });
  return batch;
}

/** Writes events for `ms`; the number written. */
async function writeEvents(
  store: HarnessStore,
  ms: number,
  run: string,
  grouped: boolean,
): Promise<{ count: number; ms: number }> {
  await store.write([{ put: "w/epoch", value: 1 }]);
  const started = performance.now();
  const end = started + ms;
  let count = 0;
  while (count < MAX_EVENTS) {
    if (grouped) {
      await store.writeGrouped!(turnBatch(count, 64, run));
      count += 64;
    } else {
      // The SQLite stores write synchronously; the PostgreSQL store answers with a promise.
      const written = store.write(eventBatch(count, run));
      if (written) await written;
      count++;
    }
    if ((count & 63) === 0 && performance.now() >= end) break;
  }
  return { count, ms: performance.now() - started };
}

const results: Record<string, number[]> = {};
for (const spec of specs) {
  const [label, kind] = spec.split("=");
  results[label] = [];
  const grouped = kind.endsWith(":grouped");
  const warm = await open(kind, `${label}-warm`);
  await writeEvents(warm, warmupMs, "w", grouped);
  await warm.close?.();
  for (let r = 0; r < runs; r++) {
    const store = await open(kind, `${label}-${r}`);
    const { count, ms } = await writeEvents(store, durationMs, String(r), grouped);
    await store.close?.();
    results[label].push((count / ms) * 1000);
  }
}
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ runtime: RUNTIME, results }));
