/**
 * Sending again, the one rule (protocol/retry.ts) on a ManualClock: which failures are retried
 * (`retryVerdict`), the peer's `retry_after_ms` before the backoff, a final refusal rejected at
 * once, an abort that stops the attempts and the waits; and, through the public API, the agent
 * capability's resent `interaction.request` waiting as long as the harness's `retry_after_ms`
 * says rather than its own (much shorter) backoff.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ConnectionClosedError,
  createLinkedTransportPair,
  ExecutorClient,
  type InteractionAnswer,
  InvalidParamsError,
  ManualClock,
  NotFoundError,
  Peer,
  RequestTimeoutError,
  ResourceExhaustedError,
  serveAgent,
  UnavailableError,
} from "../../mod.ts";
import { MAX_RETRY_AFTER_MS, retrying, retryVerdict } from "../../protocol/retry.ts";

/** No jitter: the backoff is exact (10 ms, 20 ms, 40 ms, ...). */
const POLICY = { initialDelayMs: 10, maxDelayMs: 1_000, jitter: 0 };

/** Lets promise chains settle without moving the clock. */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

describe("retryVerdict: the shared classification", () => {
  it("sends a lost connection again at once, a timeout and -32004/-32009 after a delay", () => {
    assert.equal(retryVerdict(new ConnectionClosedError(1006, "gone")), "again");
    assert.equal(retryVerdict(new RequestTimeoutError("tool.result", 1_000)), "retry");
    assert.equal(retryVerdict(new UnavailableError("later")), "retry");
    assert.equal(retryVerdict(new ResourceExhaustedError("busy")), "retry");
  });

  it("gives up on any other failure", () => {
    assert.equal(retryVerdict(new NotFoundError("unknown")), "fail");
    assert.equal(retryVerdict(new InvalidParamsError("bad")), "fail");
    assert.equal(retryVerdict(new Error("boom")), "fail");
    assert.equal(retryVerdict(undefined), "fail");
  });
});

describe("retrying: deliver until accepted, on the injected clock", () => {
  it("waits the peer's retry_after_ms instead of the backoff", async () => {
    const clock = new ManualClock();
    const attempts: number[] = [];
    const done = retrying((n) => {
      attempts.push(clock.now());
      if (n === 1) throw new UnavailableError("later", { retry_after_ms: 5_000 });
      return "accepted";
    }, { clock, policy: POLICY, classify: retryVerdict });
    await turns();
    assert.equal(attempts.length, 1);
    await clock.advance(4_999);
    assert.equal(attempts.length, 1, "not before retry_after_ms (the backoff said 10 ms)");
    await clock.advance(1);
    assert.equal(await done, "accepted");
    assert.deepEqual(attempts.map((at) => at - attempts[0]), [0, 5_000]);
  });

  it("waits at most a minute for a retry_after_ms, and no longer than a wake says", async () => {
    const clock = new ManualClock();
    const attempts: number[] = [];
    const done = retrying((n) => {
      attempts.push(clock.now());
      if (n <= 2) throw new UnavailableError("later", { retry_after_ms: 1e308 });
      return "accepted";
    }, { clock, policy: POLICY, classify: retryVerdict });
    await turns();
    await clock.advance(MAX_RETRY_AFTER_MS);
    await turns();
    assert.equal(attempts.length, 2, "a hint beyond a minute counts as a minute");
    let wake!: () => void;
    const woken = retrying((n) => {
      if (n === 1) throw new UnavailableError("later", { retry_after_ms: 30_000 });
      return "again";
    }, {
      clock,
      policy: POLICY,
      classify: retryVerdict,
      wake: () => new Promise<void>((resolve) => (wake = resolve)),
    });
    await turns();
    wake();
    assert.equal(await woken, "again", "a wake ends the wait (a new connection)");
    await clock.advance(MAX_RETRY_AFTER_MS);
    assert.equal(await done, "accepted");
  });

  it("backs off when the peer gives no hint, growing with each retryable failure", async () => {
    const clock = new ManualClock();
    const attempts: number[] = [];
    const done = retrying((n) => {
      attempts.push(clock.now());
      if (n <= 3) throw new RequestTimeoutError("session.ended", 1_000);
      return n;
    }, { clock, policy: POLICY });
    await clock.advance(100);
    assert.equal(await done, 4);
    assert.deepEqual(attempts.map((at) => at - attempts[0]), [0, 10, 30, 70]);
  });

  it("sends again at once after a lost connection, without counting it toward the backoff", async () => {
    const clock = new ManualClock();
    const failures = [
      new ResourceExhaustedError("busy"),
      new ConnectionClosedError(1006, "gone"),
      new ResourceExhaustedError("busy"),
    ];
    const attempts: number[] = [];
    const done = retrying(() => {
      attempts.push(clock.now());
      const failure = failures.shift();
      if (failure) throw failure;
      return "accepted";
    }, { clock, policy: POLICY, classify: retryVerdict });
    await clock.advance(100);
    assert.equal(await done, "accepted");
    // 10 ms, at once, then 20 ms (the second backoff, not the third).
    assert.deepEqual(attempts.map((at) => at - attempts[0]), [0, 10, 10, 30]);
  });

  it("rejects a final refusal at once, with no timer set", async () => {
    const clock = new ManualClock();
    let attempts = 0;
    const refusal = new NotFoundError("unknown tool call");
    await assert.rejects(
      retrying(() => {
        attempts++;
        throw refusal;
      }, { clock, policy: POLICY, classify: retryVerdict }),
      (error) => error === refusal,
    );
    assert.equal(attempts, 1);
    assert.equal(clock.pendingTimers, 0);
  });

  it("stops when the signal aborts: during a wait, and before any attempt", async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    let attempts = 0;
    const done = retrying(() => {
      attempts++;
      throw new UnavailableError("later", { retry_after_ms: 60_000 });
    }, { clock, policy: POLICY, signal: controller.signal });
    done.catch(() => {});
    await turns();
    assert.equal(attempts, 1);
    const reason = new Error("stopped");
    controller.abort(reason);
    await assert.rejects(done, (error) => error === reason);
    assert.equal(clock.pendingTimers, 0, "the wait's timer is cleared");
    await clock.advance(120_000);
    assert.equal(attempts, 1, "no attempt after the abort");

    let started = false;
    await assert.rejects(
      retrying(() => (started = true), { clock, policy: POLICY, signal: controller.signal }),
      (error) => error === reason,
    );
    assert.equal(started, false);
  });

  it("rejects with the signal's reason when an attempt fails after the abort", async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const reason = new Error("stopped");
    await assert.rejects(
      retrying(() => {
        controller.abort(reason);
        throw new NotFoundError("what the abort caused");
      }, { clock, policy: POLICY, signal: controller.signal }),
      (error) => error === reason,
    );
  });
});

describe("serveAgent: resent requests honour retry_after_ms", { timeout: 30_000 }, () => {
  it("waits as long as the harness says before resending interaction.request", async () => {
    const clock = new ManualClock(Date.now());
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
    const harness = new Peer(harnessEnd, { requestTimeoutMs: 0 });
    harness.onRequest("executor.register", (params) => {
      harness.capabilities = params.capabilities;
      return {
        executor_id: "exec_retry",
        protocol: "bma.executor.v1.1",
        heartbeat_interval_ms: 3_600_000,
      };
    });
    harness.onRequest("executor.heartbeat", () => ({ drain: false }));
    harness.onRequest("session.event", () => ({}));
    harness.onRequest("session.ended", () => ({ ok: true }));
    const requested: number[] = [];
    harness.onRequest("interaction.request", (params) => {
      requested.push(clock.now());
      if (requested.length === 1) {
        throw new UnavailableError("the interaction store is down", {
          reason: "backend_unavailable",
          retry_after_ms: 5_000,
        });
      }
      return {
        interaction_id: params.interaction_id,
        platform_interaction_id: "int_000000000000000000000001",
        status: "open" as const,
      };
    });

    const client = new ExecutorClient({
      harnessUrl: "ws://in-memory/",
      dial: () => Promise.resolve(executorEnd),
      executor: { name: "retry-test", os: "linux", arch: "x64", version: "1.0.0" },
      clock,
      // The client's own backoff is 1 ms: only the hint can make it wait 5 s.
      retry: { initialDelayMs: 1, maxDelayMs: 1, jitter: 0 },
    });
    const answers: InteractionAnswer[] = [];
    serveAgent(client, {
      async runTurn(turn) {
        answers.push(await turn.requestInteraction({ kind: "question", interaction_id: "q-1" }));
      },
    });
    try {
      await client.start();
      await harness.call("turn.start", {
        session_id: "ses_retry",
        turn_id: "t1",
        input: [{ type: "text", text: "ask" }],
      });
      while (requested.length === 0) await turns(1);
      await clock.advance(4_999);
      assert.equal(requested.length, 1, "not resent before retry_after_ms");
      await clock.advance(1);
      while (requested.length < 2) await turns(1);
      assert.equal(requested[1] - requested[0], 5_000);
      assert.deepEqual(
        await harness.call("interaction.response", {
          session_id: "ses_retry",
          interaction_id: "q-1",
          outcome: "answered",
          answer: "yes",
        }),
        { accepted: true },
      );
      while (answers.length === 0) await turns(1);
      assert.equal(answers[0].answer, "yes");
      assert.equal(answers[0].platform_interaction_id, "int_000000000000000000000001");
    } finally {
      const stopped = client.stop();
      // Whatever waits on the test's clock during the stop (grace periods) is let through.
      for (let i = 0; i < 10; i++) await clock.advance(10_000);
      await stopped;
      await harness.close();
    }
  });
});
