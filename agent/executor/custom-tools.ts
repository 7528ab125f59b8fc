/**
 * Custom tools on the executor end (`turn.customTool`, with `customTools`): a call is an
 * `agent.custom_tool_use` event whose result comes back as `agent.custom_tool_result`; the
 * executor owns the wait, so a call without a result ends failed after its timeout and the turn
 * goes on.
 */
import { deferred } from "../../executor/timing.ts";
import type {
  AgentCustomToolResultParams,
  ContentBlock,
  CustomToolResultResult,
} from "../../protocol/generated/contract.ts";
import { randomId } from "../../protocol/ids.ts";
import type { ServiceContext } from "./context.ts";
import { CustomToolsDisabledError, DuplicateEventIdError, TurnEndedError } from "./errors.ts";
import type { TurnEvents } from "./events.ts";
import { DEFAULT_CUSTOM_TOOL_TIMEOUT_MS } from "./options.ts";
import { type CustomWait, rejected, type SessionState, type TurnRun } from "./state.ts";
import type { CustomToolOptions, CustomToolOutcome } from "./types.ts";

/** The custom tool calls of every turn the service runs. */
export class CustomTools {
  readonly #ctx: ServiceContext;
  /** Where a call's `agent.custom_tool_use` (and a timed-out call's failed result) goes. */
  readonly #events: TurnEvents;
  /** How long a call waits for its result unless it says otherwise. */
  readonly #timeoutMs: number;

  constructor(ctx: ServiceContext, events: TurnEvents) {
    this.#ctx = ctx;
    this.#events = events;
    this.#timeoutMs = ctx.options.customToolTimeoutMs ?? DEFAULT_CUSTOM_TOOL_TIMEOUT_MS;
  }

  /**
   * Calls a custom tool: an `agent.custom_tool_use` event, then the wait for its result (failed
   * after the timeout, with an `agent.tool_result` saying so).
   */
  call(
    state: SessionState,
    run: TurnRun,
    name: string,
    input: Record<string, unknown>,
    options: CustomToolOptions,
  ): Promise<CustomToolOutcome> {
    if (!this.#ctx.options.customTools) return rejected(new CustomToolsDisabledError());
    if (run.finished) return rejected(new TurnEndedError(run.turnId));
    if (run.controller.signal.aborted) return rejected(run.controller.signal.reason);
    const toolUseId = options.eventId ?? randomId("toolu_");
    if (state.eventIds.has(toolUseId) || state.customWaits.has(toolUseId)) {
      return rejected(new DuplicateEventIdError(toolUseId));
    }
    const wait: CustomWait = { run, done: deferred<CustomToolOutcome>(), timer: undefined };
    wait.done.promise.catch(() => {});
    // Waiting before the use is even sent: a fast result must find it.
    state.customWaits.set(toolUseId, wait);
    const emitted = this.#events.emit(state, run, {
      type: "agent.custom_tool_use",
      name,
      input,
    }, { eventId: toolUseId });
    emitted.catch((error) => {
      if (state.customWaits.get(toolUseId) !== wait) return;
      state.customWaits.delete(toolUseId);
      if (wait.timer !== undefined) this.#ctx.clock.clearTimeout(wait.timer);
      wait.done.reject(error);
    });
    const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
    wait.timer = this.#ctx.clock.setTimeout(() => {
      wait.timer = undefined;
      if (state.customWaits.get(toolUseId) !== wait) return;
      // The executor owns the wait: the call ends failed, the turn goes on, a late result is refused.
      state.customWaits.delete(toolUseId);
      const content: ContentBlock[] = [{
        type: "text",
        text: `custom tool ${name} returned no result within ${timeoutMs} ms`,
      }];
      if (!run.finished) {
        this.#events.write(
          state,
          run,
          {
            type: "agent.tool_result",
            tool_use_id: toolUseId,
            is_error: true,
            content,
          },
          {},
          true,
        );
      }
      wait.done.resolve({ tool_use_id: toolUseId, content, is_error: true, timed_out: true });
    }, timeoutMs);
    return wait.done.promise;
  }

  /** Serves `agent.custom_tool_result`: the first result of a waiting call is taken. */
  result(params: AgentCustomToolResultParams): CustomToolResultResult {
    const state = this.#ctx.sessions.get(params.session_id);
    const wait = state?.customWaits.get(params.tool_use_id);
    if (!state || !wait) return { accepted: false };
    state.customWaits.delete(params.tool_use_id);
    if (wait.timer !== undefined) this.#ctx.clock.clearTimeout(wait.timer);
    wait.done.resolve({
      tool_use_id: params.tool_use_id,
      content: params.content ?? [],
      is_error: params.is_error ?? false,
      timed_out: false,
    });
    return { accepted: true };
  }

  /** Ends the custom tool calls a turn still waits for: each rejects with `reason`. */
  endFor(state: SessionState, run: TurnRun, reason: unknown): void {
    for (const [id, wait] of [...state.customWaits]) {
      if (wait.run !== run) continue;
      state.customWaits.delete(id);
      if (wait.timer !== undefined) this.#ctx.clock.clearTimeout(wait.timer);
      wait.done.reject(reason);
    }
  }
}
