/**
 * Secrets (the environment key, the machine token, every JWT) never appear in the client's logs,
 * in the errors it raises, or in the error text it sends to the harness: a run through connect,
 * token refresh, failing handlers, a refused credential and a refused registration, with every
 * log record captured at debug level, then grepped.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock, ToolError } from "../../executor/node.ts";
import { Fixtures, SECRETS, until } from "../helpers/executor-fixture.ts";
import type { CapturingLogger } from "../helpers/raw.ts";

describe("ExecutorClient: secrets", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("keeps the environment key, the machine token and every JWT out of logs and error messages", async () => {
    const clock = new ManualClock();
    const { harness, server } = await fx.harness({ clock, heartbeatIntervalMs: 60_000 });
    const jwts: string[] = [];
    const capturingFetch = async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init);
      const body = await response.clone().json().catch(() => undefined);
      if (typeof body?.token === "string") jwts.push(body.token);
      return response;
    };
    const loggers: CapturingLogger[] = [];
    const errors: unknown[] = [];
    const sentToHarness: unknown[] = [];

    // 1. An environment executor: connect, a refresh, handlers that fail with secrets in hand.
    const { client, logger } = fx.client(server, {
      clock,
      fetch: capturingFetch,
      tokenRefreshLeadMs: 60_000,
    });
    loggers.push(logger);
    client.tools.bash.handle((input) => {
      const leak = `${input.command} ${SECRETS.environmentKey} ${jwts[0]}`;
      if (input.command === "tool-error") throw new ToolError(`tool failed: ${leak}`);
      throw new Error(`handler crashed: ${leak}`);
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    for (const command of ["tool-error", "crash"]) {
      sentToHarness.push(await session.tools.bash.call({ command }));
    }
    for (let minute = 1; minute <= 4; minute++) {
      await clock.advance(60_000);
      await until(() => executor.leaseExpiresAt === clock.now() + 120_000);
    }
    await until(() => logger.records.some((r) => r.message === "executor token refreshed"));
    assert.equal(jwts.length, 2, "two JWTs issued: connect and refresh");

    // 2. A refused credential.
    const refused = fx.client(server, {
      clock,
      fetch: capturingFetch,
      environmentKey: `${SECRETS.environmentKey}-revoked`,
    });
    loggers.push(refused.logger);
    errors.push(await refused.client.start().catch((e) => e));
    errors.push((await refused.client.closed).error);

    // 3. A machine executor whose registration is refused (-32012).
    const machine = fx.client(server, {
      clock,
      fetch: capturingFetch,
      environmentKey: undefined,
      environmentId: undefined,
      machineToken: SECRETS.machineToken,
      machineId: SECRETS.machineId,
    });
    loggers.push(machine.logger);
    errors.push(await machine.client.start().catch((e) => e));
    assert.equal(jwts.length, 3);

    const secrets = [
      SECRETS.environmentKey,
      `${SECRETS.environmentKey}-revoked`,
      SECRETS.machineToken,
      ...jwts,
    ];
    const haystacks = {
      logs: loggers.map((l) => l.text()).join("\n"),
      errors: errors.map((e) =>
        e instanceof Error ? `${e.name}: ${e.message} ${String(e.cause ?? "")}` : String(e)
      ).join("\n"),
      "results sent to the harness": JSON.stringify(sentToHarness),
    };
    assert.ok(haystacks.logs.length > 500, "debug logs were captured");
    assert.ok(haystacks.errors.includes("CredentialRejectedError"));
    assert.ok(haystacks["results sent to the harness"].includes("[redacted]"));
    for (const [where, text] of Object.entries(haystacks)) {
      for (const secret of secrets) {
        assert.ok(!text.includes(secret), `a secret appears in ${where}`);
        // Long secrets must not leak in part either (e.g. a JWT's signature).
        assert.ok(!text.includes(secret.slice(-16)), `a secret's tail appears in ${where}`);
      }
    }
  });
});
