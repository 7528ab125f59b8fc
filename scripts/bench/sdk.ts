/**
 * The SDK's side of the benchmark: a harness calling a tool on an executor (in memory, or in
 * two processes over WebSocket or a Unix socket), and an executor emitting durable session
 * events that the harness acknowledges. Each runtime uses its own presets (`harness/<rt>.ts`,
 * `executor/<rt>.ts`), the code a user of that runtime runs.
 */
import { Harness as CoreHarness } from "../../harness/mod.ts";
import type { ExecutorHandle, Session } from "../../harness/mod.ts";
import {
  ExecutorClient as CoreExecutorClient,
  type ExecutorClientOptions,
} from "../../executor/mod.ts";
import { createLinkedTransportPair } from "../../transport/memory.ts";
import {
  INPUT_TEXT,
  type Measured,
  measureLoop,
  PROTOCOL,
  RUNTIME,
  SESSION_ID,
  TOOL,
} from "./common.ts";

type HarnessClass = typeof CoreHarness;
type ClientClass = typeof CoreExecutorClient;

/** This runtime's harness and executor presets. */
export async function presets(): Promise<{ Harness: HarnessClass; ExecutorClient: ClientClass }> {
  if (RUNTIME === "deno") {
    const [h, e] = await Promise.all([
      import("../../harness/deno.ts"),
      import("../../executor/deno.ts"),
    ]);
    return { Harness: h.Harness, ExecutorClient: e.ExecutorClient };
  }
  if (RUNTIME === "bun") {
    const [h, e] = await Promise.all([
      import("../../harness/bun.ts"),
      import("../../executor/bun.ts"),
    ]);
    return { Harness: h.Harness, ExecutorClient: e.ExecutorClient };
  }
  const [h, e] = await Promise.all([
    import("../../harness/node.ts"),
    import("../../executor/node.ts"),
  ]);
  return { Harness: h.Harness, ExecutorClient: e.ExecutorClient };
}

/** What the executor says it is. */
export function executorInfo(name: string): ExecutorClientOptions["executor"] {
  return { name, os: "linux", arch: "x64", version: "0.0.0-bench" };
}

/** An executor serving the bench tool: a handler returning a small text result. */
export function serveTool(client: CoreExecutorClient): void {
  client.tool(TOOL).handle(() => "ok");
  client.onSessionAssign((session) => {
    queueMicrotask(() => void client.sessionReady(session.id).catch(() => {}));
  });
}

/** One tool call from the harness, checked to have run. */
export async function callOnce(session: Session): Promise<void> {
  const result = await session.callTool({ tool: TOOL, input: { text: INPUT_TEXT } });
  if (result.outcome !== "completed" || result.is_error) {
    throw new Error(`tool call ended ${result.outcome}: ${JSON.stringify(result)}`);
  }
}

/** Assigns the bench session on an executor and waits until it is ready. */
export async function readySession(executor: ExecutorHandle, id = SESSION_ID): Promise<Session> {
  const session = await executor.assignSession({ session_id: id });
  await session.ready();
  return session;
}

/** Measures tool calls on a ready session. */
export function measureCalls(session: Session, inflight: number, ms: number): Promise<Measured> {
  return measureLoop(() => callOnce(session), inflight, ms);
}

/** A harness and an executor in one process, over the in-memory transport pair. */
export async function memoryPair(): Promise<{ session: Session; close(): Promise<void> }> {
  const harness = new CoreHarness();
  const client = new CoreExecutorClient({
    harnessUrl: "memory://bench",
    executor: executorInfo("bench-memory"),
    dial: () => {
      const [executorSide, harnessSide] = createLinkedTransportPair({
        protocol: PROTOCOL,
        byReference: true,
      });
      void harness.accept(harnessSide);
      return Promise.resolve(executorSide);
    },
  });
  serveTool(client);
  await client.start();
  const session = await readySession(await harness.waitExecutor());
  return {
    session,
    close: async () => {
      await client.stop();
      await harness.close();
    },
  };
}

/**
 * JSON.stringify + JSON.parse of a tool.call request and its response, as a reference for what
 * the encoding alone costs on this runtime (pairs per run).
 */
export function jsonPairs(ms: number): Measured {
  const request = {
    jsonrpc: "2.0",
    id: 1,
    method: "tool.call",
    params: {
      session_id: SESSION_ID,
      tool_call_id: `call_${"0".repeat(24)}`,
      tool: TOOL,
      input: { text: INPUT_TEXT },
    },
  };
  const response = { jsonrpc: "2.0", id: 1, result: { ok: true } };
  let count = 0;
  let sink = 0;
  const started = performance.now();
  const end = started + ms;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) {
      request.id = response.id = count + i;
      sink += (JSON.parse(JSON.stringify(request)) as { id: number }).id;
      sink += (JSON.parse(JSON.stringify(response)) as { id: number }).id;
    }
    count += 1000;
  }
  if (sink === -1) console.log(sink);
  return { count, ms: performance.now() - started };
}
