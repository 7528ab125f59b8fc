/**
 * Every tool call the harness dispatched, by `tool_call_id`: what makes `callTool` idempotent
 * (a repeat returns the same outcome, the tool runs once) and `tool.result` safe to retry
 * (a repeat is acknowledged without effect, an unknown call is -32002).
 */
import type {
  Artifact,
  ContentBlock,
  ErrorInfo,
  ToolCallParams,
  ToolOutcome,
  ToolResultParams,
} from "../protocol/generated/contract.ts";
import { RecentMap } from "../protocol/bounded-set.ts";

/** The outcome of a tool call, as reported by the executor's `tool.result`. */
export interface ToolCallResult<S = Record<string, unknown>> {
  /** The call. */
  tool_call_id: string;
  /** The call's session. */
  session_id: string;
  /** How it ended: `completed` (even with `is_error`), `failed`, `canceled` or `timed_out`. */
  outcome: ToolOutcome;
  /** Rendered result (text, images, artifact references); empty when none was sent. */
  content: ContentBlock[];
  /** A tool-level error (the tool ran and reported a failure). */
  is_error: boolean;
  /** Why the call failed or timed out. */
  error?: ErrorInfo;
  /** Artifacts the call produced. */
  artifacts: Artifact[];
  /** The tool's typed result (e.g. `BashResult` for `bash`), when the executor sent one. */
  structured_content?: S;
}

/** Where a call is. */
export type ToolCallState =
  /** Waiting for a connection to send `tool.call` on. */
  | "queued"
  /** `tool.call` sent, its ack not yet received. */
  | "dispatching"
  /** Acknowledged; waiting for `tool.result`. */
  | "dispatched"
  /** Ended: a result arrived, or the call failed. */
  | "settled";

/** One call in the ledger. */
export class ToolCallEntry {
  readonly id: string;
  readonly sessionId: string;
  readonly executorId: string;
  state: ToolCallState = "queued";
  /** The connection the latest `tool.call` went out on (internal). */
  dispatchedOn: unknown = undefined;
  /** The result or failure, once settled. */
  readonly outcome: Promise<ToolCallResult>;
  /**
   * What `tool.call` sends, until the call settles: the ledger remembers thousands of finished
   * calls for idempotent repeats, and their inputs (a file's content, a command) are not needed
   * for that.
   */
  #params: ToolCallParams | undefined;
  #resolve!: (result: ToolCallResult) => void;
  #reject!: (error: unknown) => void;

  constructor(params: ToolCallParams, executorId: string) {
    this.#params = params;
    this.id = params.tool_call_id;
    this.sessionId = params.session_id;
    this.executorId = executorId;
    this.outcome = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // The caller may have stopped listening (aborted); a failure is still an answer, not a crash.
    this.outcome.catch(ignore);
  }

  /** The params of `tool.call`; a settled call is never sent again and has none. */
  get params(): ToolCallParams {
    if (!this.#params) throw new Error(`tool call ${this.id} has settled: it is not sent again`);
    return this.#params;
  }

  resolve(result: ToolCallResult): void {
    this.#settled();
    this.#resolve(result);
  }

  reject(error: unknown): void {
    this.#settled();
    this.#reject(error);
  }

  #settled(): void {
    this.state = "settled";
    this.#params = undefined;
  }
}

function ignore(): void {}

/** What `accept` decided about a `tool.result`. */
export type ResultAcceptance = "accepted" | "duplicate" | "unknown";

/** The harness-wide ledger of tool calls. */
export class ToolCallLedger {
  /** Unsettled calls: what lease expiry, session end and reconnect walk through. */
  readonly #live = new Map<string, ToolCallEntry>();
  /** Settled calls, the most recent kept for duplicate detection (none when `remember` is 0). */
  readonly #settled: RecentMap<string, ToolCallEntry> | undefined;

  /**
   * Keeps at least the `remember` most recently settled calls (and up to twice as many) for
   * duplicate detection; `0` keeps none.
   */
  constructor(remember = 10_000) {
    this.#settled = remember >= 1 ? new RecentMap(remember) : undefined;
  }

  /** The entry for a call id, live or remembered. */
  get(id: string): ToolCallEntry | undefined {
    return this.#live.get(id) ?? this.#settled?.get(id);
  }

  /** Adds a new call; the caller has checked that its id is free. */
  add(params: ToolCallParams, executorId: string): ToolCallEntry {
    const entry = new ToolCallEntry(params, executorId);
    this.#live.set(entry.id, entry);
    return entry;
  }

  /**
   * Applies a `tool.result` from executor `executorId`. A result for a call of another executor
   * or session counts as unknown: an executor can only complete its own calls.
   */
  accept(params: ToolResultParams, executorId: string): ResultAcceptance {
    const entry = this.get(params.tool_call_id);
    if (!entry || entry.executorId !== executorId || entry.sessionId !== params.session_id) {
      return "unknown";
    }
    if (entry.state === "settled") return "duplicate";
    // Built member by member: conditional spreads allocate an object each.
    const result: ToolCallResult = {
      tool_call_id: params.tool_call_id,
      session_id: params.session_id,
      outcome: params.outcome,
      content: params.content ?? [],
      is_error: params.is_error ?? false,
      artifacts: params.artifacts ?? [],
    };
    if (params.error) result.error = params.error;
    if (params.structured_content) result.structured_content = params.structured_content;
    this.settle(entry, result);
    return "accepted";
  }

  /** Settles a call with its result. */
  settle(entry: ToolCallEntry, result: ToolCallResult): void {
    if (entry.state === "settled") return;
    entry.resolve(result);
    this.#remembered(entry);
  }

  /** Settles a call with a failure. */
  fail(entry: ToolCallEntry, error: unknown): void {
    if (entry.state === "settled") return;
    entry.reject(error);
    this.#remembered(entry);
  }

  /** The unsettled calls matching `filter`. */
  pending(filter: (entry: ToolCallEntry) => boolean): ToolCallEntry[] {
    const out: ToolCallEntry[] = [];
    for (const entry of this.#live.values()) if (filter(entry)) out.push(entry);
    return out;
  }

  #remembered(entry: ToolCallEntry): void {
    this.#live.delete(entry.id);
    this.#settled?.set(entry.id, entry);
  }
}
