/**
 * The self-hosted token endpoint (http.md) over real HTTP on 127.0.0.1, the JWT checks on
 * connect, the 4001 token deadline and `executor.token.refresh` on the injectable clock, and
 * artifact uploads; credentials refused at construction, a removed credential's tokens refused,
 * and a standby that sends token exchanges and uploads to the store's holder.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ForbiddenError, ManualClock, MethodNotFoundError } from "../../mod.ts";
import {
  type ExecutorCredential,
  Harness,
  type HarnessServer,
  type HolderIdentity,
  InvalidCredentialError,
  MemoryHarnessStore,
  type TokenResponse,
} from "../../harness/node.ts";
import { DialError } from "../../mod.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { CapturingLogger } from "../helpers/raw.ts";
import { ExecutorPeer, OFFERED, registerParams, turns } from "../helpers/executor-peer.ts";

const ENV_KEY = "ek_live_6b1f0c2d9e";
const MACHINE_TOKEN = "mt_live_9a8b7c6d5e";
const OTHER_MACHINE_TOKEN = "mt_live_0f1e2d3c4b";
const SECRET = crypto.getRandomValues(new Uint8Array(32));

describe("Harness: token endpoint", { timeout: 20_000 }, () => {
  let clock: ManualClock;
  let harness: Harness;
  let server: HarnessServer;
  let logger: CapturingLogger;
  const peers: ExecutorPeer[] = [];
  const issued: string[] = [];

  before(async () => {
    clock = new ManualClock();
    logger = new CapturingLogger();
    harness = new Harness({
      clock,
      logger,
      // Leases longer than the tokens, so only the token deadline closes connections here.
      heartbeatIntervalMs: 600_000,
      tokens: {
        secret: SECRET,
        credentials: [
          { environmentId: "env_1", environmentKey: ENV_KEY },
          { machineId: "m_1", machineToken: MACHINE_TOKEN },
          { machineId: "m_2", machineToken: OTHER_MACHINE_TOKEN },
        ],
      },
    });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  afterEach(async () => {
    for (const peer of peers.splice(0)) await peer.close().catch(() => {});
  });
  after(async () => {
    await harness.close();
    await server.close();
    // Secrets never reach a log sink.
    const logged = logger.text();
    for (const secret of [ENV_KEY, MACHINE_TOKEN, OTHER_MACHINE_TOKEN, ...issued]) {
      assert.ok(!logged.includes(secret), "a secret was logged");
    }
  });

  async function post(path: string, init: { bearer?: string; body?: unknown } = {}) {
    const response = await fetch(`${server.httpUrl}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(init.bearer ? { authorization: `Bearer ${init.bearer}` } : {}),
      },
      body: JSON.stringify(init.body ?? {}),
    });
    return { status: response.status, body: await response.json() as any };
  }

  async function token(kind: "environment" | "machine" | "machine2"): Promise<TokenResponse> {
    const { status, body } = kind === "environment"
      ? await post("/v1/environments/env_1/token", { bearer: ENV_KEY })
      : kind === "machine"
      ? await post("/v1/machines/m_1/token", { bearer: MACHINE_TOKEN })
      : await post("/v1/machines/m_2/token", { bearer: OTHER_MACHINE_TOKEN });
    assert.equal(status, 200);
    issued.push(body.token);
    return body;
  }

  async function connectMachine(jwt: string) {
    const peer = await ExecutorPeer.dial(server.url, {
      headers: { authorization: `Bearer ${jwt}` },
    });
    peers.push(peer);
    await peer.start(registerParams({ environment_id: "", machine_id: "m_1" }));
    return peer;
  }

  it("exchanges an environment key for a JWT valid five minutes", async () => {
    const body = await token("environment");
    assert.equal(body.token.split(".").length, 3);
    assert.equal(body.expires_in, 300);
    assert.equal(Date.parse(body.expires_at), clock.now() + 300_000);
    assert.equal(body.url, `${server.url}/v1/executors/connect`);
    assert.equal(body.executor_id, undefined);
    const claims = JSON.parse(atob(body.token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    assert.equal(claims.scope, "environment");
    assert.equal(claims.env, "env_1");
    assert.equal(claims.exp - claims.iat, 300);
    assert.match(claims.cred, /^cred_/);
  });

  it("serves the legacy alias with environment_id in the body", async () => {
    const ok = await post("/v1/executors/token", {
      bearer: ENV_KEY,
      body: { environment_id: "env_1" },
    });
    assert.equal(ok.status, 200);
    issued.push(ok.body.token);
    const missing = await post("/v1/executors/token", { bearer: ENV_KEY, body: {} });
    assert.deepEqual(missing, { status: 400, body: { error: "bad_request" } });
  });

  it("exchanges a machine token for a JWT naming exec_<machine_id>", async () => {
    const body = await token("machine");
    assert.equal(body.executor_id, "exec_m_1");
  });

  it("logs a stream of refused exchanges and upgrades once a second, counting the lines left out", async () => {
    await clock.advance(1_000);
    const lines = (message: string) => logger.records.filter((r) => r.message === message);
    const exchanges = lines("token exchange refused").length;
    const upgrades = lines("connection refused before upgrade").length;
    for (let i = 0; i < 20; i++) {
      assert.equal(
        (await post("/v1/environments/env_1/token", { bearer: `guess_${i}` })).status,
        401,
      );
      await assert.rejects(
        dialWebSocket(server.url, { protocols: OFFERED, headers: { authorization: "Bearer x" } }),
        (error: unknown) => error instanceof DialError && error.status === 401,
      );
    }
    assert.equal(lines("token exchange refused").length, exchanges + 1);
    assert.equal(lines("connection refused before upgrade").length, upgrades + 1);
    await clock.advance(1_000);
    assert.equal((await post("/v1/environments/env_1/token", { bearer: "guess" })).status, 401);
    await assert.rejects(
      dialWebSocket(server.url, { protocols: OFFERED, headers: { authorization: "Bearer x" } }),
    );
    assert.equal(lines("token exchange refused").at(-1)?.fields?.lines_left_out, 19);
    assert.equal(lines("connection refused before upgrade").at(-1)?.fields?.lines_left_out, 19);
  });

  it("refuses unknown or wrong credentials with 401 invalid_credential", async () => {
    const refused = { status: 401, body: { error: "invalid_credential" } };
    assert.deepEqual(await post("/v1/environments/env_1/token", { bearer: "wrong" }), refused);
    assert.deepEqual(await post("/v1/environments/env_2/token", { bearer: ENV_KEY }), refused);
    assert.deepEqual(
      await post("/v1/machines/m_1/token", { bearer: OTHER_MACHINE_TOKEN }),
      refused,
    );
    assert.deepEqual(await post("/v1/machines/m_1/token", { bearer: ENV_KEY }), refused);
    assert.deepEqual(await post("/v1/machines/m_1/token"), refused);
  });

  it("verifies the JWT on connect: a tampered, foreign or expired token is HTTP 401", async () => {
    const good = (await token("machine")).token;
    const [header, payload, signature] = good.split(".");
    const forged = JSON.parse(atob(payload.replace(/-/g, "+").replace(/_/g, "/")));
    forged.mid = "m_2";
    const tampered = `${header}.${
      btoa(JSON.stringify(forged)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
    }.${signature}`;
    for (const bad of [tampered, "not.a.jwt", ENV_KEY, `${header}.${payload}.`]) {
      await assert.rejects(
        dialWebSocket(server.url, {
          protocols: OFFERED,
          headers: { authorization: `Bearer ${bad}` },
        }),
        (error: unknown) => error instanceof DialError && error.status === 401,
      );
    }
    const expiring = (await token("machine")).token;
    await clock.advance(300_000);
    await assert.rejects(
      dialWebSocket(server.url, {
        protocols: OFFERED,
        headers: { authorization: `Bearer ${expiring}` },
      }),
      (error: unknown) => error instanceof DialError && error.status === 401,
    );
  });

  it("registers with a verified machine JWT as exec_<machine_id>", async () => {
    const peer = await connectMachine((await token("machine")).token);
    const executor = await harness.waitExecutor({ filter: (e) => e.id === "exec_m_1" });
    assert.equal(executor.principal.scope, "machine");
    assert.equal(executor.principal.machineId, "m_1");
    assert.ok(peer.peer.isClosed === false, "peer.peer.isClosed === false");
  });

  it("refuses to register a machine JWT under another machine id (-32001)", async () => {
    const jwt = (await token("machine")).token;
    const peer = await ExecutorPeer.dial(server.url, {
      headers: { authorization: `Bearer ${jwt}` },
    });
    peers.push(peer);
    peer.serveDefaults();
    const error = await peer.peer.call(
      "executor.register",
      registerParams({ environment_id: "", machine_id: "m_2" }),
    ).catch((e) => e);
    assert.ok(error instanceof ForbiddenError, "error instanceof ForbiddenError");
  });

  it("closes the connection with 4001 when its token expires", async () => {
    const peer = await connectMachine((await token("machine")).token);
    await clock.advance(299_999);
    assert.ok(!peer.peer.isClosed, "!peer.peer.isClosed");
    await clock.advance(1);
    assert.equal((await peer.peer.closed).code, 4001);
  });

  it("executor.token.refresh with a fresh token of the same credential moves the deadline", async () => {
    const peer = await connectMachine((await token("machine")).token);
    const connectedAt = clock.now();
    await clock.advance(200_000);
    const fresh = await token("machine");
    const result = await peer.peer.call("executor.token.refresh", { token: fresh.token });
    assert.equal(result.expires_at, fresh.expires_at);
    assert.equal(Date.parse(result.expires_at), connectedAt + 500_000);
    await clock.advance(100_000); // the first token's expiry passes
    assert.ok(!peer.peer.isClosed, "!peer.peer.isClosed");
    await clock.advance(199_999);
    assert.ok(!peer.peer.isClosed, "!peer.peer.isClosed");
    await clock.advance(1);
    assert.equal((await peer.peer.closed).code, 4001);
  });

  it("a rejected token leaves the old deadline in place", async () => {
    const peer = await connectMachine((await token("machine")).token);
    await clock.advance(100_000);
    const foreign = await token("machine2");
    const mismatch = await peer.peer.call("executor.token.refresh", { token: foreign.token })
      .catch((e) => e);
    assert.ok(mismatch instanceof ForbiddenError, "mismatch instanceof ForbiddenError");
    assert.equal(mismatch.reason, "token_mismatch");
    const envToken = await token("environment");
    const scope = await peer.peer.call("executor.token.refresh", { token: envToken.token })
      .catch((e) => e);
    assert.equal(scope.reason, "token_mismatch");
    const garbage = await peer.peer.call("executor.token.refresh", { token: "garbage" })
      .catch((e) => e);
    assert.ok(garbage instanceof ForbiddenError, "garbage instanceof ForbiddenError");
    assert.equal(garbage.reason, "token_invalid");
    await clock.advance(199_999);
    assert.ok(!peer.peer.isClosed, "!peer.peer.isClosed");
    await clock.advance(1);
    assert.equal((await peer.peer.closed).code, 4001);
  });

  it("takes artifact uploads authenticated by the JWT", async () => {
    const jwt = (await token("environment")).token;
    const bytes = new TextEncoder().encode("x".repeat(100_000));
    const upload = (path: string, bearer?: string) =>
      fetch(`${server.httpUrl}${path}`, {
        method: "POST",
        headers: {
          "content-type": "text/plain",
          "x-artifact-name": encodeURIComponent("build log.txt"),
          ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
        },
        body: bytes,
      });
    const created = await upload("/v1/environments/env_1/artifacts", jwt);
    assert.equal(created.status, 201);
    const artifact = await created.json() as any;
    assert.match(artifact.artifact_id, /^art_/);
    assert.equal(artifact.name, "build log.txt");
    assert.equal(artifact.size, 100_000);
    assert.equal(artifact.mime_type, "text/plain");
    const stored = await harness.artifacts.get(artifact.artifact_id);
    assert.deepEqual(stored?.bytes, bytes);
    assert.equal((await upload("/v1/executors/artifacts", jwt)).status, 201);
    assert.equal((await upload("/v1/environments/env_1/artifacts")).status, 401);
    assert.equal((await upload("/v1/environments/env_2/artifacts", jwt)).status, 403);
  });
});

describe("Harness: token refresh without authenticate", { timeout: 20_000 }, () => {
  it("answers executor.token.refresh with -32601 on a harness that verifies no tokens", async () => {
    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve();
    const peer = await ExecutorPeer.dial(server.url);
    await peer.start();
    const error = await peer.peer.call("executor.token.refresh", { token: "anything" })
      .catch((e) => e);
    assert.ok(error instanceof MethodNotFoundError, "error instanceof MethodNotFoundError");
    const refused = await fetch(`${server.httpUrl}/v1/environments/env_1/token`, {
      method: "POST",
      headers: { authorization: "Bearer x" },
    });
    assert.equal(refused.status, 404, "no token endpoint without tokens");
    await refused.body?.cancel();
    await peer.close();
    await turns();
    await harness.close();
    await server.close();
  });
});

describe("Harness: the credentials it takes, and tokens it no longer honours", {
  timeout: 20_000,
}, () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("refuses at construction a credential no request could match: an empty id or secret, a secret with whitespace", () => {
    const cases: ExecutorCredential[] = [
      { environmentId: "", environmentKey: ENV_KEY },
      { environmentId: "env_1", environmentKey: "" },
      { machineId: "", machineToken: MACHINE_TOKEN },
      { machineId: "m_1", machineToken: "" },
      { environmentId: "env_1", environmentKey: `${ENV_KEY} more` },
      { machineId: "m_1", machineToken: `${MACHINE_TOKEN}\n` },
      { environmentId: "env_1", environmentKey: `${ENV_KEY}ключ` },
      { environmentId: "env_1", environmentKey: ENV_KEY, id: "" },
      { environmentId: "env_2", environmentKey: MACHINE_TOKEN, id: "cred_ok" },
    ];
    for (const credential of cases) {
      assert.throws(
        () =>
          new Harness({
            tokens: {
              secret: SECRET,
              credentials: [
                { environmentId: "env_ok", environmentKey: ENV_KEY, id: "cred_ok" },
                credential,
              ],
            },
          }),
        (error: unknown) => {
          assert.ok(error instanceof InvalidCredentialError, String(error));
          assert.match(error.message, /^credential 2: /);
          for (const secret of [ENV_KEY, MACHINE_TOKEN]) {
            assert.ok(!error.message.includes(secret), "the secret is not quoted");
          }
          return true;
        },
        JSON.stringify(Object.keys(credential)),
      );
    }
  });

  it("refuses a token of a credential it no longer has (a key removed), before the token expires", async () => {
    const REMOVED_KEY = "ek_live_removed_1234";
    const before = new Harness({
      tokens: {
        secret: SECRET,
        credentials: [
          { environmentId: "env_1", environmentKey: ENV_KEY },
          { environmentId: "env_1", environmentKey: REMOVED_KEY },
        ],
      },
    });
    closers.push(() => before.close());
    const old = await before.serve({ hostname: "127.0.0.1", port: 0 });
    closers.push(() => old.close());
    const exchange = async (key: string) => {
      const response = await fetch(`${old.httpUrl}/v1/environments/env_1/token`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(response.status, 200);
      return ((await response.json()) as TokenResponse).token;
    };
    const kept = await exchange(ENV_KEY);
    const removed = await exchange(REMOVED_KEY);
    // The same secret, the key removed: a restart with the new credentials.
    const after = new Harness({
      tokens: {
        secret: SECRET,
        credentials: [{ environmentId: "env_1", environmentKey: ENV_KEY }],
      },
    });
    closers.push(() => after.close());
    const server = await after.serve({ hostname: "127.0.0.1", port: 0 });
    closers.push(() => server.close());
    await assert.rejects(
      dialWebSocket(server.url, {
        protocols: OFFERED,
        headers: { authorization: `Bearer ${removed}` },
      }),
      (error: unknown) => error instanceof DialError && error.status === 401,
    );
    const transport = await dialWebSocket(server.url, {
      protocols: OFFERED,
      headers: { authorization: `Bearer ${kept}` },
    });
    transport.close();
    await transport.closed;

    // A custom id given to another environment's key does not keep the removed key's tokens.
    const reusing = new Harness({
      tokens: {
        secret: SECRET,
        credentials: [{ environmentId: "env_2", environmentKey: ENV_KEY, id: "ci" }],
      },
    });
    closers.push(() => reusing.close());
    const issuing = new Harness({
      tokens: {
        secret: SECRET,
        credentials: [{ environmentId: "env_1", environmentKey: REMOVED_KEY, id: "ci" }],
      },
    });
    closers.push(() => issuing.close());
    const issuer = await issuing.serve({ hostname: "127.0.0.1", port: 0 });
    closers.push(() => issuer.close());
    const got = await fetch(`${issuer.httpUrl}/v1/environments/env_1/token`, {
      method: "POST",
      headers: { authorization: `Bearer ${REMOVED_KEY}` },
    });
    const env1Token = ((await got.json()) as TokenResponse).token;
    const other = await reusing.serve({ hostname: "127.0.0.1", port: 0 });
    closers.push(() => other.close());
    await assert.rejects(
      dialWebSocket(other.url, {
        protocols: OFFERED,
        headers: { authorization: `Bearer ${env1Token}` },
      }),
      (error: unknown) => error instanceof DialError && error.status === 401,
    );
  });

  it("a standby answers token exchanges and artifact uploads 503 (retry-after: 1) until it holds the store", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const identity = (host: string, pid: number): HolderIdentity => ({
      host,
      pid,
      processStarted: 1,
      alive: () => true,
    });
    const tokens = {
      secret: SECRET,
      credentials: [{ environmentId: "env_1", environmentKey: ENV_KEY }],
    };
    const holder = new Harness({ store, tokens, holderIdentity: identity("a", 10) });
    closers.push(() => holder.close());
    const clock = new ManualClock();
    const standby = new Harness({
      store,
      tokens,
      clock,
      holderIdentity: identity("b", 20),
      standby: true,
      storeRenewMs: 1_000,
    });
    closers.push(() => standby.close());
    const server = await standby.serve({ hostname: "127.0.0.1", port: 0 });
    closers.push(() => server.close());
    assert.equal(standby.readiness, "standby");
    const ask = (path: string) =>
      fetch(`${server.httpUrl}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ENV_KEY}` },
        body: path.endsWith("/token") ? "{}" : "bytes",
      });
    for (const path of ["/v1/environments/env_1/token", "/v1/executors/token"]) {
      const refused = await ask(path);
      assert.equal(refused.status, 503, path);
      assert.equal(refused.headers.get("retry-after"), "1", path);
      assert.deepEqual(await refused.json(), { error: "standby" }, path);
    }
    const upload = await ask("/v1/environments/env_1/artifacts");
    assert.equal(upload.status, 503);
    assert.deepEqual(await upload.json(), { error: "standby" });
    // The holder lets go: the standby takes the store at its next try, and issues tokens.
    await holder.close();
    await clock.advance(1_000);
    await standby.ready;
    const issued = await ask("/v1/environments/env_1/token");
    assert.equal(issued.status, 200);
    assert.equal(typeof ((await issued.json()) as TokenResponse).token, "string");
  });
});
