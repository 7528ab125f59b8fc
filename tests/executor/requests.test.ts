/**
 * The generic surface: onRequest for capability requests (typed, advertised, published after
 * start), call and notify, and stop(): graceful with a grace period, executor.close, close 1000.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CapabilityNotAdvertisedError,
  ClientStoppedError,
  methods,
  NotConnectedError,
  type ToolResultParams,
} from "../../executor/node.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

describe("ExecutorClient: requests, notifications and stop", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  it("serves a capability request registered after start, publishing the capability first", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    await client.start();
    const executor = await harness.waitExecutor();
    await executor.assignSession({ session_id: "ses_1" });
    // Not advertised yet: the harness refuses to send it.
    const before = await executor.request(methods.PROCESS_START, {
      session_id: "ses_1",
      argv: ["true"],
    }).then(() => undefined, (e) => e);
    assert.ok(before instanceof CapabilityNotAdvertisedError, String(before));
    const started: string[][] = [];
    client.onRequest(methods.PROCESS_START, (params) => {
      started.push(params.argv);
      return { process_id: params.process_id ?? "proc_1", pid: 4242 };
    });
    await until(() => executor.capabilities.process === true, "executor.capabilities.update");
    const result = await executor.request(methods.PROCESS_START, {
      session_id: "ses_1",
      argv: ["sleep", "1"],
    });
    assert.deepEqual(result, { process_id: "proc_1", pid: 4242 });
    assert.deepEqual(started, [["sleep", "1"]]);
  });

  it("refuses to serve the methods it manages itself", () => {
    const { client } = fx.client({ httpUrl: "http://127.0.0.1:1" });
    assert.throws(() => client.onRequest("tool.call" as never, () => ({ ok: true }) as never));
  });

  it("call() waits for the connection; notify() throws NotConnectedError while disconnected", async () => {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    const { client } = fx.client(harness);
    assert.throws(
      () => client.notify("session.status", { session_id: "ses_1", status: "running" }),
      NotConnectedError,
    );
    // Sent once registered.
    const result: Promise<unknown> = client.call("tool.result", {
      session_id: "ses_1",
      tool_call_id: "c_manual",
      outcome: "completed",
    } as ToolResultParams);
    await client.start();
    assert.deepEqual(await result, { ok: true });
    client.notify("session.status", { session_id: "ses_1", status: "running", detail: "x" });
    await harness.waitFor(() => harness.notifications.some((n) => n.method === "session.status"));
    assert.deepEqual(
      harness.notifications.find((n) => n.method === "session.status")?.params,
      { session_id: "ses_1", status: "running", detail: "x" },
    );
  });

  it("stop() with a grace period lets running calls report, then sends executor.close and closes 1000", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    client.tools.bash.handle(async () => {
      started();
      await released;
      return "finished in time";
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    const call = session.tools.bash.call({ command: "x" });
    await running;
    const stopped = client.stop({ graceMs: 10_000, reason: "maintenance" });
    assert.equal(client.draining, true);
    release();
    const result = await call;
    assert.equal(result.outcome, "completed");
    assert.deepEqual(await stopped, { reason: "stopped" });
    assert.deepEqual(await executor.closed, { reason: "closed" }, "executor.close received");
    assert.equal(client.state, "stopped");
    await assert.rejects(client.call("session.ready", { session_id: "ses_1" }), ClientStoppedError);
    await assert.rejects(client.start(), ClientStoppedError);
  });
});
