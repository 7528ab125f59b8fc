/**
 * Type test of `await using`: the harness, its servers, its links to listening executors,
 * sessions, terminals and MCP channels, the executor client, the agent it serves and the
 * inspector are `AsyncDisposable`, so a block that takes them closes them at its end (the
 * runtimes' `serveMachine` and `serveWebSocket`, which need a runtime's types, are checked in
 * `tests/harness/abort.test.ts`). Checked by the compiler, never run (`tests/harness/dispose.test.ts` runs the same on real
 * parts); each `@ts-expect-error` marks an error the compiler must report.
 */
import type {
  DialedExecutorLink,
  ExecutorClient,
  Harness,
  HarnessServer,
  Inspector,
  McpChannel,
  Session,
  Terminal,
} from "../../mod.ts";
import type { AgentServer } from "../../agent/mod.ts";

/** True when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true
  : false;
/** Compiles only for `true`. */
type Expect<T extends true> = T;
type Disposes<T> = T extends AsyncDisposable ? true : false;

export type Checks = [
  Expect<Equal<Disposes<Harness>, true>>,
  Expect<Equal<Disposes<HarnessServer>, true>>,
  Expect<Equal<Disposes<Session>, true>>,
  Expect<Equal<Disposes<Terminal>, true>>,
  Expect<Equal<Disposes<ExecutorClient>, true>>,
  Expect<Equal<Disposes<Inspector>, true>>,
  Expect<Equal<Disposes<McpChannel>, true>>,
  Expect<Equal<Disposes<DialedExecutorLink>, true>>,
  Expect<Equal<Disposes<AgentServer>, true>>,
];

export async function disposing(
  harness: Harness,
  client: ExecutorClient,
  ui: Inspector,
  agent: AgentServer,
): Promise<void> {
  await using _harness = harness;
  await using _server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  await using _client = client;
  await using _agent = agent;
  await using _ui = ui;
  const executor = await harness.waitExecutor();
  await using session = await executor.assignSession({ session_id: "ses_typed" });
  await using _terminal = await session.terminal({ cols: 80, rows: 24 });
  await using _channel = await session.mcp("echo");
  await using _link = await harness.dial("unix:///run/bma/executor.sock");
  // @ts-expect-error a tool call's result is a value, not something to dispose
  await using _result = await session.callTool({ tool: "bash", input: { command: "true" } });
}

export function notSynchronously(
  session: Session,
  server: HarnessServer,
  channel: McpChannel,
  agent: AgentServer,
): void {
  // @ts-expect-error stopping a session takes time: it is disposed with `await using`
  using _session = session;
  // @ts-expect-error so is closing a server
  using _server = server;
  // @ts-expect-error and a channel (its close waits for the executor)
  using _channel = channel;
  // @ts-expect-error and an agent's sessions ending
  using _agent = agent;
}
