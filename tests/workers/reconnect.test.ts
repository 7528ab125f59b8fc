/**
 * The edge harness across network cuts: an `ExecutorClient` dials workerd through a TCP proxy
 * that destroys both sockets at once, reconnects with `resume`, and its sessions, pending tool
 * calls and durable events carry on (the brain inside the object sees it all through its
 * `Harness`).
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { Edge, gate, INFO, until } from "./edge-fixture.ts";

describe("edge harness on workerd: reconnect with resume", { timeout: 90_000 }, () => {
  let edge: Edge;
  let proxy: ChaosProxy;
  before(async () => {
    edge = await Edge.start();
  });
  afterEach(async () => {
    await edge.stopClients();
    await proxy?.close();
  });
  after(() => edge.dispose());

  it("resumes the session and completes a call pending across the cut", async () => {
    proxy = await ChaosProxy.start(edge.url);
    const client = edge.client({ harnessUrl: proxy.url });
    const running = gate();
    const release = gate();
    let runs = 0;
    client.tools.bash.handle(async (input) => {
      runs++;
      running.open();
      await release.promise;
      return { stdout: `finished ${input.command}`, stderr: "", exit_code: 0 };
    });
    const { executor_id } = await client.start();
    await edge.driver("waitEvent", ["registered", INFO.name]);
    assert.equal(await edge.driver("assign", [INFO.name, "ses_resume"]), "ready");
    const call = { tool: "bash", input: { command: "long" }, tool_call_id: "call_across" };
    const settled = edge.driver("call", ["ses_resume", call]);
    await running.promise;

    assert.equal(proxy.cut(), 1, "the cut hits the open connection");
    const view = await edge.driver("waitEvent", ["reconnected", INFO.name]);
    assert.equal(view.id, executor_id, "the same executor id after resume");
    assert.equal(client.executorId, executor_id);
    assert.equal(await edge.driver("sessionState", ["ses_resume"]), "ready", "resumed, not lost");
    assert.deepEqual(client.sessions.map((s) => s.id), ["ses_resume"]);

    release.open();
    const { result } = await settled;
    assert.equal(result.structured_content.stdout, "finished long");
    assert.equal(runs, 1, "the call ran once");
  });

  it("keeps durable events exactly once and in order across cuts", async () => {
    proxy = await ChaosProxy.start(edge.url);
    const client = edge.client({ harnessUrl: proxy.url, executor: { ...INFO, name: "cuts" } });
    client.tools.bash.handle(() => "ok");
    await client.start();
    await edge.driver("waitEvent", ["registered", "cuts"]);
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    await edge.driver("assign", ["cuts", "ses_cuts"]);
    const sent: Promise<unknown>[] = [];
    for (let batch = 0; batch < 3; batch++) {
      for (let i = batch * 20; i < (batch + 1) * 20; i++) {
        const event = { type: "tick", n: i };
        sent.push(client.call("session.event", { session_id: "ses_cuts", event }));
      }
      // Cut while the batch is in flight, then let the client come back.
      await new Promise((resolve) => setTimeout(resolve, 0));
      const accepted = proxy.accepted;
      proxy.cut();
      await until(() => proxy.accepted > accepted && client.connected, "the reconnect");
    }
    await Promise.all(sent);
    const events = await edge.driver("events", ["ses_cuts", 60]);
    assert.deepEqual(
      events.map((e: { n: number }) => e.n),
      Array.from({ length: 60 }, (_, i) => i),
      "every event once, in order",
    );
  });
});
