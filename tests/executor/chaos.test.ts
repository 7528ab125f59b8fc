/**
 * Chaos: an executor serves 2,000 tool calls and emits 20,000 durable session events through a
 * TCP proxy that destroys both sockets at random points (at least 50 cuts). Nothing is lost and
 * nothing runs twice: every call has exactly one result and ran once, every event is accepted
 * exactly once, in order per session.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BashResult, ExecutorClient, ToolResultParams } from "../../executor/node.ts";
import type { ExecutorHandle, Session, ToolCallResult } from "../../harness/node.ts";
import type { SessionEventPayload } from "../../mod.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import type { CapturingLogger } from "../helpers/raw.ts";

const SESSIONS = 20;
const TOOL_CALLS = 2_000;
const EVENTS = 20_000;
const ROUNDS = 60;

/** A seeded PRNG (mulberry32), so a failing run can be replayed with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("ExecutorClient: chaos", { timeout: 120_000 }, () => {
  const fx = new Fixtures();
  let proxy: ChaosProxy;
  let client: ExecutorClient;
  let logger: CapturingLogger;
  let executor: ExecutorHandle;
  const sessions: Session[] = [];
  const runs = new Map<string, number>();
  const lost: ToolResultParams[] = [];
  const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
  const random = prng(seed);

  before(async () => {
    const { harness, server } = await fx.harness();
    proxy = await ChaosProxy.start(server.url);
    ({ client, logger } = fx.client(server, {
      harnessUrl: proxy.url,
      reconnect: { initialDelayMs: 1, maxDelayMs: 20 },
      retry: { initialDelayMs: 1, maxDelayMs: 20 },
      onToolResultLost: (result) => void lost.push(result),
    }));
    client.tools.bash.handle(async (input, ctx) => {
      runs.set(ctx.toolCallId, (runs.get(ctx.toolCallId) ?? 0) + 1);
      // Some calls take a little while, so cuts also land on running handlers.
      if (random() < 0.3) await new Promise((resolve) => setTimeout(resolve, random() * 3));
      return { stdout: `out:${input.command}`, stderr: "", exit_code: 0 };
    });
    await client.start();
    executor = await harness.waitExecutor();
    for (let s = 0; s < SESSIONS; s++) {
      sessions.push(await executor.assignSession({ session_id: `ses_${s}` }));
    }
    await Promise.all(sessions.map((session) => session.ready()));
  });

  after(async () => {
    await proxy?.close();
    await fx.cleanup();
  });

  it(`serves ${TOOL_CALLS} tool calls and ${EVENTS} events across at least 50 random cuts, losing nothing and running nothing twice`, async () => {
    const started = performance.now();
    const results = new Map<string, ToolCallResult<BashResult>>();
    let nextCall = 0;
    let nextEvent = 0;
    const sequence = new Array<number>(SESSIONS).fill(0);
    for (let round = 0; round < ROUNDS; round++) {
      const work: Promise<unknown>[] = [];
      const callsNow = Math.round((TOOL_CALLS * (round + 1)) / ROUNDS) - nextCall;
      const eventsNow = Math.round((EVENTS * (round + 1)) / ROUNDS) - nextEvent;
      let done = 0;
      const cutAt = Math.floor(random() * (callsNow + eventsNow));
      const settle = () => {
        // The cut lands at a random point of the round's traffic.
        if (done++ === cutAt) proxy.cut();
      };
      for (let i = 0; i < callsNow; i++, nextCall++) {
        const id = `call_${nextCall}`;
        const session = sessions[nextCall % SESSIONS];
        work.push(
          session.tools.bash.call({ command: `${nextCall}` }, { toolCallId: id }).then((r) => {
            results.set(id, r);
            settle();
          }),
        );
      }
      for (let i = 0; i < eventsNow; i++, nextEvent++) {
        const s = nextEvent % SESSIONS;
        const n = ++sequence[s];
        const event = { type: "progress", n } as SessionEventPayload;
        work.push(client.call("session.event", { session_id: `ses_${s}`, event }).then(settle));
      }
      await Promise.all(work);
      // A round whose cut came after the connection had already gone counts no cut: cut now.
      if (proxy.cuts <= round) {
        await until(() => proxy.open > 0, "the reconnect");
        proxy.cut();
      }
    }
    const seconds = (performance.now() - started) / 1000;

    // Every call: one result, the right one, and the handler ran once.
    assert.equal(results.size, TOOL_CALLS);
    for (const [id, result] of results) {
      assert.equal(result.outcome, "completed", id);
      assert.equal(result.structured_content?.stdout, `out:${id.slice(5)}`, id);
    }
    assert.equal(runs.size, TOOL_CALLS);
    const twice = [...runs].filter(([, n]) => n !== 1);
    assert.deepEqual(twice, [], "no call ran twice");
    assert.deepEqual(lost, [], "no result lost");
    // Every event: accepted exactly once, in order, per session.
    let total = 0;
    for (const [s, session] of sessions.entries()) {
      const seen = session.eventRecords.map((r) => (r.event as unknown as { n: number }).n);
      total += seen.length;
      assert.deepEqual(seen, Array.from({ length: sequence[s] }, (_, i) => i + 1), session.id);
    }
    assert.equal(total, EVENTS);
    assert.ok(proxy.cuts >= 50, `only ${proxy.cuts} cuts`);
    assert.equal(executor.gone, false, "resumed within the lease every time");
    assert.equal(client.executorId, executor.id);
    const resent = logger.records
      .filter((r) => r.message === "resending unacknowledged session events")
      .reduce((sum, r) => sum + Number(r.fields?.count ?? 0), 0);
    process.stdout.write(
      `# chaos: seed ${seed}, ${proxy.cuts} cuts, ${proxy.accepted} connections, ` +
        `${TOOL_CALLS} calls, ${EVENTS} events (${resent} resent) in ${seconds.toFixed(1)} s\n`,
    );
  });
});
