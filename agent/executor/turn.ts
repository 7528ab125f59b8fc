/**
 * The {@linkcode Turn} handed to an agent handler on the executor end: a view of one turn's run
 * whose calls go to the service's parts (events, interactions, custom tools, tokens).
 */
import type {
  AgentEvent,
  ContentBlock,
  EventDelta,
  TurnMetadata,
} from "../../protocol/generated/contract.ts";
import { aborted, raceSignal, throwIfAborted } from "../../protocol/abort.ts";
import { RequestAbortedError } from "../../protocol/errors.ts";
import { randomId } from "../../protocol/ids.ts";
import type { TraceContext } from "../../protocol/trace-context.ts";
import type { CustomTools } from "./custom-tools.ts";
import type { TurnEvents } from "./events.ts";
import type { TurnInteractions } from "./interactions.ts";
import { rejected, type SessionState, type TurnRun } from "./state.ts";
import type { TurnTokens } from "./tokens.ts";
import type {
  CustomToolOptions,
  CustomToolOutcome,
  EmitOptions,
  EmittedEvent,
  InteractionAnswer,
  InteractionRequest,
  LocalAnswer,
  ModelCredential,
  ToolsCredential,
  Turn,
  TurnInput,
} from "./types.ts";

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
export class AgentTurn implements Turn {
  readonly sessionId: string;
  readonly turnId: string;
  readonly input: readonly ContentBlock[];
  readonly metadata: Readonly<TurnMetadata>;
  readonly executorSessionRef: string | undefined;
  readonly trace: TraceContext | undefined;
  readonly first: boolean;
  readonly inputs: AsyncIterable<TurnInput>;
  readonly #parts: TurnParts;
  readonly #state: SessionState;
  readonly #run: TurnRun;

  constructor(parts: TurnParts, state: SessionState, run: TurnRun, first: boolean) {
    this.#parts = parts;
    this.#state = state;
    this.#run = run;
    const params = run.params;
    this.sessionId = params.session_id;
    this.turnId = params.turn_id;
    this.input = params.input;
    const { model_token: _m, tools_mcp_token: _t, ...metadata } = params.metadata ?? {};
    this.metadata = Object.freeze(metadata);
    this.executorSessionRef = params.executor_session_ref;
    this.trace = run.trace;
    this.first = first;
    const queue = run.inputs;
    // Leaving a `for await` early must not end the inputs for the rest of the turn.
    this.inputs = {
      [Symbol.asyncIterator]: () => ({
        next: () => queue.next(),
        return: () => Promise.resolve({ value: undefined, done: true as const }),
      }),
    };
  }

  get signal(): AbortSignal {
    return this.#run.controller.signal;
  }

  takeInputs(): TurnInput[] {
    return this.#run.inputs.drain();
  }

  eventId(): string {
    return randomId("evt_");
  }

  emit(event: AgentEvent, options: EmitOptions = {}): Promise<EmittedEvent> {
    const signal = options.signal;
    if (signal?.aborted) return rejected(new RequestAbortedError("session.event", signal.reason));
    return raceSignal(
      this.#parts.events.emit(this.#state, this.#run, event, options),
      signal,
      "session.event",
    );
  }

  delta(eventId: string, delta: EventDelta): void {
    this.#parts.events.delta(this.#state, this.#run, eventId, delta);
  }

  requestInteraction(
    request: InteractionRequest,
    options: { signal?: AbortSignal } = {},
  ): Promise<InteractionAnswer> {
    return this.#parts.interactions.request(this.#state, this.#run, request, options.signal);
  }

  resolveInteraction(interactionId: string, answer: LocalAnswer): boolean {
    return this.#parts.interactions.resolve(this.#state, interactionId, answer);
  }

  customTool(
    name: string,
    input: Record<string, unknown>,
    options: CustomToolOptions = {},
  ): Promise<CustomToolOutcome> {
    const signal = options.signal;
    if (signal?.aborted) return rejected(new RequestAbortedError("customTool", signal.reason));
    return raceSignal(
      this.#parts.customTools.call(this.#state, this.#run, name, input, options),
      signal,
      "customTool",
    );
  }

  async modelToken(options: { signal?: AbortSignal } = {}): Promise<ModelCredential> {
    throwIfAborted(options.signal, "model_token.refresh");
    const token = await raceSignal(
      this.#parts.tokens.token(this.#state, this.#run, "model"),
      options.signal,
      "model_token.refresh",
    );
    return {
      token: token.token,
      expiresAt: token.expiresAt,
      ...(token.url !== undefined ? { baseUrl: token.url } : {}),
    };
  }

  toolsToken(options: { signal?: AbortSignal } = {}): Promise<ToolsCredential> {
    const signal = options.signal;
    return aborted(signal, "tools_token.refresh") ??
      raceSignal(
        this.#parts.tokens.token(this.#state, this.#run, "tools"),
        signal,
        "tools_token.refresh",
      );
  }
}
