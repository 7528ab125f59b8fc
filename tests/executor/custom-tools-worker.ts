/**
 * A Worker that exercises tools defined by zod schemas where `new Function` throws (workerd),
 * with `bma-executor-sdk/workers` over in-memory links. `GET /` answers with what happened:
 *
 * - harness end: a `Harness` and an `ExecutorClient`; the harness refuses input the advertised
 *   JSON Schema refuses (built with `z.fromJSONSchema`) and sends nothing, and a valid call
 *   returns the checked `structured_content`;
 * - executor end: a raw harness (`Peer`) sends input the schema refuses; the executor answers
 *   -32602 before the handler runs.
 */
import * as z from "zod";
import {
  createLinkedTransportPair,
  ExecutorClient,
  Harness,
  InvalidOutgoingParamsError,
  InvalidParamsError,
  Peer,
} from "../../workers.ts";

const INFO = { name: "on-workers", os: "workerd", arch: "wasm", version: "1.0.0" };
const PROTOCOL = "bma.executor.v1.1";

function weather(client: ExecutorClient, calls: { ran: number }): void {
  client.tool("weather", {
    description: "Weather of a city",
    input: z.object({ city: z.string().min(1), days: z.int().min(1).default(1) }),
    output: z.object({ celsius: z.number() }),
  }, ({ city, days }) => {
    calls.ran++;
    return { celsius: city.length + days };
  });
}

async function harnessEnd(calls: { ran: number }) {
  const harness = new Harness({ insecureNoAuth: true });
  const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: PROTOCOL });
  const client = new ExecutorClient({
    harnessUrl: "ws://in-memory/",
    dial: () => Promise.resolve(executorEnd),
    executor: INFO,
  });
  weather(client, calls);
  await harness.accept(harnessEnd);
  await client.start();
  try {
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_h" });
    await session.ready();
    const refused = await session.callTool({ tool: "weather", input: { city: 1 } }).then(
      () => "sent",
      (error) => error instanceof InvalidOutgoingParamsError ? error.issues : String(error),
    );
    const ranBefore = calls.ran;
    const result = await session.callTool({ tool: "weather", input: { city: "Oslo" } });
    return {
      definition: executor.capabilities.tool_definitions?.weather,
      refused,
      ranBefore,
      structured: result.structured_content,
    };
  } finally {
    await client.stop();
    await harness.close();
  }
}

async function executorEnd(calls: { ran: number }) {
  const [executorEnd, rawEnd] = createLinkedTransportPair({ protocol: PROTOCOL });
  const raw = new Peer(rawEnd);
  let ready!: () => void;
  const sessionReady = new Promise<void>((resolve) => (ready = resolve));
  raw.onRequest("executor.register", (params) => {
    raw.capabilities = params.capabilities;
    return { executor_id: "exec_raw", protocol: PROTOCOL, heartbeat_interval_ms: 60_000 };
  });
  raw.onRequest("executor.heartbeat", () => ({ drain: false }));
  raw.onRequest("session.ready", () => {
    ready();
    return { ok: true };
  });
  raw.onRequest("session.ended", () => ({ ok: true }));
  raw.onRequest("tool.result", () => ({ ok: true }));
  const client = new ExecutorClient({
    harnessUrl: "ws://in-memory/",
    dial: () => Promise.resolve(executorEnd),
    executor: INFO,
  });
  weather(client, calls);
  await client.start();
  try {
    await raw.call("session.assign", { session_id: "ses_e" });
    await sessionReady;
    const ranBefore = calls.ran;
    const refused = await raw.call("tool.call", {
      session_id: "ses_e",
      tool_call_id: "c1",
      tool: "weather",
      input: { city: "" },
    }).then(
      () => "acknowledged",
      (error) => error instanceof InvalidParamsError ? error.data : String(error),
    );
    return { refused, ran: calls.ran - ranBefore };
  } finally {
    await client.stop();
  }
}

export default {
  async fetch(): Promise<Response> {
    let evalAllowed: boolean;
    try {
      evalAllowed = new Function("return true")();
    } catch {
      evalAllowed = false;
    }
    const harness = await harnessEnd({ ran: 0 });
    const executor = await executorEnd({ ran: 0 });
    return Response.json({ evalAllowed, harness, executor });
  },
};
