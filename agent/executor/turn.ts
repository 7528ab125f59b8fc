/**
 * The {@linkcode Turn} handed to an agent handler on the executor end: a view of one turn's run
 * whose calls go to the service's parts (events, interactions, custom tools, tokens).
 */
import { raceSignal } from "../../protocol/abort.ts";
import { RequestAbortedError } from "../../protocol/errors.ts";
import { randomId } from "../../protocol/ids.ts";
import type { CustomTools } from "./custom-tools.ts";
import type { TurnEvents } from "./events.ts";
import type { TurnInteractions } from "./interactions.ts";
import { rejected, type SessionState, type TurnRun } from "./state.ts";
import type { TurnTokens } from "./tokens.ts";
import type { Turn } from "./types.ts";

/** What a turn's calls go to: the parts of the service shared by all its turns. */
export interface TurnParts {
  /** Events and deltas. */
  readonly events: TurnEvents;
  /** Interactions with the platform. */
  readonly interactions: TurnInteractions;
  /** Custom tool calls. */
  readonly customTools: CustomTools;
  /** Model and tools tokens. */
  readonly tokens: TurnTokens;
}

/** The turn a handler is given: its session, input and credentials, and what it may do. */
export function agentTurn(
  parts: TurnParts,
  state: SessionState,
  run: TurnRun,
  first: boolean,
): Turn {
  const params = run.params;
  const { model_token: _m, tools_mcp_token: _t, ...metadata } = params.metadata ?? {};
  const queue = run.inputs;
  const token = (kind: "model" | "tools", signal: AbortSignal | undefined) =>
    raced(signal, `${kind}_token.refresh`, () => parts.tokens.token(state, run, kind));
  return {
    sessionId: params.session_id,
    turnId: params.turn_id,
    input: params.input,
    metadata: Object.freeze(metadata),
    executorSessionRef: params.executor_session_ref,
    trace: run.trace,
    first,
    signal: run.controller.signal,
    // Leaving a `for await` early must not end the inputs for the rest of the turn.
    inputs: {
      [Symbol.asyncIterator]: () => ({
        next: () => queue.next(),
        return: () => Promise.resolve({ value: undefined, done: true as const }),
      }),
    },
    takeInputs: () => queue.drain(),
    eventId: () => randomId("evt_"),
    emit: (event, options = {}) =>
      raced(
        options.signal,
        "session.event",
        () => parts.events.emit(state, run, event, options),
      ),
    delta: (eventId, delta) => parts.events.delta(state, run, eventId, delta),
    requestInteraction: (request, options = {}) =>
      parts.interactions.request(state, run, request, options.signal),
    resolveInteraction: (interactionId, answer) =>
      parts.interactions.resolve(state, interactionId, answer),
    customTool: (name, input, options = {}) =>
      raced(
        options.signal,
        "customTool",
        () => parts.customTools.call(state, run, name, input, options),
      ),
    modelToken: async (options = {}) => {
      const { url, ...credential } = await token("model", options.signal);
      return url !== undefined ? { ...credential, baseUrl: url } : credential;
    },
    toolsToken: (options = {}) => token("tools", options.signal),
  };
}

/**
 * `start()`, unless `signal` aborts first (then it rejects with `RequestAbortedError` for
 * `method`); nothing starts once it has aborted. The rejection is handled: a caller may drop it.
 */
function raced<T>(
  signal: AbortSignal | undefined,
  method: string,
  start: () => Promise<T>,
): Promise<T> {
  if (signal?.aborted) return rejected(new RequestAbortedError(method, signal.reason));
  return raceSignal(start(), signal, method);
}
