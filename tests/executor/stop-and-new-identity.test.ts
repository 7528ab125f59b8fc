/**
 * What becomes of tool calls when the executor stops or the harness forgets it, over real
 * WebSockets on 127.0.0.1 between a `Harness` and an `ExecutorClient`:
 * - stopping now cancels the calls still running, and their `canceled` results still reach the
 *   harness before the connection closes;
 * - a harness that started again without its store numbers its calls afresh: the executor,
 *   registered under a new id, runs them, where it used to answer them as duplicates of the
 *   calls it remembered, and never ran nor answered them.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ExecutorClient, Harness } from "../../node.ts";
import { until } from "../helpers/executor-fixture.ts";

const INFO = { name: "stop-and-identity", os: "linux", arch: "x64", version: "0.0.1" };
const FAST = { initialDelayMs: 5, maxDelayMs: 50 };

describe("tool calls across a stop and a new identity", { timeout: 60_000 }, () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  async function harnessOn(port = 0) {
    const harness = new Harness({ insecureNoAuth: true });
    const server = await harness.serve({ hostname: "127.0.0.1", port });
    closing.push(() => server.close(), () => harness.close());
    return { harness, server };
  }

  it("stopping now reports the running calls canceled, not lost", async () => {
    const { harness, server } = await harnessOn();
    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO });
    closing.push(() => client.stop());
    let started = 0;
    client.tools.bash.handle(async (_input, { signal }) => {
      started++;
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      return { stdout: "", stderr: "", exit_code: 143 };
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_stop" });
    const calls = [1, 2].map((n) =>
      session.callTool({ tool: "bash", input: { command: `sleep ${n}` } })
    );
    await until(() => started === 2);
    await client.stop();
    for (const call of calls) assert.equal((await call).outcome, "canceled");
  });

  it("a harness started again without its store gets its first calls run, ids and all", async () => {
    const first = await harnessOn();
    const port = Number(new URL(first.server.url).port);
    const client = new ExecutorClient({
      harnessUrl: first.server.url,
      executor: INFO,
      reconnect: FAST,
    });
    closing.push(() => client.stop());
    const ran: string[] = [];
    client.tools.bash.handle(({ command }) => {
      ran.push(command);
      return { stdout: command, stderr: "", exit_code: 0 };
    });
    const { executor_id: firstId } = await client.start();
    const call = async (harness: Harness, command: string) => {
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_1" });
      return await session.callTool({ tool: "bash", input: { command }, tool_call_id: "call_1" });
    };
    assert.equal((await call(first.harness, "first run")).structured_content?.stdout, "first run");
    await first.server.close();
    await first.harness.close();
    const second = await harnessOn(port);
    await until(() => client.connected && client.executorId !== firstId);
    const result = await call(second.harness, "second run");
    assert.equal(result.outcome, "completed");
    assert.equal(result.structured_content?.stdout, "second run");
    assert.deepEqual(ran, ["first run", "second run"]);
  });
});
