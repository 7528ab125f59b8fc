/**
 * One harness holding 1,000 executors over real WebSockets on 127.0.0.1: each registers and
 * heartbeats (the lease on the injectable clock outlives two rounds), then one tool is called
 * on each and all 1,000 results arrive.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../mod.ts";
import { type ExecutorHandle, Harness, type HarnessServer } from "../../harness/node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

const EXECUTORS = 1_000;
const INTERVAL = 10_000;
const BATCH = 100;

describe("Harness: 1,000 executors", { timeout: 120_000 }, () => {
  let clock: ManualClock;
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];

  before(async () => {
    clock = new ManualClock();
    harness = new Harness({ clock, heartbeatIntervalMs: INTERVAL, insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  after(async () => {
    for (let i = 0; i < peers.length; i += BATCH) {
      await Promise.all(peers.slice(i, i + BATCH).map((peer) => peer.close().catch(() => {})));
    }
    await harness.close();
    await server.close();
  });

  async function heartbeatAll(): Promise<void> {
    const beats = await Promise.all(
      peers.map((peer) => peer.peer.call("executor.heartbeat", { active_sessions: [] })),
    );
    for (const beat of beats) {
      assert.equal(Date.parse(beat.lease_expires_at!), clock.now() + 2 * INTERVAL);
    }
  }

  it("registers 1,000 executors, keeps them by heartbeat, and gets a tool result from each", async () => {
    for (let start = 0; start < EXECUTORS; start += BATCH) {
      const batch = await Promise.all(
        Array.from({ length: BATCH }, async (_, k) => {
          const i = start + k;
          const peer = await ExecutorPeer.dial(server.url);
          // The executor answers each call right after acknowledging it.
          peer.serveDefaults();
          peer.peer.onRequest("tool.call", (call) => {
            queueMicrotask(() => {
              peer.completeBash(call, `${call.input.command as string} from ${i}\n`).catch(
                () => {},
              );
            });
            return { ok: true };
          });
          const params = registerParams({ environment_id: "", machine_id: `m_${i}` });
          peer.peer.capabilities = params.capabilities;
          const result = await peer.peer.call("executor.register", params);
          assert.equal(result.executor_id, `exec_m_${i}`);
          return peer;
        }),
      );
      peers.push(...batch);
    }
    assert.equal(harness.executors.length, EXECUTORS);

    // Two heartbeat rounds, one interval apart; two intervals after registering, every lease
    // still holds because each was renewed an interval ago.
    await heartbeatAll();
    await clock.advance(INTERVAL);
    await heartbeatAll();
    await clock.advance(INTERVAL);
    const executors: ExecutorHandle[] = harness.executors as ExecutorHandle[];
    assert.equal(executors.length, EXECUTORS);
    assert.equal(executors.filter((e) => e.connected && !e.gone).length, EXECUTORS);

    const results = await Promise.all(executors.map(async (executor) => {
      const session = await executor.assignSession({ session_id: `ses_${executor.id}` });
      return await session.tools.bash.call({ command: "hostname" });
    }));
    assert.equal(results.length, EXECUTORS);
    const outputs = new Set(results.map((r) => r.structured_content?.stdout));
    assert.equal(outputs.size, EXECUTORS, "each executor answered its own call");
    for (const result of results) assert.equal(result.outcome, "completed");
  });
});
