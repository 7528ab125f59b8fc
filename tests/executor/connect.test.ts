/**
 * Connecting: token exchange, subprotocol negotiation, executor.register, and the typed errors of
 * start(). Against the project's Harness (real WebSocket on 127.0.0.1, real token endpoint),
 * and a scripted harness for the refusals the real one only produces on a broken client.
 */
import { after, afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CapabilityMissingError,
  ConnectionRefusedError,
  CredentialRejectedError,
  ExecutorClient,
  ExecutorConfigError,
  LOCAL_ENVIRONMENT_ID,
} from "../../executor/node.ts";
import { Harness } from "../../harness/node.ts";
import { ProtocolMismatchError } from "../../mod.ts";
import { EXECUTOR_INFO, Fixtures, SECRETS } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

const scripted: ScriptedHarness[] = [];
async function scriptedHarness(): Promise<ScriptedHarness> {
  const harness = await ScriptedHarness.start();
  scripted.push(harness);
  return harness;
}

describe("ExecutorClient: connecting", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  it("exchanges the environment key for a JWT and registers with the negotiated protocol, its info and capabilities", async () => {
    const { harness, server } = await fx.harness();
    const fetched: string[] = [];
    const { client } = fx.client(server, {
      maxSessions: 3,
      fetch: (input, init) => {
        fetched.push(new URL(String(input)).pathname);
        return fetch(input, init);
      },
    });
    client.tools.bash.handle(() => "ok");
    const registration = await client.start();
    assert.equal(registration.protocol, "bma.executor.v1.1");
    assert.equal(client.executorId, registration.executor_id);
    assert.deepEqual(fetched, [`/v1/environments/${SECRETS.environmentId}/token`]);
    const executor = await harness.waitExecutor();
    assert.equal(executor.id, registration.executor_id);
    assert.equal(executor.protocol, "bma.executor.v1.1");
    assert.equal(executor.environmentId, SECRETS.environmentId);
    assert.deepEqual(executor.info, EXECUTOR_INFO);
    assert.equal(executor.maxSessions, 3);
    // Only the tool with a handler, and its group.
    assert.deepEqual(executor.capabilities, { tools: ["bash"], shell: { enabled: true } });
    assert.equal(client.state, "connected");
  });

  it("offers both subprotocols and registers with the one the harness picked", async () => {
    const harness = await scriptedHarness();
    harness.pickProtocol = "bma.executor.v1";
    const { client } = fx.client(harness);
    const registration = await client.start();
    assert.equal(registration.protocol, "bma.executor.v1");
    assert.equal(harness.last.register?.protocol, "bma.executor.v1");
    assert.equal(harness.last.headers.get("authorization"), "Bearer scripted.jwt.SECRET-1");
    assert.deepEqual(
      harness.last.headers.get("sec-websocket-protocol")?.split(",").map((p) => p.trim()),
      ["bma.executor.v1.1", "bma.executor.v1"],
      "both offered, preferred first",
    );
  });

  it("registers a machine token as exec_<machine_id> with an empty environment_id", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, {
      environmentKey: undefined,
      environmentId: undefined,
      machineToken: SECRETS.machineToken,
      machineId: SECRETS.machineId,
    });
    // A machine-scoped executor must serve the process capability (or agent).
    client.onRequest("process.list", () => ({ processes: [] }));
    const registration = await client.start();
    assert.equal(registration.executor_id, `exec_${SECRETS.machineId}`);
    const executor = await harness.waitExecutor();
    assert.equal(executor.environmentId, "");
    assert.equal(executor.machineId, SECRETS.machineId);
    assert.equal(executor.capabilities.process, true);
  });

  it("start() rejects with CapabilityMissingError (data.reason, data.capability) for a machine executor without process", async () => {
    const { server } = await fx.harness();
    const { client } = fx.client(server, {
      environmentKey: undefined,
      environmentId: undefined,
      machineToken: SECRETS.machineToken,
      machineId: SECRETS.machineId,
    });
    client.tools.bash.handle(() => "ok");
    const error = await client.start().then(() => undefined, (e) => e);
    assert.ok(error instanceof CapabilityMissingError, String(error));
    assert.equal(error.code, -32012);
    assert.deepEqual(error.data, { reason: "capability_missing", capability: "process" });
    const closed = await client.closed;
    assert.equal(closed.reason, "register_refused");
    assert.equal(closed.error, error);
    assert.equal(client.state, "stopped");
  });

  it("start() rejects with ProtocolMismatchError on -32010", async () => {
    const harness = await scriptedHarness();
    harness.on("executor.register", () => {
      throw new ProtocolMismatchError("protocol mismatch", {
        reason: "protocol_mismatch",
        expected: "bma.executor.v1.1",
        received: "bma.executor.v1",
      });
    });
    const { client } = fx.client(harness);
    const error = await client.start().then(() => undefined, (e) => e);
    assert.ok(error instanceof ProtocolMismatchError, String(error));
    assert.equal(error.code, -32010);
    assert.equal(error.reason, "protocol_mismatch");
    assert.equal((await client.closed).reason, "register_refused");
    assert.equal(harness.connections.length, 1, "no second attempt");
  });

  it("a registration answered with another protocol than the negotiated one closes 4003 and stops", async () => {
    const harness = await scriptedHarness();
    harness.on("executor.register", () => ({
      executor_id: "exec_other",
      protocol: "bma.executor.v1",
      heartbeat_interval_ms: 1000,
    }));
    const { client } = fx.client(harness);
    const error = await client.start().then(() => undefined, (e) => e);
    assert.ok(error instanceof ProtocolMismatchError, String(error));
    assert.deepEqual(error.data, {
      reason: "protocol_mismatch",
      expected: "bma.executor.v1.1",
      received: "bma.executor.v1",
    });
    assert.equal((await client.closed).reason, "register_refused");
    assert.equal((await harness.connections[0].peer.closed).code, 4003);
    assert.equal(harness.connections.length, 1, "no second attempt");
    assert.equal(client.executorId, undefined);
  });

  it("start() rejects with CredentialRejectedError when the token endpoint answers 401, and stops", async () => {
    const { server } = await fx.harness();
    const { client } = fx.client(server, { environmentKey: "ek_wrong_key" });
    const error = await client.start().then(() => undefined, (e) => e);
    assert.ok(error instanceof CredentialRejectedError, String(error));
    assert.equal(error.status, 401);
    assert.equal(error.errorCode, "invalid_credential");
    assert.equal((await client.closed).reason, "credential_rejected");
  });

  it("stops when the harness refuses the upgrade with 401", async () => {
    const harness = await scriptedHarness();
    harness.refuseUpgrade = 401;
    const { client } = fx.client(harness);
    const error = await client.start().then(() => undefined, (e) => e);
    assert.ok(error instanceof ConnectionRefusedError, String(error));
    assert.equal(error.status, 401);
    assert.equal((await client.closed).reason, "connection_refused");
  });

  it("drops a trailing /api/v1 and falls back to the legacy token path", async () => {
    const harness = await scriptedHarness();
    harness.missingPaths = /^\/v1\/environments\//;
    const { client } = fx.client({ httpUrl: `${harness.httpUrl}/api/v1/` });
    await client.start();
    assert.deepEqual(harness.tokenRequests.map((r) => r.path), [
      `/v1/environments/${SECRETS.environmentId}/token`,
      "/v1/executors/token",
    ]);
    const legacy = harness.tokenRequests[1];
    assert.equal(legacy.authorization, `Bearer ${SECRETS.environmentKey}`);
    assert.deepEqual(JSON.parse(legacy.body), { environment_id: SECRETS.environmentId });
    assert.equal(harness.last.register?.environment_id, SECRETS.environmentId);
  });

  it("uses a custom tokenSource, which carries its own channel URL", async () => {
    const { harness, server } = await fx.harness();
    let calls = 0;
    const { client } = fx.client(server, {
      baseUrl: undefined,
      environmentKey: undefined,
      tokenSource: async ({ signal }) => {
        calls++;
        const response = await fetch(
          `${server.httpUrl}/v1/environments/${SECRETS.environmentId}/token`,
          {
            method: "POST",
            headers: { authorization: `Bearer ${SECRETS.environmentKey}` },
            body: "{}",
            signal,
          },
        );
        const body = await response.json();
        return { token: body.token, expiresAt: body.expires_at, url: body.url };
      },
    });
    await client.start();
    assert.equal(calls, 1);
    const executor = await harness.waitExecutor();
    assert.equal(executor.environmentId, SECRETS.environmentId);
  });

  it("connects to a local harness with harnessUrl over a Unix socket, without token exchange", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-exec-"));
    const harness = new Harness();
    const local = await harness.serveUnix(join(dir, "harness.sock"));
    fx.defer(async () => {
      await harness.close();
      await local.close();
      rmSync(dir, { recursive: true, force: true });
    });
    assert.ok(local.url.startsWith("unix://"));
    const client = new ExecutorClient({ harnessUrl: local.url, executor: EXECUTOR_INFO });
    fx.defer(() => client.stop().then(() => {}));
    client.tools.bash.handle(() => ({ stdout: "local", stderr: "", exit_code: 0 }));
    await client.start();
    const executor = await harness.waitExecutor();
    assert.equal(executor.environmentId, LOCAL_ENVIRONMENT_ID);
    const session = await executor.assignSession({ session_id: "ses_local" });
    const result = await session.tools.bash.call({ command: "true" });
    assert.equal(result.outcome, "completed");
    assert.equal(result.structured_content?.stdout, "local");
  });

  it("refuses options that cannot work", async () => {
    // Without a credential only listen() can work (the harness dials in): start() refuses.
    await assert.rejects(
      new ExecutorClient({ executor: EXECUTOR_INFO }).start(),
      ExecutorConfigError,
    );
    assert.throws(
      () =>
        new ExecutorClient({ environmentKey: "k", baseUrl: "http://x", executor: EXECUTOR_INFO }),
      ExecutorConfigError,
    );
    assert.throws(
      () =>
        new ExecutorClient({
          harnessUrl: "ws://127.0.0.1:1",
          executor: EXECUTOR_INFO,
          maxSessions: 0,
        }),
      ExecutorConfigError,
    );
  });
});

after(async () => {
  for (const harness of scripted.splice(0)) await harness.close();
});
