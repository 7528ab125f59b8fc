/**
 * The durable event log of one session: `session.event` requests deduplicated and kept in
 * order, the JSON-RPC response being the executor's ACK.
 *
 * - A tool executor's event is idempotent by its JSON-RPC id (resent with the same id).
 * - An agent event (turn_id, event_id, sequence) is deduplicated by (session_id, event_id);
 *   a sequence at or below the acknowledged one is a duplicate; a gap is -32013
 *   `sequence_gap` with `expected_sequence`.
 *
 * Persistence plugs in through a {@linkcode SessionEventSink}: it runs before the ACK, so an
 * event the sink did not take is not acknowledged and the executor sends it again.
 */
import type { JsonRpcId } from "../protocol/jsonrpc.ts";
import {
  AgentEventSchema,
  isAgentEvent,
  type SessionEventParams,
  type SessionEventPayload,
  type SessionEventResult,
} from "../protocol/generated/contract.ts";
import {
  ConflictError,
  InvalidParamsError,
  UnavailableError,
} from "../protocol/generated/errors.ts";
import { RecentIds } from "../protocol/bounded-set.ts";

/** One accepted durable event. */
export interface SessionEventRecord {
  /** 1-based position in the session's log. */
  readonly index: number;
  /** The session. */
  readonly session_id: string;
  /** The event (an `AgentEvent` for agent executors). */
  readonly event: SessionEventPayload;
  /** Agent executors: the turn. */
  readonly turn_id?: string;
  /** Agent executors: the event's id. */
  readonly event_id?: string;
  /** Agent executors: the per-session sequence. */
  readonly sequence?: number;
  /** When the harness accepted it (ms since the epoch, harness clock). */
  readonly received_at: number;
}

/**
 * Stores an accepted event durably before it is acknowledged. Throwing (or rejecting) refuses
 * the event with -32004 `backend_unavailable`; the executor retries it.
 */
export type SessionEventSink = (record: SessionEventRecord) => void | Promise<void>;

/** Options of an {@linkcode EventLog}. */
export interface EventLogOptions {
  /** Where accepted events are persisted before the ACK. */
  sink?: SessionEventSink;
  /** The time source for `received_at`. */
  now?: () => number;
  /** How many JSON-RPC ids and event ids to remember for deduplication. Default 10,000. */
  remember?: number;
}

/** The event log of one session. */
export class EventLog {
  /** The session. */
  readonly sessionId: string;
  readonly #records: SessionEventRecord[] = [];
  readonly #rpcIds: RecentIds<string>;
  readonly #eventIds: RecentIds<string>;
  readonly #sink: SessionEventSink | undefined;
  readonly #now: () => number;
  #ackedSequence = 0;
  #tail: Promise<unknown> = Promise.resolve();
  #closed = false;
  #changed!: Promise<void>;
  #signalChange!: () => void;

  /** An empty log of one session. */
  constructor(sessionId: string, options: EventLogOptions = {}) {
    this.sessionId = sessionId;
    this.#sink = options.sink;
    this.#now = options.now ?? Date.now;
    this.#rpcIds = new RecentIds(options.remember ?? 10_000);
    this.#eventIds = new RecentIds(options.remember ?? 10_000);
    this.#armChange();
  }

  /** The highest accepted agent sequence (0 before the first). */
  get ackedSequence(): number {
    return this.#ackedSequence;
  }

  /** The accepted events so far, in order. */
  get records(): readonly SessionEventRecord[] {
    return this.#records;
  }

  /** Whether the log is closed (the session ended): iterators finish after the last record. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Applies one `session.event` request with JSON-RPC id `rpcId`; resolves with the ACK.
   * Requests are applied one at a time in arrival order, so pipelined events keep their order.
   */
  append(params: SessionEventParams, rpcId: JsonRpcId): Promise<SessionEventResult> {
    const applied = this.#tail.then(() => this.#apply(params, rpcId));
    this.#tail = applied.catch(() => {});
    return applied;
  }

  /** Ends the log: iterators finish once they have yielded every record. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#signalChange();
  }

  /**
   * Yields every record from position `from` (0-based, default 0), then new ones as they are
   * accepted, until the log closes or `signal` aborts.
   */
  async *read(
    options: { from?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<SessionEventRecord, void, undefined> {
    let next = options.from ?? 0;
    const signal = options.signal;
    const aborted = signal
      ? new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener("abort", () => resolve(), { once: true });
      })
      : undefined;
    for (;;) {
      while (next < this.#records.length) {
        if (signal?.aborted) return;
        yield this.#records[next++];
      }
      if (this.#closed || signal?.aborted) return;
      const changed = this.#changed;
      await (aborted ? Promise.race([changed, aborted]) : changed);
    }
  }

  async #apply(params: SessionEventParams, rpcId: JsonRpcId): Promise<SessionEventResult> {
    const rpcKey = `${typeof rpcId}:${rpcId}`;
    if (this.#rpcIds.has(rpcKey)) return this.#duplicate();
    const agent = params.event_id !== undefined || params.sequence !== undefined ||
      params.turn_id !== undefined;
    if (agent) {
      if (params.event_id !== undefined && this.#eventIds.has(params.event_id)) {
        this.#rpcIds.add(rpcKey);
        return this.#duplicate();
      }
      if (params.sequence !== undefined) {
        if (params.sequence <= this.#ackedSequence) {
          this.#rpcIds.add(rpcKey);
          return this.#duplicate();
        }
        if (params.sequence > this.#ackedSequence + 1) {
          throw new ConflictError("sequence gap", {
            reason: "sequence_gap",
            expected_sequence: this.#ackedSequence + 1,
          });
        }
      }
      const checked = isAgentEvent(params.event)
        ? undefined
        : AgentEventSchema.safeParse(params.event);
      if (checked && !checked.success) {
        throw new InvalidParamsError("invalid params: event is not an AgentEvent", {
          field: "/event",
          issues: checked.error.issues.map((i) => ({
            path: ["event", ...i.path.map(String)],
            message: i.message,
            code: i.code,
          })),
        });
      }
    }
    const record: SessionEventRecord = {
      index: this.#records.length + 1,
      session_id: this.sessionId,
      event: params.event,
      ...(params.turn_id !== undefined ? { turn_id: params.turn_id } : {}),
      ...(params.event_id !== undefined ? { event_id: params.event_id } : {}),
      ...(params.sequence !== undefined ? { sequence: params.sequence } : {}),
      received_at: this.#now(),
    };
    if (this.#sink) {
      try {
        await this.#sink(record);
      } catch {
        // Not stored, so not acknowledged: the executor keeps the event and sends it again.
        throw new UnavailableError("event store unavailable", { reason: "backend_unavailable" });
      }
    }
    this.#records.push(record);
    this.#rpcIds.add(rpcKey);
    if (params.event_id !== undefined) this.#eventIds.add(params.event_id);
    if (params.sequence !== undefined) this.#ackedSequence = params.sequence;
    this.#signalChange();
    return this.#ackedSequence > 0 ? { acked_sequence: this.#ackedSequence } : {};
  }

  #duplicate(): SessionEventResult {
    return this.#ackedSequence > 0
      ? { acked_sequence: this.#ackedSequence, duplicate: true }
      : { duplicate: true };
  }

  #armChange(): void {
    this.#changed = new Promise((resolve) => {
      this.#signalChange = () => {
        resolve();
        this.#armChange();
      };
    });
  }
}
