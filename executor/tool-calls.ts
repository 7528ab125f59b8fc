/**
 * Serving `tool.call` and `tool.cancel`: refuse what cannot run before any ack, acknowledge the
 * rest at once, run the handler, and report its outcome with `tool.result` through the result
 * outbox. A `tool_call_id` runs at most once per client.
 */
import type { Clock, TimerHandle } from "../protocol/clock.ts";
import type {
  Ack,
  Artifact,
  ToolCallParams,
  ToolCancelParams,
  ToolCancelResult,
  ToolOutcome,
  ToolProgressParams,
  ToolResultParams,
} from "../protocol/generated/contract.ts";
import { CapabilityMissingError, NotFoundError } from "../protocol/generated/errors.ts";
import { exceedsBytes } from "../protocol/jsonrpc.ts";
import type { Logger } from "../protocol/logger.ts";
import type { ArtifactUpload } from "./artifacts.ts";
import type { ResultOutbox } from "./result-outbox.ts";
import type { SecretScrubber } from "./secrets.ts";
import type { ExecutorSession, SessionTable } from "./sessions.ts";
import { describeError } from "./timing.ts";
import { InvalidToolOutputError, renderToolOutput, ToolError } from "./tool-results.ts";
import type { AnyToolHandler, ToolContext, ToolProgressUpdate } from "./tool-slots.ts";

/** How many finished call ids are remembered to recognize duplicates. */
const REMEMBERED_CALLS = 50_000;

/** Why a call's signal was aborted. */
export class ToolCallAbort extends Error {
  /** The outcome the abort reports. */
  readonly outcome: "canceled" | "timed_out";
  constructor(outcome: "canceled" | "timed_out", why: string) {
    super(why);
    this.name = "ToolCallAbort";
    this.outcome = outcome;
  }
}

interface RunningCall {
  readonly params: ToolCallParams;
  readonly controller: AbortController;
  /** Reporting: the handler is done; the result is on its way. */
  reporting: boolean;
  readonly finished: Promise<void>;
}

/** What the runner needs from the client. */
export interface ToolCallRunnerDeps {
  clock: Clock;
  logger: Logger;
  scrubber: SecretScrubber;
  sessions: SessionTable;
  results: ResultOutbox;
  /** The handler serving a tool, or undefined when the tool is not served (or withdrawn). */
  handlerFor(tool: string): AnyToolHandler | undefined;
  /** Sends `tool.progress`; throws when not connected. */
  notifyProgress(params: ToolProgressParams): void;
  /** Uploads an artifact; absent when no endpoint is configured. */
  upload: ((upload: ArtifactUpload) => Promise<Artifact>) | undefined;
  inlineBytes: number;
  maxFrameBytes: number;
  /** Ends a one-shot session once its call is reported. */
  endOneShot(session: ExecutorSession): void;
}

/** Runs the tool calls of one client. */
export class ToolCallRunner {
  readonly #deps: ToolCallRunnerDeps;
  readonly #running = new Map<string, RunningCall>();
  /** Ids of calls that ran, oldest first (a Map keeps insertion order). */
  readonly #finished = new Map<string, true>();
  /** Calls per session that have not finished reporting. */
  readonly #perSession = new Map<string, Set<RunningCall>>();

  constructor(deps: ToolCallRunnerDeps) {
    this.#deps = deps;
  }

  /** Calls whose handler runs or whose result is being delivered. */
  get active(): number {
    return this.#running.size;
  }

  /** Serves `tool.call`: throws the refusal, or acknowledges and starts the call. */
  call(params: ToolCallParams): Ack {
    const id = params.tool_call_id;
    if (this.#running.has(id) || this.#finished.has(id)) return { ok: true, duplicate: true };
    const handler = this.#deps.handlerFor(params.tool);
    if (!handler) {
      throw new CapabilityMissingError(`tool ${params.tool} is not served`, {
        reason: "capability_missing",
        capability: `tool:${params.tool}`,
      });
    }
    const session = this.#deps.sessions.get(params.session_id);
    if (!session || !this.#deps.sessions.isLive(session)) {
      throw new NotFoundError("unknown session", { reason: "unknown_session" });
    }
    const controller = new AbortController();
    let finish!: () => void;
    const call: RunningCall = {
      params,
      controller,
      reporting: false,
      finished: new Promise<void>((resolve) => (finish = resolve)),
    };
    this.#running.set(id, call);
    let set = this.#perSession.get(session.id);
    if (!set) this.#perSession.set(session.id, set = new Set());
    set.add(call);
    // The ack is sent when this returns; the handler starts after it.
    queueMicrotask(() => {
      this.#run(call, handler, session).catch((error) => {
        this.#deps.logger.error("tool call runner failed", { error: describeError(error) });
      }).finally(() => {
        this.#running.delete(id);
        this.#remember(id);
        set!.delete(call);
        if (set!.size === 0) this.#perSession.delete(session.id);
        finish();
        if (session.oneShot && set!.size === 0) this.#deps.endOneShot(session);
      });
    });
    return { ok: true };
  }

  /** Serves `tool.cancel`. */
  cancel(params: ToolCancelParams): ToolCancelResult {
    const call = this.#running.get(params.tool_call_id);
    if (!call || call.reporting || call.controller.signal.aborted) return { canceled: false };
    if (params.session_id && params.session_id !== call.params.session_id) {
      return { canceled: false };
    }
    call.controller.abort(new ToolCallAbort("canceled", params.reason ?? "canceled"));
    return { canceled: true };
  }

  /** Resolves once every call of the session has finished and reported. */
  async settled(sessionId: string): Promise<void> {
    const set = this.#perSession.get(sessionId);
    if (set) await Promise.all([...set].map((c) => c.finished));
  }

  /** Resolves once every call has finished and reported. */
  async allSettled(): Promise<void> {
    await Promise.all([...this.#running.values()].map((c) => c.finished));
  }

  /** Aborts every running handler (the client stops). */
  abortAll(reason: string): void {
    for (const call of this.#running.values()) {
      if (!call.controller.signal.aborted) {
        call.controller.abort(new ToolCallAbort("canceled", reason));
      }
    }
  }

  #remember(id: string): void {
    this.#finished.set(id, true);
    if (this.#finished.size > REMEMBERED_CALLS) {
      this.#finished.delete(this.#finished.keys().next().value!);
    }
  }

  async #run(call: RunningCall, handler: AnyToolHandler, session: ExecutorSession): Promise<void> {
    const { params, controller } = call;
    const { clock } = this.#deps;
    const onSessionEnd = () =>
      controller.abort(new ToolCallAbort("canceled", "the session is ending"));
    if (session.signal.aborted) onSessionEnd();
    else session.signal.addEventListener("abort", onSessionEnd, { once: true });
    let timer: TimerHandle | undefined;
    if (params.timeout_ms !== undefined) {
      timer = clock.setTimeout(
        () => controller.abort(new ToolCallAbort("timed_out", "timeout_ms passed")),
        params.timeout_ms,
      );
    }
    const context: ToolContext = {
      sessionId: params.session_id,
      toolCallId: params.tool_call_id,
      tool: params.tool,
      session,
      timeoutMs: params.timeout_ms,
      signal: controller.signal,
      progress: (update) => this.#progress(call, update),
    };
    let result: ToolResultParams;
    try {
      result = await this.#outcome(call, handler, context);
    } finally {
      if (timer !== undefined) clock.clearTimeout(timer);
      session.signal.removeEventListener("abort", onSessionEnd);
    }
    call.reporting = true;
    await this.#deps.results.send(this.#fitFrame(result));
  }

  /** Runs the handler and turns how it ended into the result to report. */
  async #outcome(
    call: RunningCall,
    handler: AnyToolHandler,
    context: ToolContext,
  ): Promise<ToolResultParams> {
    const { params, controller } = call;
    const base = { session_id: params.session_id, tool_call_id: params.tool_call_id };
    // An abort ends the call at once, whether or not the handler notices its signal.
    const aborted = new Promise<"aborted">((resolve) => {
      if (controller.signal.aborted) resolve("aborted");
      else controller.signal.addEventListener("abort", () => resolve("aborted"), { once: true });
    });
    const abortedResult = (): ToolResultParams => {
      const reason = controller.signal.reason;
      const outcome: ToolOutcome = reason instanceof ToolCallAbort ? reason.outcome : "canceled";
      return {
        ...base,
        outcome,
        error: outcome === "timed_out"
          ? { message: `timed out after ${params.timeout_ms} ms`, code: "timeout" }
          : { message: "canceled", code: "canceled" },
      };
    };
    try {
      // A call aborted before its handler started (its session stopped first) never starts it.
      const ran = Promise.resolve().then(() =>
        controller.signal.aborted ? new Promise<never>(() => {}) : handler(params.input, context)
      );
      const first = await Promise.race([ran.then((value) => ({ value })), aborted]);
      if (first === "aborted") {
        ran.catch(() => {}); // the handler's late end is of no interest any more
        return abortedResult();
      }
      const rendered = await renderToolOutput(params.tool, first.value, {
        toolCallId: params.tool_call_id,
        inlineBytes: this.#deps.inlineBytes,
        upload: this.#deps.upload,
        onUploadFailed: (error) =>
          this.#deps.logger.warn("artifact upload failed: sending the preview only", {
            tool_call_id: params.tool_call_id,
            error: describeError(error),
          }),
      });
      if (controller.signal.aborted) return abortedResult();
      return { ...base, outcome: "completed", ...rendered };
    } catch (error) {
      if (controller.signal.aborted) return abortedResult();
      if (error instanceof ToolError) {
        return {
          ...base,
          outcome: "completed",
          is_error: true,
          content: error.content ??
            [{ type: "text", text: this.#deps.scrubber.scrub(error.message) }],
        };
      }
      const invalid = error instanceof InvalidToolOutputError;
      this.#deps.logger.warn("tool handler failed", {
        tool: params.tool,
        tool_call_id: params.tool_call_id,
        error: describeError(error),
      });
      return {
        ...base,
        outcome: "failed",
        error: {
          message: this.#deps.scrubber.scrub(
            error instanceof Error ? error.message || error.name : String(error),
          ),
          code: invalid ? "invalid_result" : "handler_failed",
        },
      };
    }
  }

  /** A result too large for one frame is reported as a failure instead of being lost. */
  #fitFrame(result: ToolResultParams): ToolResultParams {
    const limit = this.#deps.maxFrameBytes - 4096;
    if (!exceedsBytes(JSON.stringify(result), limit)) return result;
    this.#deps.logger.warn("tool result too large for one frame", {
      tool_call_id: result.tool_call_id,
    });
    return {
      session_id: result.session_id,
      tool_call_id: result.tool_call_id,
      outcome: "failed",
      error: {
        message: "the result is larger than the frame limit; return large output as an artifact",
        code: "result_too_large",
      },
    };
  }

  #progress(call: RunningCall, update: string | ToolProgressUpdate): void {
    if (call.reporting || call.controller.signal.aborted) return;
    const fields = typeof update === "string" ? { message: update } : update;
    try {
      this.#deps.notifyProgress({
        session_id: call.params.session_id,
        tool_call_id: call.params.tool_call_id,
        ...fields,
      });
    } catch (error) {
      // Progress is lossy: a closed connection drops it. Anything else is the caller's bug.
      if ((error as Error)?.name === "NotConnectedError") return;
      if ((error as Error)?.name === "ConnectionClosedError") return;
      throw error;
    }
  }
}
