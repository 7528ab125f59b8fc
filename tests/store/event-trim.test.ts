/**
 * A session's dropped events leave a real SQLite file in blocks: through a real harness over a
 * WebSocket, with a real executor, the file holds the events the log keeps and, below them, at
 * most a block (100) of dropped ones, never a gap; a large dropped event leaves at once; a harness
 * started again on the file (with narrower bounds) reads back exactly its bounds' newest events,
 * and its trimming goes on from the oldest event the file holds.
 */
import { after, afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient, Harness, type HarnessStore } from "../../node.ts";
import { until } from "../helpers/executor-fixture.ts";
import { DRIVERS, openSqliteStore } from "./sqlite-fixture.ts";
import { storedEvents } from "../helpers/stored-events.ts";
import { listenPort } from "../helpers/ports.ts";

const INFO = { name: "trim-executor", os: "linux", arch: "amd64", version: "0.0.1" };
const FAST = { initialDelayMs: 5, maxDelayMs: 50 };
/** What the file may hold beyond the log: a block of dropped events. */
const BLOCK = 100;

const dir = mkdtempSync(join(tmpdir(), "bma-event-trim-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** The indexes of session `id`'s events in the file at `path`, read by a connection of its own. */
async function storedIndexes(path: string, driver: string, id: string): Promise<number[]> {
  const check = await openSqliteStore(path, { driver });
  try {
    return storedEvents(check.list(`ev/${id}/`)).map((e) => e.record.index);
  } finally {
    check.close();
  }
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

for (const driver of DRIVERS) {
  describe(`durable events trimmed in blocks (SQLite, ${driver})`, { timeout: 60_000 }, () => {
    const closing: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const close of closing.splice(0).reverse()) await close().catch(() => {});
    });

    async function serve(
      store: HarnessStore,
      bounds: { maxSessionEvents?: number; maxSessionEventBytes?: number },
      port = 0,
    ) {
      const harness = new Harness({ store, insecureNoAuth: true, ...bounds });
      const server = await harness.serve({ hostname: "127.0.0.1", port });
      closing.push(() => harness.close(), () => server.close());
      return { harness, server, port: Number(new URL(server.url).port) };
    }

    async function executor(url: string) {
      const client = new ExecutorClient({
        harnessUrl: url,
        executor: INFO,
        reconnect: FAST,
        retry: FAST,
      });
      closing.push(() => client.stop());
      await client.start();
      return client;
    }

    /** Sends `count` events, `inflight` at a time (pipelined: several stored in a row). */
    async function emit(
      client: ExecutorClient,
      id: string,
      from: number,
      count: number,
      inflight: number,
      text = "a line of output",
    ) {
      for (let n = from; n < from + count; n += inflight) {
        const sends = [];
        for (let i = n; i < Math.min(n + inflight, from + count); i++) {
          sends.push(client.call("session.event", {
            session_id: id,
            event: { type: "tick", n: i, text },
          }));
        }
        await Promise.all(sends);
      }
    }

    for (const inflight of [1, 32]) {
      it(`holds the kept events and at most a block below them, contiguous (${inflight} in flight)`, async () => {
        const path = join(dir, `t${++files}.db`);
        const store = await openSqliteStore(path, { driver });
        closing.push(() => Promise.resolve(store.close()));
        const { harness, server } = await serve(store, { maxSessionEvents: 5 });
        const client = await executor(server.url);
        const session = await (await harness.waitExecutor()).assignSession({ session_id: "ses_t" });
        await session.ready();
        await emit(client, "ses_t", 0, 250, inflight);
        assert.deepEqual(session.eventRecords.map((r) => r.index), range(246, 250));
        const stored = await storedIndexes(path, driver, "ses_t");
        assert.ok(stored.length >= 5 && stored.length <= 5 + BLOCK, `${stored.length} stored`);
        assert.deepEqual(stored, range(stored[0], 250), "no gap, ending with the newest");
      });

      it(`deletes a large dropped event at once (${inflight} in flight)`, async () => {
        const path = join(dir, `t${++files}.db`);
        const store = await openSqliteStore(path, { driver });
        closing.push(() => Promise.resolve(store.close()));
        // Each frame is over a 1,024th of the byte bound: none waits for its block.
        const { harness, server } = await serve(store, { maxSessionEventBytes: 16 * 1024 });
        const client = await executor(server.url);
        const session = await (await harness.waitExecutor()).assignSession({ session_id: "ses_l" });
        await session.ready();
        await emit(client, "ses_l", 0, 40, inflight, "x".repeat(2048));
        const kept = session.eventRecords.map((r) => r.index);
        assert.ok(kept.length > 1 && kept.length < 40, `${kept.length} kept`);
        assert.deepEqual(await storedIndexes(path, driver, "ses_l"), kept);
      });

      it(`started again with narrower bounds: reads back its bounds, trims from the oldest held (${inflight} in flight)`, async () => {
        const path = join(dir, `t${++files}.db`);
        const store = await openSqliteStore(path, { driver });
        closing.push(() => Promise.resolve(store.close()));
        // A port no parallel test is given meanwhile: the next harness serves on it.
        const first = await serve(store, { maxSessionEvents: 150 }, await listenPort());
        const client = await executor(first.server.url);
        const session = await (await first.harness.waitExecutor()).assignSession({
          session_id: "ses_r",
        });
        await session.ready();
        await emit(client, "ses_r", 0, 250, inflight);
        assert.deepEqual(session.eventRecords.map((r) => r.index), range(101, 250));
        const before = await storedIndexes(path, driver, "ses_r");
        assert.ok(before.length >= 150 && before.length <= 150 + BLOCK, `${before.length} stored`);

        await first.harness.close();
        await first.server.close();
        const second = await serve(store, { maxSessionEvents: 5 }, first.port);
        const recovered = second.harness.session("ses_r")!;
        assert.deepEqual(recovered.eventRecords.map((r) => r.index), range(246, 250));
        await until(() => second.harness.executor(recovered.executor.id)?.connected === true);
        await emit(client, "ses_r", 250, 150, inflight);
        assert.deepEqual(recovered.eventRecords.map((r) => r.index), range(396, 400));
        const stored = await storedIndexes(path, driver, "ses_r");
        assert.ok(stored.length >= 5 && stored.length <= 5 + BLOCK, `${stored.length} stored`);
        assert.deepEqual(stored, range(stored[0], 400), "no gap, ending with the newest");
      });
    }
  });
}
