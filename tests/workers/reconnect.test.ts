/**
 * The edge harness across network cuts: an `ExecutorClient` dials workerd through a TCP proxy
 * that destroys both sockets at once, reconnects with `resume`, and its sessions, pending tool
 * calls and durable events carry on.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { Edge, gate, until } from "./edge-fixture.ts";

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

  /** The executor's current connection id as the brain API sees it (undefined: disconnected). */
  async function connectionOf(executorId: string): Promise<string | undefined> {
    const view = await edge.brain("GET", `/executors/${executorId}`);
    return view.body.connected ? view.body.connection_id : undefined;
  }

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
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    const { executor_id } = await client.start();
    const assigned = await edge.brain("POST", "/sessions", {
      session_id: "ses_resume",
      executor_id,
    });
    assert.equal(assigned.status, 201);
    await edge.brain("POST", "/sessions/ses_resume/tool-calls", {
      tool: "bash",
      input: { command: "long" },
      tool_call_id: "call_across",
    });
    await running.promise;
    const before = await connectionOf(executor_id);
    assert.ok(before);

    const accepted = proxy.accepted;
    assert.equal(proxy.cut(), 1, "the cut hits the open connection");
    await until(
      async () =>
        proxy.accepted > accepted && client.connected &&
        (await connectionOf(executor_id)) !== before &&
        (await connectionOf(executor_id)) !== undefined,
      "the reconnect",
    );
    assert.equal(client.executorId, executor_id, "the same executor id after resume");
    const session = await edge.brain("GET", "/sessions/ses_resume");
    assert.equal(session.body.state, "ready", "the session was resumed, not lost");
    assert.deepEqual(client.sessions.map((s) => s.id), ["ses_resume"]);

    release.open();
    const settled = await edge.brain("GET", "/tool-calls/call_across?wait_ms=20000");
    assert.equal(settled.status, 200, JSON.stringify(settled.body));
    assert.equal(settled.body.result.structured_content.stdout, "finished long");
    assert.equal(runs, 1, "the call ran once");
  });

  it("keeps durable events exactly once and in order across cuts", async () => {
    proxy = await ChaosProxy.start(edge.url);
    const client = edge.client({ harnessUrl: proxy.url });
    client.tools.bash.handle(() => "ok");
    const { executor_id } = await client.start();
    const assigned = await edge.brain("POST", "/sessions", {
      session_id: "ses_cuts",
      executor_id,
    });
    assert.equal(assigned.status, 201);
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
    const seen: number[] = [];
    let from = 0;
    while (seen.length < 60) {
      const page = await edge.brain("GET", `/sessions/ses_cuts/events?from=${from}&wait_ms=20000`);
      seen.push(...page.body.events.map((e: any) => e.event.n));
      from = page.body.next;
    }
    assert.deepEqual(seen, Array.from({ length: 60 }, (_, i) => i));
    const session = await edge.brain("GET", "/sessions/ses_cuts");
    assert.equal(session.body.events, 60, "no event was stored twice");
  });
});
