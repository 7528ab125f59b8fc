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
 *
 * The log keeps the most recent events in memory, within a count and a size
 * ({@linkcode EventLogOptions.maxRecords}, {@linkcode EventLogOptions.maxBytes}): older ones are
 * dropped (the sink has every one of them), and a reader that falls behind continues at the
 * oldest record still kept, the jump in {@linkcode SessionEventRecord.index} showing what it
 * missed. Deduplication does not depend on what is kept: its windows of JSON-RPC ids and event
 * ids are bounded on their own (`remember`).
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
  /**
   * 1-based position in the session's log, counting every event ever accepted (dropped ones
   * too): consecutive records a reader receives differ by 1 unless some were dropped between.
   */
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

/** The default number of events a session's log keeps in memory: 10,000. */
export const DEFAULT_MAX_SESSION_EVENTS = 10_000;
/** The default size of the events a session's log keeps in memory: 32 MiB of their frames. */
export const DEFAULT_MAX_SESSION_EVENT_BYTES = 32 * 1024 * 1024;

/** Options of an {@linkcode EventLog}. */
export interface EventLogOptions {
  /** Where accepted events are persisted before the ACK. */
  sink?: SessionEventSink;
  /** The time source for `received_at`. */
  now?: () => number;
  /** How many JSON-RPC ids and event ids to remember for deduplication. Default 10,000. */
  remember?: number;
  /**
   * Most events kept in memory; beyond it the oldest are dropped. Default 10,000
   * ({@linkcode DEFAULT_MAX_SESSION_EVENTS}).
   */
  maxRecords?: number;
  /**
   * Most bytes of events kept in memory, counted as the length of the frames that carried
   * them (an event appended without a size counts 0); beyond it the oldest are dropped, though
   * the newest event is always kept. Default 32 MiB ({@linkcode DEFAULT_MAX_SESSION_EVENT_BYTES}).
   */
  maxBytes?: number;
}

/** The event log of one session. */
export class EventLog {
  /** The session. */
  readonly sessionId: string;
  /** The kept records from `#head` on (slots before it are dropped records, cleared). */
  #records: (SessionEventRecord | undefined)[] = [];
  /** The frame size of each slot of `#records`. */
  #sizes: number[] = [];
  #head = 0;
  /** How many records were dropped from the front: the position of the oldest kept one. */
  #dropped = 0;
  #bytes = 0;
  readonly #maxRecords: number;
  readonly #maxBytes: number;
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
    this.#maxRecords = Math.max(1, options.maxRecords ?? DEFAULT_MAX_SESSION_EVENTS);
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_SESSION_EVENT_BYTES;
    this.#armChange();
  }

  /** The highest accepted agent sequence (0 before the first). */
  get ackedSequence(): number {
    return this.#ackedSequence;
  }

  /** The events kept in memory, oldest first (see {@linkcode EventLogOptions.maxRecords}). */
  get records(): readonly SessionEventRecord[] {
    return (this.#head === 0
      ? this.#records
      : this.#records.slice(this.#head)) as readonly SessionEventRecord[];
  }

  /** How many events were accepted in all, kept or dropped. */
  get accepted(): number {
    return this.#dropped + this.#records.length - this.#head;
  }

  /** How many of the oldest events were dropped from memory to keep the log within its bounds. */
  get dropped(): number {
    return this.#dropped;
  }

  /** The size of the events kept, in the characters of their frames. */
  get keptBytes(): number {
    return this.#bytes;
  }

  /** Whether the log is closed (the session ended): iterators finish after the last record. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Applies one `session.event` request with JSON-RPC id `rpcId` that came in a frame of `size`
   * characters (0 when unknown); resolves with the ACK. Requests are applied one at a time in
   * arrival order, so pipelined events keep their order.
   */
  append(params: SessionEventParams, rpcId: JsonRpcId, size = 0): Promise<SessionEventResult> {
    const applied = this.#tail.then(() => this.#apply(params, rpcId, size));
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
   * Yields every record from position `from` (0-based, counting dropped records, default 0),
   * then new ones as they are accepted, until the log closes or `signal` aborts. Records dropped
   * before the reader reached them are skipped: it continues at the oldest record kept.
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
      for (;;) {
        if (next < this.#dropped) next = this.#dropped;
        const slot = this.#head + next - this.#dropped;
        if (slot >= this.#records.length) break;
        if (signal?.aborted) return;
        next++;
        yield this.#records[slot]!;
      }
      if (this.#closed || signal?.aborted) return;
      const changed = this.#changed;
      await (aborted ? Promise.race([changed, aborted]) : changed);
    }
  }

  async #apply(
    params: SessionEventParams,
    rpcId: JsonRpcId,
    size: number,
  ): Promise<SessionEventResult> {
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
      index: this.accepted + 1,
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
    this.#keep(record, size);
    this.#rpcIds.add(rpcKey);
    if (params.event_id !== undefined) this.#eventIds.add(params.event_id);
    if (params.sequence !== undefined) this.#ackedSequence = params.sequence;
    this.#signalChange();
    return this.#ackedSequence > 0 ? { acked_sequence: this.#ackedSequence } : {};
  }

  /** Adds a record, dropping the oldest beyond the bounds. */
  #keep(record: SessionEventRecord, size: number): void {
    this.#records.push(record);
    this.#sizes.push(size);
    this.#bytes += size;
    const records = this.#records;
    while (
      records.length - this.#head > this.#maxRecords ||
      (this.#bytes > this.#maxBytes && records.length - this.#head > 1)
    ) {
      records[this.#head] = undefined;
      this.#bytes -= this.#sizes[this.#head];
      this.#head++;
      this.#dropped++;
    }
    // Cleared slots are given back once they are half the array: amortized O(1) per record.
    if (this.#head >= 1024 && this.#head * 2 >= records.length) {
      this.#records = records.slice(this.#head);
      this.#sizes = this.#sizes.slice(this.#head);
      this.#head = 0;
    }
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
