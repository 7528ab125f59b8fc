/**
 * A session's event log is bounded: 50,000 events over a real WebSocket leave the default
 * 10,000 in memory (every one reached the sink), a byte bound keeps the size, a reader that
 * falls behind continues at the oldest record kept and sees the jump in `index`, and the
 * deduplication windows keep working for events no longer kept.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DEFAULT_MAX_SESSION_EVENTS,
  Harness,
  type HarnessServer,
  type SessionEventRecord,
} from "../../harness/node.ts";
import { EventLog } from "../../harness/event-log.ts";
import { ExecutorPeer } from "../helpers/executor-peer.ts";

describe("Harness: a session's event log is bounded", { timeout: 60_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  let stored = 0;

  before(async () => {
    harness = new Harness({ insecureNoAuth: true, onSessionEvent: () => void stored++ });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  after(async () => {
    await harness.close();
    await server.close();
  });

  it("keeps the newest 10,000 of 50,000 events; the sink got all 50,000", async () => {
    const peer = await ExecutorPeer.dial(server.url);
    const registered = await peer.start();
    const executor = harness.executor(registered.executor_id)!;
    const session = await executor.assignSession({ session_id: "ses_many" });
    const total = 50_000;
    const window = 256;
    for (let sent = 0; sent < total; sent += window) {
      const batch: Promise<unknown>[] = [];
      for (let i = sent; i < Math.min(total, sent + window); i++) {
        batch.push(peer.peer.call("session.event", {
          session_id: "ses_many",
          event: { type: "tick", n: i, text: "some output of a tool" },
        }));
      }
      await Promise.all(batch);
    }
    assert.equal(stored, total);
    const kept = session.eventRecords;
    assert.equal(kept.length, DEFAULT_MAX_SESSION_EVENTS);
    assert.equal(session.droppedEvents, total - DEFAULT_MAX_SESSION_EVENTS);
    assert.equal(kept[0].index, total - DEFAULT_MAX_SESSION_EVENTS + 1);
    assert.equal(kept.at(-1)!.index, total);
    assert.equal((kept.at(-1)!.event as unknown as { n: number }).n, total - 1);
    // A reader from the start continues at the oldest record kept.
    const controller = new AbortController();
    const reader = session.events({ signal: controller.signal });
    assert.equal((await reader.next()).value?.index, total - DEFAULT_MAX_SESSION_EVENTS + 1);
    controller.abort();
    await peer.close();
  });
});

describe("EventLog bounds", () => {
  const event = (n: number, text = "") => ({ session_id: "s", event: { type: "tick", n, text } });

  it("keeps within a byte bound, counting the frames' sizes, and always the newest event", async () => {
    const log = new EventLog("s", { maxBytes: 10_000 });
    for (let n = 0; n < 100; n++) await log.append(event(n), `r${n}`, 1_000);
    assert.equal(log.records.length, 10);
    assert.ok(log.keptBytes <= 10_000, `${log.keptBytes} bytes kept`);
    assert.deepEqual(log.records.map((r) => r.index), Array.from({ length: 10 }, (_, i) => 91 + i));
    await log.append(event(100), "big", 50_000);
    assert.deepEqual(log.records.map((r) => r.index), [101]);
    assert.equal(log.accepted, 101);
    assert.equal(log.dropped, 100);
  });

  it("lets a reader that falls behind continue at the oldest record kept", async () => {
    const log = new EventLog("s", { maxRecords: 10 });
    await log.append(event(0), "r0");
    const reader = log.read();
    const seen: SessionEventRecord[] = [(await reader.next()).value!];
    for (let n = 1; n <= 100; n++) await log.append(event(n), `r${n}`);
    for (let i = 0; i < 10; i++) seen.push((await reader.next()).value!);
    // Index 2 to 91 were dropped before the reader got to them: the jump shows it.
    assert.deepEqual(seen.map((r) => r.index), [1, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101]);
    log.close();
    assert.equal((await reader.next()).done, true);
    // From a position already dropped: the oldest record kept.
    const late = log.read({ from: 5 });
    assert.equal((await late.next()).value?.index, 92);
  });

  it("still deduplicates by JSON-RPC id and event id after the record was dropped", async () => {
    const log = new EventLog("s", { maxRecords: 5 });
    await log.append(event(0), "first");
    await log.append(
      {
        session_id: "s",
        turn_id: "t1",
        event_id: "ev_1",
        sequence: 1,
        event: { type: "agent.message", content: [{ type: "text", text: "hi" }] },
      },
      "agent-1",
    );
    for (let n = 1; n <= 20; n++) await log.append(event(n), `r${n}`);
    assert.equal(log.accepted, 22);
    assert.deepEqual(await log.append(event(0), "first"), { acked_sequence: 1, duplicate: true });
    assert.deepEqual(
      await log.append(
        {
          session_id: "s",
          turn_id: "t1",
          event_id: "ev_1",
          sequence: 1,
          event: { type: "agent.message", content: [{ type: "text", text: "hi" }] },
        },
        "agent-1-again",
      ),
      { acked_sequence: 1, duplicate: true },
    );
    assert.equal(log.accepted, 22);
    assert.equal(log.records.length, 5);
  });

  it("stays within its bound over a long log", async () => {
    const log = new EventLog("s", { maxRecords: 100 });
    for (let n = 0; n < 20_000; n++) await log.append(event(n), n);
    assert.equal(log.records.length, 100);
    assert.equal(log.records[0].index, 19_901);
    assert.equal(log.dropped, 19_900);
  });
});
