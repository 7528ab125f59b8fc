/**
 * Type test of `AbortSignal` and `AsyncIterable`: every public call that waits (on the executor,
 * a connection, a process or a timer) takes a `signal` in its options, and every stream is an
 * `AsyncIterable` (a `for await` that breaks calls its iterator's `return`). Checked by the
 * compiler, never run (`tests/harness/abort.test.ts` aborts the same calls on real parts); each
 * `@ts-expect-error` marks an error the compiler must report: a signal that is not an
 * `AbortSignal`.
 */
import type {
  AgentCustomToolResultParams,
  ExecutorClient,
  ExecutorHandle,
  Harness,
  InteractionResponseParams,
  McpChannel,
  Session,
  Terminal,
  TurnCancelParams,
  TurnStartParams,
} from "../../mod.ts";
import type { AgentPlatform, Turn, TurnInputRequest } from "../../agent/mod.ts";

/** True when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true
  : false;
/** Compiles only for `true`. */
type Expect<T extends true> = T;
/** Whether T is read with `for await`, and its iterator can be ended early (`return`). */
type Stream<T> = T extends AsyncIterable<unknown> & { return?(): unknown } ? true : false;
/** Whether a call's options take an AbortSignal as `signal`. */
type Signalled<O> = O extends { signal?: AbortSignal } ? true : false;

export type Checks = [
  // The streams.
  Expect<Equal<Stream<ReturnType<Session["events"]>>, true>>,
  Expect<Equal<Stream<ReturnType<Terminal["output"]>>, true>>,
  Expect<Equal<Stream<ReturnType<Terminal["text"]>>, true>>,
  Expect<Equal<Stream<Terminal>, true>>,
  Expect<Equal<Stream<ReturnType<AgentPlatform["stream"]>>, true>>,
  Expect<Equal<Stream<Turn["inputs"]>, true>>,
  // And each takes a signal where it waits (a turn's inputs end with the turn's own signal).
  Expect<Equal<Signalled<NonNullable<Parameters<Session["events"]>[0]>>, true>>,
  Expect<Equal<Signalled<NonNullable<Parameters<Terminal["output"]>[0]>>, true>>,
  Expect<Equal<Signalled<NonNullable<Parameters<Terminal["text"]>[0]>>, true>>,
  Expect<Equal<Signalled<NonNullable<Parameters<AgentPlatform["stream"]>[1]>>, true>>,
];

/** The harness end: the harness, an executor, a session, its terminal and MCP channel. */
export async function harnessEnd(
  harness: Harness,
  executor: ExecutorHandle,
  session: Session,
  terminal: Terminal,
  channel: McpChannel,
  signal: AbortSignal,
): Promise<void> {
  await harness.waitExecutor({ signal });
  await harness.dial("unix:///run/bma/executor.sock", { signal });
  await executor.assignSession({ session_id: "ses_typed" }, { signal });
  await executor.mount(session, [], { signal });
  await executor.unmount(session, { signal });
  await executor.drain({}, { signal });
  await executor.request("process.list", { session_id: session.id }, { signal });
  await executor.close("done", { signal });
  await session.ready({ signal });
  await session.callTool({ tool: "bash", input: { command: "true" } }, { signal });
  await session.tools.bash.call({ command: "true" }, { signal });
  await session.cancelTool("call_1", "no longer needed", { signal });
  await session.mcp("echo", { signal });
  await session.terminal({ signal });
  await session.stop("done", { signal });
  await terminal.write("ls\r", { signal });
  await terminal.resize(120, 40, { signal });
  await terminal.close({ signal });
  await channel.close({ signal });
  for await (const _record of session.events({ signal })) break;
  for await (const _text of terminal.text({ signal })) break;

  // @ts-expect-error a signal is an AbortSignal, not a time
  await session.ready({ signal: 5_000 });
  // @ts-expect-error so it is for cancelTool
  await session.cancelTool("call_1", "no longer needed", { signal: "soon" });
  // @ts-expect-error and for mcp
  await session.mcp("echo", { signal: true });
  // @ts-expect-error and for stop
  await session.stop("done", { signal: {} });
  // @ts-expect-error and for an executor's close
  await executor.close("done", { signal: 1 });
  // @ts-expect-error and for a channel's close
  await channel.close({ signal: "now" });
  // @ts-expect-error and for dial
  await harness.dial("unix:///run/bma/executor.sock", { signal: 0 });
}

/** The agent capability's calls, harness side. */
export async function agentCalls(
  executor: ExecutorHandle,
  platform: AgentPlatform,
  start: TurnStartParams,
  input: TurnInputRequest,
  cancel: TurnCancelParams,
  answer: InteractionResponseParams,
  result: AgentCustomToolResultParams,
  signal: AbortSignal,
): Promise<void> {
  await executor.startTurn(start, { signal });
  await executor.sendTurnInput(input, { signal });
  await executor.cancelTurn(cancel, { signal });
  await executor.closeAgentSession("ses_typed", { signal });
  await executor.respondInteraction(answer, { signal });
  await executor.sendCustomToolResult(result, { signal });
  await platform.waitInteraction({ signal });
  for await (const _event of platform.stream("ses_typed", { signal })) break;

  // @ts-expect-error a signal is an AbortSignal
  await executor.startTurn(start, { signal: "later" });
  // @ts-expect-error so it is for waitInteraction
  await platform.waitInteraction({ signal: null });
}

/** The executor end: the client, and a turn of the agent it serves. */
export async function executorEnd(
  client: ExecutorClient,
  turn: Turn,
  signal: AbortSignal,
): Promise<void> {
  await client.start({ signal });
  await client.call("session.ready", { session_id: "ses_typed" }, { signal });
  await client.sessionReady("ses_typed", { signal });
  await client.sessionEnded("ses_typed", "done", { signal });
  await client.uploadArtifact({ name: "notes.txt", data: "hello", signal });
  await client.stop({ signal });
  await turn.emit({ type: "agent.message", content: [] }, { signal });
  await turn.requestInteraction({ kind: "question", prompt: "Go on?" }, { signal });
  await turn.customTool("lookup", { id: 1 }, { signal });
  await turn.modelToken({ signal });
  await turn.toolsToken({ signal });

  // @ts-expect-error a signal is an AbortSignal
  await client.start({ signal: 30_000 });
  // @ts-expect-error so it is for sessionReady
  await client.sessionReady("ses_typed", { signal: "soon" });
  // @ts-expect-error and for stop
  await client.stop({ signal: true });
  // @ts-expect-error and for a turn's model token
  await turn.modelToken({ signal: 1 });
  // @ts-expect-error and for its custom tools
  await turn.customTool("lookup", { id: 1 }, { signal: "soon" });
}
