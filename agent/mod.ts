/**
 * The agent capability of the BMA Executor Protocol, both ends.
 *
 * Executor end: your agent loop served with {@linkcode serveAgent} (it plugs into the client
 * through its extension seam, `client.extend`):
 *
 * ```ts
 * import { ExecutorClient } from "bma-executor-sdk/node";
 * import { serveAgent } from "bma-executor-sdk/agent";
 *
 * const client = new ExecutorClient({
 *   harnessUrl: "ws://127.0.0.1:7700",
 *   executor: { name: "my-agent", os: "linux", arch: "x64", version: "0.1.0" },
 * });
 * serveAgent(client, {
 *   async openTurn(turn) {
 *     // first turn of a session, or resume from turn.executorSessionRef
 *     return { executorSessionRef: "conv-1" };
 *   },
 *   async runTurn(turn) {
 *     const id = turn.eventId();
 *     turn.delta(id, { type: "text_delta", text: "Hel" }); // transient preview, lossy
 *     await turn.emit({ type: "agent.message", content: [{ type: "text", text: "Hello" }] }, {
 *       eventId: id,
 *     }); // durable: event_id and sequence assigned, resent after reconnects
 *     for (const input of turn.takeInputs()) console.log(input.input); // turn.input arrivals
 *     const answer = await turn.requestInteraction({ kind: "question", prompt: "Go on?" });
 *     const { token } = await turn.modelToken(); // refreshed when < 10 minutes remain
 *     // turn.signal aborts on turn.cancel / session.close
 *   },
 *   async closeSession(sessionId) {},
 * }, { maxSessions: 4, customTools: true });
 * ```
 *
 * Harness end: `new Harness({ agent: new AgentPlatform(options) })`, then on an executor handle
 * `startTurn`, `sendTurnInput`, `cancelTurn`, `closeAgentSession`, `respondInteraction` and
 * `sendCustomToolResult`; the platform streams events (`stream`), holds interactions
 * (`onInteraction`, `respond`) and signs model and tools tokens.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */
export {
  type AgentServer,
  DEFAULT_CUSTOM_TOOL_TIMEOUT_MS,
  serveAgent,
  type ServeAgentOptions,
  TOKEN_REFRESH_LEAD_MS,
} from "./executor/serve.ts";
export type {
  AgentHandler,
  CustomToolOptions,
  CustomToolOutcome,
  EmitOptions,
  EmittedEvent,
  InteractionAnswer,
  InteractionRequest,
  LocalAnswer,
  ModelCredential,
  OpenTurnResult,
  ToolsCredential,
  Turn,
  TurnEnd,
  TurnInput,
} from "./executor/types.ts";
export {
  AgentTurnError,
  CustomToolsDisabledError,
  DuplicateEventIdError,
  InteractionMismatchError,
  TokenUnavailableError,
  TurnCanceledError,
  TurnEndedError,
} from "./executor/errors.ts";
export { APPROVAL_ID_PATTERN, approvalId, isApprovalId } from "./ids.ts";
export {
  AgentPlatform,
  AgentPlatformDetachedError,
  type AgentPlatformOptions,
  type AgentStreamEvent,
  type AgentTurnInfo,
  type AgentTurnState,
  type InteractionChange,
  type InteractionStatus,
  type ModelTokenGrant,
  type PlatformAnswer,
  type PlatformInteraction,
  type StreamOptions,
  type ToolsTokenGrant,
  type WaitInteractionOptions,
} from "./harness/platform.ts";
export type { CloseAgentSessionOptions, TurnInputRequest } from "../harness/handle-options.ts";
export { NoAgentPlatformError } from "../harness/errors.ts";
// The wire types the names above use: a turn's events, its start and end, its interactions.
export type { AgentEvent, ContentBlock, EventDelta } from "../protocol/core.ts";
export type { TurnInputParams, TurnMetadata, TurnOutcome } from "../protocol/core.ts";
export type { InteractionKind, InteractionOption, InteractionOutcome } from "../protocol/core.ts";
