/**
 * Token refresh: a fresh JWT fetched with the original credential before the current one expires
 * and sent with executor.token.refresh, so the connection outlives its first token; a harness
 * answering -32601 leaves the client to reconnect on 4001. All on the injected clock.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ForbiddenError, ManualClock } from "../../executor/node.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

describe("ExecutorClient: token refresh", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  it("refreshes the JWT before it expires; the connection outlives the first token (project harness)", async () => {
    const clock = new ManualClock();
    const { harness, server } = await fx.harness({ clock, heartbeatIntervalMs: 60_000 });
    const exchanges: string[] = [];
    const { client, logger } = fx.client(server, {
      clock,
      tokenRefreshLeadMs: 60_000,
      fetch: (input, init) => {
        exchanges.push(new URL(String(input)).pathname);
        return fetch(input, init);
      },
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const events: string[] = [];
    // ("registered" itself may still be on its way: only what follows matters.)
    harness.onExecutor((event) => event.type !== "registered" && events.push(event.type));
    const refreshed = () =>
      logger.records.filter((r) => r.message === "executor token refreshed").length;
    // Five-minute tokens, refreshed a minute before expiry: at 4, 8 and 12 minutes.
    for (let minute = 1; minute <= 13; minute++) {
      await clock.advance(60_000);
      await until(() => executor.leaseExpiresAt === clock.now() + 120_000, `heartbeat ${minute}`);
      const due = Math.floor(minute / 4);
      await until(() => refreshed() === due, `refresh ${due}`);
    }
    assert.equal(exchanges.length, 4, "one exchange to connect, one per refresh");
    assert.ok(exchanges.every((path) => path === "/v1/environments/env_test/token"));
    assert.deepEqual(events, [], "never disconnected");
    assert.equal(client.state, "connected");
    assert.equal(executor.connected, true);
  });

  it("keeps going when the harness answers -32601, and reconnects on 4001 with a fresh token", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({
      clock,
      tokenTtlMs: 10_000,
      heartbeatIntervalMs: 60_000,
    });
    scripted.push(harness);
    harness.unserve("executor.token.refresh");
    const { client, logger } = fx.client(harness, {
      clock,
      tokenRefreshLeadMs: 2_000,
      reconnect: { initialDelayMs: 10, jitter: 0 },
    });
    await client.start();
    await harness.last.peer.call("session.assign", { session_id: "ses_1" });
    await clock.advance(8_000);
    await harness.waitForRequests("executor.token.refresh");
    assert.equal(harness.tokensIssued, 2, "the refresh fetched a fresh token first");
    await until(() => logger.records.some((r) => r.message.includes("cannot refresh tokens")));
    assert.equal(client.state, "connected", "-32601 does not end the connection");
    // The harness enforces its deadline.
    await clock.advance(2_000);
    harness.last.peer.close(4001, "token expired");
    await until(() => client.state === "waiting");
    await clock.advance(10);
    await harness.waitForRequests("executor.register", 2);
    assert.equal(harness.tokensIssued, 3);
    assert.equal(
      harness.connections[1].headers.get("authorization"),
      "Bearer scripted.jwt.SECRET-3",
    );
    assert.deepEqual(harness.connections[1].register?.resume?.active_sessions, ["ses_1"]);
    assert.equal(
      harness.requests("executor.token.refresh").length,
      1,
      "no retry on the old connection",
    );
  });

  it("retries a refresh the harness refused while the old token still holds", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({
      clock,
      tokenTtlMs: 10_000,
      heartbeatIntervalMs: 60_000,
    });
    scripted.push(harness);
    let refusals = 1;
    harness.on("executor.token.refresh", () => {
      if (refusals-- > 0) throw new ForbiddenError("token invalid", { reason: "token_invalid" });
      return { expires_at: new Date(clock.now() + 10_000).toISOString() };
    });
    const { client, logger } = fx.client(harness, {
      clock,
      tokenRefreshLeadMs: 2_000,
      retry: { initialDelayMs: 100, jitter: 0 },
    });
    await client.start();
    await clock.advance(8_000);
    await harness.waitForRequests("executor.token.refresh", 1);
    await until(() => logger.records.some((r) => r.message === "token refresh failed; retrying"));
    assert.equal(harness.tokensIssued, 2);
    await clock.advance(100);
    await harness.waitForRequests("executor.token.refresh", 2);
    assert.equal(harness.tokensIssued, 3, "a fresh token for the retry");
    assert.equal(client.state, "connected");
  });
});
