/**
 * Harness and executor both from this SDK (`Harness`, `ExecutorClient`), over real WebSockets
 * on 127.0.0.1 with the harness's own token endpoint: the harness end's behaviour as a real
 * executor sees it.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CapabilityNotAdvertisedError,
  ManualClock,
  ResourceExhaustedError,
} from "../../executor/node.ts";
import type { FsMountParams } from "../../protocol/mod.ts";
import { ToolOutcomeUnknownError } from "../../harness/node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { Fixtures, SECRETS, until } from "../helpers/executor-fixture.ts";

describe("Harness with ExecutorClient", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("exchanges a token, registers, runs a session with a typed tool call and durable events, stops", async () => {
    const { harness, server, logger } = await fx.harness();
    const { client } = fx.client(server);
    const stopped: string[] = [];
    client.onSessionStop((session, params) => void stopped.push(`${session.id}:${params.reason}`));
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    client.tools.bash.handle((input) => ({
      stdout: `ran ${input.command}`,
      stderr: "",
      exit_code: 0,
    }));
    const registration = await client.start();
    const executor = await harness.waitExecutor();
    assert.equal(executor.id, registration.executor_id);
    assert.equal(executor.protocol, "bma.executor.v1.1");
    assert.equal(executor.principal.scope, "environment");
    assert.equal(executor.environmentId, SECRETS.environmentId);
    assert.deepEqual(executor.capabilities.tools, ["bash"]);

    const session = await executor.assignSession({ session_id: "ses_e2e" });
    await session.ready();
    const result = await session.tools.bash.call({ command: "ls" });
    assert.equal(result.outcome, "completed");
    assert.equal(result.structured_content?.stdout, "ran ls");

    const reading = (async () => {
      const seen: string[] = [];
      for await (const record of session.events()) seen.push(record.event.type);
      return seen;
    })();
    for (const type of ["one", "two", "three"]) {
      await client.call("session.event", { session_id: "ses_e2e", event: { type } });
    }
    assert.deepEqual(await session.stop("done"), { reason: "done" });
    assert.deepEqual(await reading, ["one", "two", "three"]);
    assert.deepEqual(stopped, ["ses_e2e:done"]);
    const logged = logger.text();
    assert.equal(logged.includes(SECRETS.environmentKey), false, "no key in the harness log");
  });

  it("runs a call once when it is repeated with the same tool_call_id", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    let runs = 0;
    client.tools.bash.handle(async () => {
      runs++;
      await new Promise((resolve) => setTimeout(resolve, 0));
      return { stdout: `run ${runs}`, stderr: "", exit_code: 0 };
    });
    await client.start();
    const session = await (await harness.waitExecutor()).assignSession({ session_id: "ses_idem" });
    const calls = await Promise.all(
      [1, 2, 3].map(() => session.tools.bash.call({ command: "x" }, { toolCallId: "call_once" })),
    );
    const again = await session.tools.bash.call({ command: "x" }, { toolCallId: "call_once" });
    assert.equal(runs, 1);
    for (const call of [...calls, again]) assert.equal(call.structured_content?.stdout, "run 1");
  });

  it("surfaces -32009 beyond the executor's maxSessions as ResourceExhaustedError", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, { maxSessions: 1 });
    client.tools.bash.handle(() => "ok");
    await client.start();
    const executor = await harness.waitExecutor();
    assert.equal(executor.maxSessions, 1);
    await executor.assignSession({ session_id: "ses_one" });
    await assert.rejects(executor.assignSession({ session_id: "ses_two" }), ResourceExhaustedError);
    assert.equal(harness.sessions.has("ses_two"), false);
  });

  it("fails a pending call with ToolOutcomeUnknownError when the lease expires (close 4005)", async () => {
    const harnessClock = new ManualClock();
    const { harness, server } = await fx.harness({
      clock: harnessClock,
      heartbeatIntervalMs: 1_000,
    });
    // The executor's own clock stands still: it never heartbeats.
    const { client } = fx.client(server, { clock: new ManualClock() });
    client.tools.bash.handle(() => new Promise(() => {}));
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_lease" });
    const pending = session.tools.bash.call({ command: "forever" }).catch((e) => e);
    await until(() => client.sessions[0]?.id === "ses_lease", "the assignment");
    await harnessClock.advance(2_000);
    const error = await pending;
    assert.ok(error instanceof ToolOutcomeUnknownError, String(error));
    assert.equal(error.reason, "lease_expired");
    assert.deepEqual(await executor.closed, { reason: "lease_expired" });
    await until(() => client.state !== "connected", "the client saw 4005");
  });

  it("keeps durable events exactly once and in order across network cuts", async () => {
    const { harness, server } = await fx.harness();
    const proxy = await ChaosProxy.start(server.url);
    fx.defer(() => proxy.close());
    const { client } = fx.client(server, { harnessUrl: proxy.url });
    client.tools.bash.handle(() => "ok");
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_cuts" });
    const sent: Promise<unknown>[] = [];
    for (let batch = 0; batch < 5; batch++) {
      for (let i = batch * 60; i < (batch + 1) * 60; i++) {
        const event = { type: "tick", n: i };
        sent.push(client.call("session.event", { session_id: "ses_cuts", event }));
      }
      // Cut while the batch is in flight, then let the client come back.
      await new Promise((resolve) => setTimeout(resolve, 0));
      const accepted = proxy.accepted;
      assert.equal(proxy.cut(), 1, "the cut hits the open connection");
      await until(
        () => proxy.accepted > accepted && client.state === "connected" && executor.connected,
        "the reconnect",
      );
    }
    await Promise.all(sent);
    assert.equal(proxy.cuts, 5);
    assert.equal(harness.executor(executor.id), executor, "resumed within the lease");
    const ns = session.eventRecords.map((r) => (r.event as { n?: number }).n);
    assert.deepEqual(ns, Array.from({ length: 300 }, (_, i) => i));
  });

  it("replaces a machine executor's connection on a new registration (4004); the old client stops", async () => {
    const { harness, server } = await fx.harness();
    const machine = {
      environmentKey: undefined,
      environmentId: undefined,
      machineToken: SECRETS.machineToken,
      machineId: SECRETS.machineId,
    };
    const first = fx.client(server, machine).client;
    first.onRequest("process.list", () => ({ processes: [] }));
    await first.start();
    const executor = await harness.waitExecutor();
    assert.equal(executor.id, `exec_${SECRETS.machineId}`);
    const second = fx.client(server, machine).client;
    second.onRequest("process.list", () => ({ processes: [] }));
    await second.start();
    const closed = await first.closed;
    assert.equal(closed.code, 4004);
    assert.equal(harness.executor(executor.id), executor);
    assert.equal(executor.connected, true);
    assert.deepEqual(await executor.request("process.list", { session_id: "ses_x" }), {
      processes: [],
    });
  });

  it("gates fs.mount by fs.fuse and carries typed mount results from a pluggable mounter", async () => {
    const { harness, server } = await fx.harness({ fileServiceUrl: "https://files.example" });
    const plain = fx.client(server).client;
    plain.tools.bash.handle(() => "ok");
    await plain.start();
    const withoutFuse = await harness.waitExecutor();
    await assert.rejects(
      withoutFuse.mount("ses_x", [{ view: "v", path: "/mnt/v", token: "t" }]),
      CapabilityNotAdvertisedError,
    );

    const mounted: FsMountParams[] = [];
    const fuse = fx.client(server).client;
    fuse.tools.bash.handle(() => "ok");
    fuse.onRequest("fs.mount", (params) => {
      mounted.push(params);
      return {
        mounts: params.views.map((v) => ({ view: v.view, path: v.path, status: "mounted" })),
      };
    });
    fuse.onRequest("fs.unmount", () => ({ status: "unmounted" }));
    await fuse.start();
    const executor = await harness.waitExecutor({ filter: (e) => e !== withoutFuse });
    assert.equal(executor.capabilities.fs?.fuse, true);
    const session = await executor.assignSession({ session_id: "ses_fs" });
    const result = await executor.mount(session, [{
      view: "repo",
      path: "/mnt/repo",
      token: "t1",
    }]);
    assert.deepEqual(result, { mounts: [{ view: "repo", path: "/mnt/repo", status: "mounted" }] });
    assert.equal(mounted[0].service_url, "https://files.example");
    assert.deepEqual(await executor.unmount(session), { status: "unmounted" });
  });
});
