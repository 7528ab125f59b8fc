/**
 * Every tool call the harness dispatched, by `tool_call_id`: what makes `callTool` idempotent
 * (a repeat returns the same outcome, the tool runs once) and `tool.result` safe to retry (a
 * repeat is acknowledged without effect, an unknown call is -32002).
 *
 * With a store, a call is written before `tool.call` is sent, and again with its result before
 * the `tool.result` is acknowledged (one key, `c/<tool_call_id>`): a harness started again on
 * the store finds the calls still running, sends them again (the executor runs a
 * `tool_call_id` once), and answers a resent result as a duplicate. The store remembers as many
 * settled calls as memory does (`remember`), the oldest deleted as new ones settle.
 */
import type { ToolCallParams, ToolResultParams } from "../protocol/generated/contract.ts";
import { FrameTooLargeError, ProtocolError } from "../protocol/errors.ts";
import { protocolErrorFromWire, UnavailableError } from "../protocol/generated/errors.ts";
import { BoundedSet, RecentMap } from "../protocol/bounded-set.ts";
import { traceIdOf } from "../protocol/trace-context.ts";
import { ToolOutcomeUnknownError, type ToolOutcomeUnknownReason } from "./errors.ts";
import { then } from "./maybe.ts";
import { type CallRecord, keys, type StoredFailure, type ToolCallResult } from "./records.ts";
import {
  type HarnessStore,
  isPromiseLike,
  keyTextProblem,
  type MaybePromise,
  type StoreOp,
} from "./store/store.ts";

export type { ToolCallResult } from "./records.ts";

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
  /** The tool's name. */
  readonly tool: string;
  /** The trace id of the trace context `tool.call` carries (`params._meta`), if it carries one. */
  readonly traceId: string | undefined;
  state: ToolCallState = "queued";
  /**
   * The connection the latest `tool.call` went out on, while the call is pending: a settled
   * call forgets it (the ledger remembers thousands of settled calls, and a connection holds its
   * socket, peer and buffers).
   */
  dispatchedOn: object | undefined = undefined;
  /** How many times `tool.call` went out: an ack or failure of an earlier sending is stale. */
  dispatches = 0;
  /**
   * When `tool.call` first went out on its current connection (the ledger's clock), `NaN`
   * before: bounds waiting for an ack.
   */
  firstSentAt = NaN;
  /**
   * When `callTool` made it (the ledger's `now`, for the duration metric); `NaN` for a call
   * read back from the store, whose start this harness did not see.
   */
  startedAt = NaN;
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
    this.tool = params.tool;
    const meta = (params as { _meta?: { traceparent?: unknown } | null })._meta;
    this.traceId = meta === undefined ? undefined : traceIdOf(meta?.traceparent);
    this.outcome = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // The caller may have stopped listening (aborted); a failure is still an answer, not a crash.
    this.outcome.catch(ignore);
  }

  /** A call settled before (found in the store): its outcome is known at once. */
  static settled(
    id: string,
    sessionId: string,
    stored: CallRecord,
  ): ToolCallEntry {
    const entry = new ToolCallEntry(
      { session_id: sessionId, tool_call_id: id, tool: "", input: {} },
      stored.executorId,
    );
    if (stored.result) entry.resolve(stored.result);
    else entry.reject(failureError(id, sessionId, stored.failure));
    return entry;
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
    this.writtenOff = true;
    this.#reject(error);
  }

  /**
   * Settled by the harness with a failure (refused, its outcome unknown), not by a result: a
   * `tool.result` for it afterwards is no repeat of an accepted one.
   */
  writtenOff = false;

  #settled(): void {
    this.state = "settled";
    this.#params = undefined;
    this.dispatchedOn = undefined;
  }
}

function ignore(): void {}

/** What `accept` decided about a `tool.result`. */
export type ResultAcceptance = "accepted" | "duplicate" | "unknown";

/** Options of a {@linkcode ToolCallLedger}. */
export interface ToolCallLedgerOptions {
  /**
   * Keeps at least this many most recently settled calls (and up to twice as many) in memory
   * for duplicate detection, and this many in the store; `0` keeps none. Default 10,000.
   */
  remember?: number;
  /** Where calls and results are written before they are sent and acknowledged. */
  store?: HarnessStore;
  /** Told of each call that settles (with its result, or why it failed). */
  onSettled?: (entry: ToolCallEntry, result: ToolCallResult | undefined, error: unknown) => void;
  /** Stamps each new call's {@linkcode ToolCallEntry.startedAt}. Default: none (`NaN`). */
  now?: () => number;
}

/** The harness-wide ledger of tool calls. */
export class ToolCallLedger {
  /** Unsettled calls: what lease expiry, session end and reconnect walk through. */
  readonly #live = new Map<string, ToolCallEntry>();
  /** Settled calls, the most recent kept for duplicate detection (none when `remember` is 0). */
  readonly #settled: RecentMap<string, ToolCallEntry> | undefined;
  /** The settled calls kept in the store, oldest first: beyond the limit they are deleted. */
  readonly #stored: BoundedSet<string> | undefined;
  readonly #store: HarnessStore | undefined;
  readonly #onSettled: ToolCallLedgerOptions["onSettled"];
  readonly #now: (() => number) | undefined;

  constructor(options: ToolCallLedgerOptions | number = {}) {
    const { remember = 10_000, store, onSettled, now } = typeof options === "number"
      ? { remember: options } as ToolCallLedgerOptions
      : options;
    this.#settled = remember >= 1 ? new RecentMap(remember) : undefined;
    this.#store = store;
    this.#onSettled = onSettled;
    this.#now = now;
    this.#stored = store && remember >= 1 ? new BoundedSet(remember) : undefined;
  }

  /** How many calls are not settled yet. */
  get inFlight(): number {
    return this.#live.size;
  }

  /** The entry for a call id held in memory, live or remembered. */
  get(id: string): ToolCallEntry | undefined {
    return this.#live.get(id) ?? this.#settled?.get(id);
  }

  /**
   * The entry for a call id, whatever its session: in memory, else settled in the store (a call
   * settled before the harness restarted). Calls still pending were loaded at recovery
   * ({@linkcode ToolCallLedger.recover}).
   */
  lookup(id: string): MaybePromise<ToolCallEntry | undefined> {
    const known = this.get(id);
    if (known || !this.#store) return known;
    return this.#settledInStore(id);
  }

  #settledInStore(id: string): MaybePromise<ToolCallEntry | undefined> {
    return then(this.#store!.get<CallRecord>(keys.call(id)), (stored) => {
      if (!stored?.settled) return undefined;
      const raced = this.get(id);
      if (raced) return raced;
      const entry = ToolCallEntry.settled(id, stored.sessionId, stored);
      this.#settled?.set(id, entry);
      return entry;
    });
  }

  /**
   * Adds a new call (the caller has checked that its id is free), written to the store before
   * it returns: only then may `tool.call` be sent.
   */
  add(params: ToolCallParams, executorId: string): MaybePromise<ToolCallEntry> {
    const entry = new ToolCallEntry(params, executorId);
    if (this.#now) entry.startedAt = this.#now();
    const store = this.#store;
    if (!store) {
      this.#live.set(entry.id, entry);
      return entry;
    }
    const pending: CallRecord = { sessionId: params.session_id, executorId, params };
    const written = store.write([{ put: keys.call(entry.id), value: pending }]);
    return then(written, () => {
      this.#live.set(entry.id, entry);
      return entry;
    });
  }

  /**
   * Applies a `tool.result` from executor `executorId`, stored before it returns (the caller
   * then acknowledges it). A result for a call of another executor or session counts as
   * unknown: an executor can only complete its own calls. A store that fails refuses the
   * result with -32004 (the executor sends it again).
   */
  accept(params: ToolResultParams, executorId: string): MaybePromise<ResultAcceptance> {
    const entry = this.get(params.tool_call_id);
    if (!entry) {
      // An id no store can hold was never sent (`callTool` refuses it): it names no call.
      if (!this.#store || keyTextProblem(params.tool_call_id) !== undefined) return "unknown";
      // Settled before a restart, its acknowledgement lost: the resend is a duplicate.
      return then(
        this.#store.get<CallRecord>(keys.call(params.tool_call_id)),
        (stored) =>
          stored?.settled && stored.result !== undefined && stored.executorId === executorId &&
            stored.sessionId === params.session_id
            ? "duplicate"
            : "unknown",
      );
    }
    if (entry.executorId !== executorId || entry.sessionId !== params.session_id) {
      return "unknown";
    }
    // `duplicate` is a repeat of an accepted result; a call the harness wrote off took none.
    if (entry.state === "settled") return entry.writtenOff ? "unknown" : "duplicate";
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
    return then(this.#write(entry, { executorId, result }), () => {
      if (entry.state === "settled") return "duplicate";
      this.#remember(entry);
      entry.resolve(result);
      this.#onSettled?.(entry, result, undefined);
      return "accepted";
    });
  }

  /**
   * Settles a call with a failure, recorded in the store as well unless `record` is false (the
   * harness closes: the next one on the store takes the call up).
   */
  fail(entry: ToolCallEntry, error: unknown, record = true): MaybePromise<void> {
    if (entry.state === "settled") return;
    const failure = storedFailure(error);
    const done = () => {
      if (entry.state === "settled") return;
      this.#remember(entry);
      entry.reject(error);
      this.#onSettled?.(entry, undefined, error);
    };
    if (!this.#store || !record) return done();
    let written: MaybePromise<void>;
    try {
      written = this.#write(entry, {
        executorId: entry.executorId,
        ...(failure ? { failure } : {}),
      });
    } catch {
      // The failure is reported all the same: a lost record only costs a repeat its answer.
      return done();
    }
    // Likewise when the write is refused later (a fenced harness, a lost database): nobody
    // awaits this, and a rejection here would end the process.
    return isPromiseLike(written) ? Promise.resolve(written).then(done, done) : done();
  }

  /** The unsettled calls matching `filter`. */
  pending(filter: (entry: ToolCallEntry) => boolean): ToolCallEntry[] {
    const out: ToolCallEntry[] = [];
    for (const entry of this.#live.values()) if (filter(entry)) out.push(entry);
    return out;
  }

  /**
   * Loads the calls a previous run of the harness left pending, as queued entries: they are
   * sent again when their executor is connected. Calls `keep` refuses (their executor or
   * session is no longer held) are recorded as failed instead; settled ones stay in the store,
   * the oldest forgotten as new ones settle.
   */
  recover(keep: (pending: CallRecord) => boolean): MaybePromise<ToolCallEntry[]> {
    const store = this.#store;
    if (!store) return [];
    return then(store.list<CallRecord>(keys.calls), (rows) => {
      const out: ToolCallEntry[] = [];
      const stale: StoreOp[] = [];
      for (const [key, record] of rows) {
        const id = key.slice(keys.calls.length);
        if (record.settled || !record.params) {
          this.#stored?.add(id);
          continue;
        }
        if (!keep(record)) {
          const failure: StoredFailure = { kind: "unknown", reason: "session_lost" };
          stale.push({
            put: key,
            value: {
              sessionId: record.sessionId,
              executorId: record.executorId,
              settled: true,
              failure,
            },
          });
          this.#stored?.add(id);
          continue;
        }
        if (this.#live.has(id)) continue;
        const entry = new ToolCallEntry(record.params, record.executorId);
        this.#live.set(entry.id, entry);
        out.push(entry);
      }
      if (stale.length === 0) return out;
      return then(store.write(stale), () => out);
    });
  }

  /** Writes a call's settlement (and forgets the oldest settled call beyond `remember`). */
  #write(
    entry: ToolCallEntry,
    settled: Omit<CallRecord, "sessionId" | "settled">,
  ): MaybePromise<void> {
    const store = this.#store;
    if (!store) return;
    const record: CallRecord = { sessionId: entry.sessionId, settled: true, ...settled };
    const evicted = this.#stored?.add(entry.id);
    const batch: StoreOp[] = evicted === undefined
      ? [{ put: keys.call(entry.id), value: record }]
      : [{ put: keys.call(entry.id), value: record }, { delete: keys.call(evicted) }];
    let written: MaybePromise<void>;
    try {
      written = store.write(batch);
    } catch {
      throw storeUnavailable("tool result");
    }
    return isPromiseLike(written)
      ? Promise.resolve(written).catch(() => Promise.reject(storeUnavailable("tool result")))
      : written;
  }

  #remember(entry: ToolCallEntry): void {
    this.#live.delete(entry.id);
    this.#settled?.set(entry.id, entry);
  }
}

/** The refusal of a request the store could not record: the executor sends it again. */
export function storeUnavailable(what: string): UnavailableError {
  return new UnavailableError(`${what} store unavailable`, { reason: "backend_unavailable" });
}

/** How a failure is kept in the store, when it can be given again to a repeat. */
function storedFailure(error: unknown): StoredFailure | undefined {
  if (error instanceof ProtocolError) {
    return {
      kind: "protocol",
      code: error.code,
      message: error.message,
      ...(error.data !== undefined ? { data: error.data } : {}),
    };
  }
  if (error instanceof ToolOutcomeUnknownError) return { kind: "unknown", reason: error.reason };
  if (error instanceof FrameTooLargeError) {
    return { kind: "too_large", bytes: error.bytes, limit: error.limit };
  }
  return undefined;
}

/** The error a stored failure stands for. */
function failureError(id: string, sessionId: string, failure: StoredFailure | undefined): Error {
  if (failure?.kind === "too_large") return new FrameTooLargeError(failure.bytes, failure.limit);
  if (failure?.kind === "protocol") {
    return protocolErrorFromWire({
      code: failure.code,
      message: failure.message,
      ...(failure.data !== undefined ? { data: failure.data } : {}),
    });
  }
  return new ToolOutcomeUnknownError(
    id,
    sessionId,
    (failure?.reason ?? "dispatch_failed") as ToolOutcomeUnknownReason,
  );
}
