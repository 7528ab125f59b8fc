/**
 * The agent capability on the executor end: `serveAgent(client, handler, options)` serves
 * `turn.start`, `turn.input`, `turn.cancel`, `session.close`, `interaction.response` and (with
 * `customTools`) `agent.custom_tool_result`, and runs the handler's turns.
 *
 * - An agent session opens with its first `turn.start` (no `session.assign`) and is held like
 *   an assigned one: it is listed in `resume.active_sessions`, so it survives reconnects.
 * - Durable events go through the client's event outbox: each gets its `event_id` and the
 *   session's next `sequence` when emitted, is kept until acknowledged, and is resent in order
 *   after a reconnect before anything newer (the harness rejects a gap, so nothing overtakes).
 * - Deltas are notifications: lossy, never resent.
 * - Requests the executor makes (`interaction.request`, `interaction.cancel`) are idempotent
 *   by their ids and resent until the harness answers.
 *
 * This module is the entry point; the service itself is in `service.ts`.
 *
 * Portable: web-standard APIs only.
 */
import { isTimerSpan, MAX_TIMEOUT_MS } from "../../protocol/timeout-option.ts";
import type { ExecutorClient } from "../../executor/client.ts";
import { ExecutorConfigError } from "../../executor/errors.ts";
import type { ServeAgentOptions } from "./options.ts";
import { AgentService } from "./service.ts";
import type { AgentHandler } from "./types.ts";

export {
  DEFAULT_CUSTOM_TOOL_TIMEOUT_MS,
  type ServeAgentOptions,
  TOKEN_REFRESH_LEAD_MS,
} from "./options.ts";

/** A served agent capability. */
export interface AgentServer {
  /** The agent sessions held now. */
  readonly sessions: readonly string[];
  /** The running turn of a session, if any. */
  runningTurn(sessionId: string): string | undefined;
  /**
   * Stops serving: the agent methods are withdrawn (capabilities published), running turns are
   * canceled and every agent session ends (`session.ended`). Resolves once they have.
   */
  dispose(): Promise<void>;
  /** Stops serving as {@linkcode dispose} does: `await using agent = serveAgent(…)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Serves the agent capability on `client` with `handler` (see {@linkcode AgentHandler}).
 * Advertises `agent` (with `max_sessions` and `custom_tools` as configured); call it before or
 * after `start()` (a change is published with `executor.capabilities.update`).
 */
export function serveAgent(
  client: ExecutorClient,
  handler: AgentHandler,
  options: ServeAgentOptions = {},
): AgentServer {
  if (!handler || typeof handler.runTurn !== "function") {
    throw new ExecutorConfigError("serveAgent needs a handler with runTurn");
  }
  for (const hook of ["openTurn", "closeSession"] as const) {
    const given = (handler as unknown as Record<string, unknown>)[hook];
    if (given !== undefined && typeof given !== "function") {
      throw new ExecutorConfigError(`the handler's ${hook} must be a function`);
    }
  }
  checkServeAgentOptions(options);
  if (served.has(client)) {
    throw new ExecutorConfigError("this client already serves an agent: dispose it first");
  }
  const service = client.extend((host) =>
    new AgentService(client, host, handler, options, () => served.delete(client))
  );
  served.add(client);
  return {
    get sessions() {
      return service.sessionIds();
    },
    runningTurn: (sessionId) => service.runningTurn(sessionId),
    dispose: () => service.dispose(),
    [Symbol.asyncDispose]: () => service.dispose(),
  };
}

/**
 * The options, checked when served rather than when first used: a span that is no timer's (a
 * negative or NaN one fires at once, one over 2^31 − 1 ms fires at once on Node and Bun) would
 * only show in a turn.
 */
function checkServeAgentOptions(options: ServeAgentOptions): void {
  if (options === null || typeof options !== "object") {
    throw new ExecutorConfigError("serveAgent's options must be an object");
  }
  const max = options.maxSessions;
  if (max !== undefined && (!Number.isInteger(max) || max < 1)) {
    throw new ExecutorConfigError("maxSessions must be a positive integer");
  }
  if (options.customTools !== undefined && typeof options.customTools !== "boolean") {
    throw new ExecutorConfigError("customTools must be true or false");
  }
  for (const name of ["customToolTimeoutMs", "tokenRefreshLeadMs", "cancelGraceMs"] as const) {
    const ms = options[name];
    if (ms !== undefined && !isTimerSpan(ms)) {
      throw new ExecutorConfigError(`${name} must be a number of ms from 0 to ${MAX_TIMEOUT_MS}`);
    }
  }
}

/** Clients serving an agent: one agent per client (the methods have one handler each). */
const served = new WeakSet<object>();
