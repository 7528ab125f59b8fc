/**
 * Identity comes from the credential, never from the peer: over real WebSockets on 127.0.0.1,
 * a second principal cannot take an executor id (by `machine_id`, by `resume.executor_id`, by
 * another credential of the same machine) and the executor holding it stays connected; the same
 * principal registering again replaces the older connection (4004), as seed 003 requires; a
 * harness without `authenticate` (a Unix socket) believes what executors register as.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ForbiddenError } from "../../mod.ts";
import {
  type ConnectRequest,
  Harness,
  type HarnessServer,
  type Principal,
} from "../../harness/node.ts";
import { registrationClaim, samePrincipal } from "../../harness/principal.ts";
import { ExecutorClient } from "../../executor/node.ts";
import { ExecutorPeer, registerParams, turns } from "../helpers/executor-peer.ts";

const INFO = { name: "identity-test", os: "linux", arch: "x64", version: "0.0.1" };

/** Tokens and the principals they stand for (a credential store). */
const PRINCIPALS: Record<string, Principal> = {
  // The README's plain authenticate: a valid token, no binding at all.
  plain: {},
  alice: { credentialId: "alice" },
  bob: { credentialId: "bob" },
  m1: { scope: "machine", machineId: "m1", credentialId: "key-m1" },
  "m1-other": { scope: "machine", machineId: "m1", credentialId: "key-m1-other" },
};

function authenticate(request: ConnectRequest): Principal {
  const principal = request.token === undefined ? undefined : PRINCIPALS[request.token];
  if (!principal) throw new Error("unknown credential");
  return principal;
}

const MACHINE = registerParams({ environment_id: "", machine_id: "m1" });

describe("Harness: identity is the credential's", { timeout: 30_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];
  const clients: ExecutorClient[] = [];

  before(async () => {
    harness = new Harness({ authenticate });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  afterEach(async () => {
    for (const peer of peers.splice(0)) {
      // For good: a registered executor is released at once, not held for its lease.
      if (!peer.peer.isClosed) peer.peer.notify("executor.close", { reason: "test over" });
      await peer.close().catch(() => {});
    }
    for (const client of clients.splice(0)) await client.stop().catch(() => {});
    await turns();
  });
  after(async () => {
    await harness.close();
    await server.close();
  });

  async function dial(token: string): Promise<ExecutorPeer> {
    const peer = await ExecutorPeer.dial(server.url, {
      headers: { authorization: `Bearer ${token}` },
    });
    peer.serveDefaults();
    peers.push(peer);
    return peer;
  }

  /** A real executor registered as machine m1 with the machine's own token. */
  async function victim(): Promise<ExecutorClient> {
    const client = new ExecutorClient({
      machineId: "m1",
      tokenSource: () =>
        Promise.resolve({ token: "m1", expiresAt: Date.now() + 3_600_000, url: server.url }),
      executor: INFO,
      // A machine-scoped executor declares process (or agent); bash is all this test calls.
      capabilities: { process: true },
    });
    clients.push(client);
    client.tools.bash.handle(({ command }) => ({
      stdout: `ran ${command}`,
      stderr: "",
      exit_code: 0,
    }));
    await client.start();
    assert.equal(client.executorId, "exec_m1");
    return client;
  }

  /** The victim is still the executor exec_m1, connected, and serves a tool call. */
  async function stillServes(client: ExecutorClient, sessionId: string): Promise<void> {
    assert.equal(client.state, "connected");
    const executor = harness.executor("exec_m1");
    assert.ok(executor?.connected, "exec_m1 is connected");
    assert.equal(executor.principal.credentialId, "key-m1");
    const session = await executor.assignSession({ session_id: sessionId });
    const result = await session.tools.bash.call({ command: "true" });
    assert.equal(result.structured_content?.stdout, "ran true");
    await session.stop("done");
  }

  it("refuses a machine_id claim from a principal without a machine (-32001); the victim stays", async () => {
    const client = await victim();
    for (const token of ["plain", "alice"]) {
      const attacker = await dial(token);
      const error = await attacker.peer.call("executor.register", MACHINE).catch((e) => e);
      assert.ok(error instanceof ForbiddenError, `${token}: ForbiddenError, got ${error}`);
      assert.equal(error.reason, "forbidden");
      // Not registered: the attacker's connection is refused like any unregistered one.
      const heartbeat = await attacker.peer.call("executor.heartbeat", {}).catch((e) => e);
      assert.ok(heartbeat instanceof ForbiddenError);
      assert.equal(heartbeat.reason, "not_registered");
    }
    await turns();
    await stillServes(client, "ses_victim_1");
  });

  it("refuses another credential of the same machine while the machine's executor is held", async () => {
    const client = await victim();
    const other = await dial("m1-other");
    const error = await other.peer.call("executor.register", MACHINE).catch((e) => e);
    assert.ok(error instanceof ForbiddenError, `ForbiddenError, got ${error}`);
    assert.equal(error.reason, "forbidden");
    await turns();
    await stillServes(client, "ses_victim_2");
    // Once the holder is gone for good (executor.close), the machine's other credential may.
    const held = harness.executor("exec_m1")!;
    await client.stop();
    await held.closed;
    const registered = await other.peer.call("executor.register", MACHINE);
    assert.equal(registered.executor_id, "exec_m1");
    assert.equal(harness.executor("exec_m1")?.principal.credentialId, "key-m1-other");
  });

  it("honours resume.executor_id only for the principal that registered it", async () => {
    const owner = await dial("alice");
    const registered = await owner.start(registerParams());
    const id = registered.executor_id;
    const executor = harness.executor(id)!;
    const session = await executor.assignSession({ session_id: "ses_alice" });
    const resume = { executor_id: id, active_sessions: ["ses_alice"] };

    for (const token of ["bob", "plain"]) {
      const thief = await dial(token);
      const taken = await thief.peer.call("executor.register", registerParams({ resume }));
      assert.notEqual(taken.executor_id, id, `${token} got a new id`);
      assert.deepEqual(taken.resumed_sessions, []);
    }
    await turns();
    // The owner's connection, executor and session are untouched.
    assert.equal(owner.peer.isClosed, false);
    assert.equal(harness.executor(id), executor);
    assert.ok(executor.connected);
    assert.notEqual(session.state, "ended");
    assert.equal((await owner.peer.call("executor.heartbeat", {})).drain, false);

    // The same principal resumes it: the older connection is replaced (4004).
    const again = await dial("alice");
    const resumed = await again.peer.call("executor.register", registerParams({ resume }));
    assert.equal(resumed.executor_id, id);
    assert.deepEqual(resumed.resumed_sessions, ["ses_alice"]);
    assert.equal((await owner.peer.closed).code, 4004);
    assert.equal(harness.executor(id), executor);
    assert.notEqual(session.state, "ended");
  });

  it("lets the same machine credential replace its older connection (4004)", async () => {
    const first = await dial("m1");
    assert.equal((await first.start(MACHINE)).executor_id, "exec_m1");
    const second = await dial("m1");
    assert.equal((await second.start(MACHINE)).executor_id, "exec_m1");
    assert.equal((await first.peer.closed).code, 4004);
    assert.ok(harness.executor("exec_m1")?.connected);
    await second.peer.notify("executor.close", { reason: "done" });
  });
});

describe("Harness without authenticate: the socket decides", { timeout: 20_000 }, () => {
  it("believes machine_id on a Unix socket and replaces an older registration (4004)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bma-identity-"));
    const harness = new Harness();
    const server = await harness.serveUnix(join(dir, "harness.sock"));
    try {
      const first = await ExecutorPeer.dial(server.url);
      first.serveDefaults();
      assert.equal((await first.start(MACHINE)).executor_id, "exec_m1");
      const second = await ExecutorPeer.dial(server.url);
      second.serveDefaults();
      assert.equal((await second.start(MACHINE)).executor_id, "exec_m1");
      assert.equal((await first.peer.closed).code, 4004);
      await second.close();
    } finally {
      await harness.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("registrationClaim", () => {
  const env = (environment_id: string, machine_id?: string) =>
    machine_id === undefined ? { environment_id } : { environment_id, machine_id };

  it("binds a machine principal to its machine", () => {
    const m = { scope: "machine" as const, machineId: "m1" };
    assert.deepEqual(registrationClaim(m, env(""), false), {
      kind: "fixed",
      executorId: "exec_m1",
    });
    assert.deepEqual(registrationClaim(m, env("", "m1"), false), {
      kind: "fixed",
      executorId: "exec_m1",
    });
    assert.equal(registrationClaim(m, env("", "m2"), false).kind, "refused");
    assert.equal(registrationClaim(m, env("env_1"), false).kind, "refused");
    assert.equal(registrationClaim({ scope: "machine" }, env(""), false).kind, "refused");
  });

  it("binds an environment principal to its environment", () => {
    const e = { scope: "environment" as const, environmentId: "env_1" };
    assert.deepEqual(registrationClaim(e, env("env_1"), false), { kind: "assigned" });
    assert.equal(registrationClaim(e, env("env_2"), false).kind, "refused");
    assert.equal(registrationClaim(e, env("", "m1"), false).kind, "refused");
    assert.equal(
      registrationClaim({ environmentId: "env_1" }, env("env_2"), false).kind,
      "refused",
    );
  });

  it("lets an unbound principal claim no machine unless nobody authenticated", () => {
    assert.equal(registrationClaim({}, env("", "m1"), false).kind, "refused");
    assert.deepEqual(registrationClaim({}, env("", "m1"), true), {
      kind: "fixed",
      executorId: "exec_m1",
    });
    assert.deepEqual(registrationClaim({}, env("env_9"), false), { kind: "assigned" });
    assert.deepEqual(registrationClaim({ executorId: "exec_x" }, env("env_9"), false), {
      kind: "fixed",
      executorId: "exec_x",
    });
  });

  it("compares principals by every identity member", () => {
    assert.ok(
      samePrincipal({ credentialId: "a", expiresAt: 1 }, { credentialId: "a", expiresAt: 2 }),
    );
    assert.ok(!samePrincipal({ credentialId: "a" }, { credentialId: "b" }));
    assert.ok(!samePrincipal({ machineId: "m1" }, { machineId: "m1", credentialId: "k" }));
    assert.ok(samePrincipal({}, {}));
  });
});
