/**
 * The durable event log of one session: `session.event` requests deduplicated and kept in
 * order, the JSON-RPC response being the executor's ACK.
 *
 * - A tool executor's event is idempotent by its JSON-RPC id (resent with the same id).
 * - An agent event (turn_id, event_id, sequence) is deduplicated by (session_id, event_id);
 *   a sequence at or below the acknowledged one is a duplicate; a gap is -32013
 *   `sequence_gap` with `expected_sequence`.
 *
 * An accepted event is handed to the {@linkcode SessionEventSink} (if any) and written to the
 * harness's store (if any) before its ACK leaves: an event that neither took is not
 * acknowledged, and the executor sends it again; nor is a duplicate of it (resent after its
 * request timed out) before that write is durable. With a synchronous store and no sink (or a
 * synchronous one) an event is decided within the request's own turn, without a microtask.
 *
 * The log keeps the most recent events, within a count and a size
 * ({@linkcode EventLogOptions.maxRecords}, {@linkcode EventLogOptions.maxBytes}): older ones are
 * dropped (the sink has every one of them), and a reader that falls behind continues at the
 * oldest record still kept, the jump in {@linkcode SessionEventRecord.index} showing what it
 * missed. The store lets go of dropped events a block of {@linkcode EVENT_BLOCK} indexes at a
 * time (one prefix delete once the whole block is dropped, instead of a second row write in every
 * event's batch), and of a large one at once, so it holds at most a block more than the log, and
 * reads back only the log's bounds. Deduplication does not depend on what is kept: its windows of JSON-RPC ids and event ids are bounded on their own (`remember`).
 * A log opened again on a store (the harness restarted) reads its kept events back on first use
 * and rebuilds its windows from them.
 */
import type { JsonRpcId } from "../protocol/jsonrpc.ts";
import {
  AgentEventSchema,
  isAgentEvent,
  type SessionEventParams,
  type SessionEventResult,
} from "../protocol/generated/contract.ts";
import {
  ConflictError,
  InvalidParamsError,
  UnavailableError,
} from "../protocol/generated/errors.ts";
import { checkSignal } from "../protocol/abort.ts";
import { RecentIds } from "../protocol/bounded-set.ts";
import { InvalidCallOptionError } from "../protocol/errors.ts";
import { issueData, parseBounded } from "../protocol/issues.ts";
import { TurnBurst } from "./after-turn.ts";
import {
  EVENT_BLOCK,
  keys,
  type SessionEventRecord,
  type StoredEvent,
  type StoredEventRow,
} from "./records.ts";
import {
  type HarnessStore,
  isPromiseLike,
  type MaybePromise,
  type StoreOp,
} from "./store/store.ts";

export type { SessionEventRecord } from "./records.ts";

/**
 * Stores an accepted event durably before it is acknowledged. Throwing (or rejecting) refuses
 * the event with -32004 `backend_unavailable`; the executor retries it.
 */
export type SessionEventSink = (record: SessionEventRecord) => void | Promise<void>;

/** The default number of events a session's log keeps: 10,000. */
export const DEFAULT_MAX_SESSION_EVENTS = 10_000;
/** The default size of the events a session's log keeps: 32 MiB of their frames. */
export const DEFAULT_MAX_SESSION_EVENT_BYTES = 32 * 1024 * 1024;

/**
 * A dropped event larger than this share of the byte bound is deleted from the store at once,
 * not with its block: what the store holds beyond the bound stays within a block of small ones.
 */
const AT_ONCE_SHARE = 1 / 1024;
/** The most block deletes one event's batch carries (a store left with many catches up later). */
const MAX_BLOCKS_PER_BATCH = 16;
/**
 * The most bytes (of the frames that carried them) of the events one stored row packs together:
 * rows stay a few pages of the store.
 */
const MAX_ROW_BYTES = 64 * 1024;

/** Options of an {@linkcode EventLog}. */
export interface EventLogOptions {
  /** Where accepted events are handed before the ACK (after the store). */
  sink?: SessionEventSink;
  /** The time source for `received_at`. */
  now?: () => number;
  /** How many JSON-RPC ids and event ids to remember for deduplication. Default 10,000. */
  remember?: number;
  /**
   * Most events kept; beyond it the oldest are dropped. Default 10,000
   * ({@linkcode DEFAULT_MAX_SESSION_EVENTS}).
   */
  maxRecords?: number;
  /**
   * Most bytes of events kept, counted as the length of the frames that carried them (an event
   * appended without a size counts 0); beyond it the oldest are dropped, though the newest event
   * is always kept. Default 32 MiB ({@linkcode DEFAULT_MAX_SESSION_EVENT_BYTES}).
   */
  maxBytes?: number;
  /**
   * Writes each accepted event (and drops the oldest) in the store before the ACK, and reads
   * the kept events back from it when the log is opened again.
   */
  store?: HarnessStore;
  /** Told of each accepted event, as it is kept (before its ACK is sent). */
  onAccepted?: (record: SessionEventRecord) => void;
}

/** Where a reader waits for the next record. */
/** One reader of a log: whether it returned, and how it leaves the record it waits for. */
interface Reader {
  stopped: boolean;
  leave: (() => void) | undefined;
}

interface Waiter {
  resolve(): void;
}

/**
 * The events accepted since the last hand-over to the store's group commit, packed in rows: a row
 * holds consecutive events of one block of {@linkcode EVENT_BLOCK} indexes (so a block's prefix
 * delete never takes a kept event), up to {@linkcode MAX_ROW_BYTES}; a large event (deleted on its
 * own when dropped) has a row of its own.
 */
interface UnwrittenEvents {
  readonly rows: StoredEvent[][];
  /** The bytes of the last row. */
  lastRowBytes: number;
  /** The deletes of the events dropped meanwhile, in order: written after the rows. */
  readonly deletes: StoreOp[];
  /** Settles once the store has made them durable, or refused them. */
  readonly durable: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
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
  /** How many events were dropped from the front: the position of the oldest kept one. */
  #dropped = 0;
  /** The store holds no event below this index (its blocks below are deleted). */
  #storedFrom = 1;
  /** What `#storedFrom` becomes once the batch being written is accepted. */
  #nextStoredFrom = 1;
  #bytes = 0;
  readonly #maxRecords: number;
  readonly #maxBytes: number;
  #rpcIds: RecentIds<string>;
  #eventIds: RecentIds<string>;
  readonly #remember: number;
  readonly #sink: SessionEventSink | undefined;
  readonly #store: HarnessStore | undefined;
  readonly #onAccepted: ((record: SessionEventRecord) => void) | undefined;
  readonly #now: () => number;
  #ackedSequence = 0;
  /** The request being applied when it waits for a sink or a store; later ones queue behind. */
  #busy: Promise<unknown> | undefined;
  /**
   * The promise `#apply` just returned waits only for the store to make the event durable (group
   * commit): the log holds the event already, so the next request need not queue behind it.
   */
  #decided = false;
  /** The kept events still have to be read back from the store. */
  #pendingLoad = false;
  /** The read-back under way, with a store that answers later. */
  #loading: Promise<void> | undefined;
  #closed = false;
  /** Readers waiting for a record (made only while one waits). */
  #waiters: Waiter[] | undefined;
  /** Accepted events not yet handed to the store's group commit (see {@linkcode UnwrittenEvents}). */
  #unwritten: UnwrittenEvents | undefined;
  /**
   * The group commits of accepted events that are not durable yet (waiting to be handed over, or
   * handed over): a duplicate waits for them, as its original may be in one (made only with a
   * store that commits in groups).
   */
  #undurable: Set<Promise<void>> | undefined;
  readonly #flushUnwritten = () => this.#flush();
  /** Events were handed to the store in this turn: the next ones wait for the turn's end. */
  readonly #burst = new TurnBurst();

  /** An empty log of session `sessionId`. */
  constructor(sessionId: string, options: EventLogOptions = {}) {
    this.sessionId = sessionId;
    this.#sink = options.sink;
    this.#store = options.store;
    this.#onAccepted = options.onAccepted;
    this.#now = options.now ?? Date.now;
    this.#remember = options.remember ?? 10_000;
    this.#rpcIds = new RecentIds(this.#remember);
    this.#eventIds = new RecentIds(this.#remember);
    this.#maxRecords = Math.max(1, options.maxRecords ?? DEFAULT_MAX_SESSION_EVENTS);
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_SESSION_EVENT_BYTES;
  }

  /**
   * A log whose events a previous run of the harness wrote to `options.store`: they are read
   * back on first use (an append, a read, or {@linkcode EventLog.records}).
   */
  static reopened(sessionId: string, options: EventLogOptions & { store: HarnessStore }): EventLog {
    const log = new EventLog(sessionId, options);
    log.#pendingLoad = true;
    return log;
  }

  /** The highest accepted agent sequence (0 before the first). */
  get ackedSequence(): number {
    this.#loadSync();
    return this.#ackedSequence;
  }

  /** The events kept, oldest first (see {@linkcode EventLogOptions.maxRecords}). */
  get records(): readonly SessionEventRecord[] {
    this.#loadSync();
    return (this.#head === 0
      ? this.#records
      : this.#records.slice(this.#head)) as readonly SessionEventRecord[];
  }

  /** How many events were accepted in all, kept or dropped. */
  get accepted(): number {
    this.#loadSync();
    return this.#dropped + this.#records.length - this.#head;
  }

  /** How many of the oldest events were dropped to keep the log within its bounds. */
  get dropped(): number {
    this.#loadSync();
    return this.#dropped;
  }

  /** The size of the events kept, in the characters of their frames. */
  get keptBytes(): number {
    this.#loadSync();
    return this.#bytes;
  }

  /** Whether the log is closed (the session ended): iterators finish after the last record. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Applies one `session.event` request with JSON-RPC id `rpcId` that came in a frame of `size`
   * characters (0 when unknown); returns (or resolves with) the ACK. Requests are applied one at
   * a time in arrival order, so pipelined events keep their order.
   */
  append(
    params: SessionEventParams,
    rpcId: JsonRpcId,
    size = 0,
  ): MaybePromise<SessionEventResult> {
    if (this.#busy || this.#pendingLoad) {
      const ready = this.#busy ?? this.#load();
      if (isPromiseLike(ready)) return this.#queue(ready, params, rpcId, size);
    }
    const applied = this.#apply(params, rpcId, size);
    if (this.#decided) this.#decided = false;
    else if (isPromiseLike(applied)) this.#track(applied);
    return applied;
  }

  /**
   * Reads a reopened log's events back from the store now (once; at once for a log that is not
   * reopened): what a reader that must not wait for them first calls.
   */
  load(): MaybePromise<void> {
    return this.#load();
  }

  /** Ends the log: iterators finish once they have yielded every record. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake();
  }

  /**
   * Yields every record from position `from` (0-based, counting dropped records, default 0),
   * then new ones as they are accepted, until the log closes or `signal` aborts. Records dropped
   * before the reader reached them are skipped: it continues at the oldest record kept.
   * `return()` (a `for await` that breaks) ends it at once, a `next()` that waits for a record
   * included: an async generator's own `return()` would wait behind that `next()` until the next
   * record came or the log closed, and the reader would stay until then.
   */
  read(
    options: { from?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<SessionEventRecord, void, undefined> {
    const reader: Reader = { stopped: false, leave: undefined };
    const records = this.#read(options, reader);
    const stop = () => {
      reader.stopped = true;
      reader.leave?.();
    };
    const iterator = {
      next: () => records.next(),
      return: (value: void | PromiseLike<void>) => {
        stop();
        return records.return(value);
      },
      throw: (error: unknown) => {
        stop();
        return records.throw(error);
      },
      [Symbol.asyncIterator]: () => iterator,
    } as AsyncGenerator<SessionEventRecord, void, undefined>;
    // Set apart: TypeScript libs before `AsyncGenerator` had it refuse the key in the literal.
    (iterator as { [Symbol.asyncDispose]?: () => PromiseLike<void> })[Symbol.asyncDispose] =
      async () => {
        await iterator.return();
      };
    return iterator;
  }

  async *#read(
    options: { from?: number; signal?: AbortSignal },
    reader: Reader,
  ): AsyncGenerator<SessionEventRecord, void, undefined> {
    let next = options.from ?? 0;
    const signal = options.signal;
    // A position that is not a count (NaN, 1.5, -1, "1") would yield holes, or hide a bug.
    if (!Number.isSafeInteger(next) || next < 0) {
      throw new InvalidCallOptionError("session.events", "from", "must be an integer ≥ 0");
    }
    checkSignal(signal, "session.events");
    if (this.#pendingLoad) await this.#load();
    for (;;) {
      for (;;) {
        if (next < this.#dropped) next = this.#dropped;
        const slot = this.#head + next - this.#dropped;
        if (slot >= this.#records.length) break;
        if (signal?.aborted || reader.stopped) return;
        next++;
        yield this.#records[slot]!;
      }
      if (this.#closed || signal?.aborted || reader.stopped) return;
      await this.#changed(signal, reader);
    }
  }

  /** The store operations that forget this log's events (the session is forgotten). */
  forget(): StoreOp[] {
    if (!this.#store) return [];
    // The events not yet handed over go first: the prefix delete that follows takes them too.
    this.#flush();
    return [{ deletePrefix: keys.events(this.sessionId) }];
  }

  #queue(
    ready: Promise<unknown>,
    params: SessionEventParams,
    rpcId: JsonRpcId,
    size: number,
  ): Promise<SessionEventResult> {
    const applied = ready.then(() => {
      const result = this.#apply(params, rpcId, size);
      this.#decided = false;
      return result;
    });
    this.#track(applied);
    return applied;
  }

  #track(applied: Promise<unknown>): void {
    const busy = applied.then(settled, settled);
    this.#busy = busy;
    busy.then(() => {
      if (this.#busy === busy) this.#busy = undefined;
    });
  }

  #apply(
    params: SessionEventParams,
    rpcId: JsonRpcId,
    size: number,
  ): MaybePromise<SessionEventResult> {
    const rpcKey = `${typeof rpcId}:${rpcId}`;
    // An agent's event is a repeat by its `event_id` and `sequence`, never by its JSON-RPC id: an
    // executor that numbers its requests per connection reuses ids for new events.
    if (byRpcId(params) && this.#rpcIds.has(rpcKey)) return this.#repeat();
    const agent = params.event_id !== undefined || params.sequence !== undefined ||
      params.turn_id !== undefined;
    if (agent) {
      // An agent executor sends all three (seed 000): without one the event is outside the
      // turn's order (no sequence), its deduplication (no event_id) or any turn.
      const missing = params.turn_id === undefined
        ? "turn_id"
        : params.event_id === undefined
        ? "event_id"
        : params.sequence === undefined
        ? "sequence"
        : undefined;
      if (missing !== undefined) {
        throw new InvalidParamsError(
          `invalid params: an agent event carries turn_id, event_id and sequence (no ${missing})`,
          { reason: "invalid_params", field: `/${missing}` },
        );
      }
      if (params.event_id !== undefined && this.#eventIds.has(params.event_id)) {
        return this.#repeat();
      }
      if (params.sequence !== undefined) {
        if (params.sequence <= this.#ackedSequence) return this.#repeat();
        if (params.sequence > this.#ackedSequence + 1) {
          throw new ConflictError("sequence gap", {
            reason: "sequence_gap",
            expected_sequence: this.#ackedSequence + 1,
          });
        }
      }
      const checked = isAgentEvent(params.event)
        ? undefined
        : parseBounded(AgentEventSchema, params.event);
      if (checked && !checked.success) {
        const { issues, ...count } = issueData(checked.report);
        throw new InvalidParamsError("invalid params: event is not an AgentEvent", {
          issues: issues.map((i) => ({ ...i, path: ["event", ...i.path.map(String)] })),
          ...count,
          field: "/event",
        });
      }
    }
    // Built member by member: conditional spreads allocate an object each.
    const record: { -readonly [K in keyof SessionEventRecord]: SessionEventRecord[K] } = {
      index: this.#dropped + this.#records.length - this.#head + 1,
      session_id: this.sessionId,
      event: params.event,
      received_at: this.#now(),
    };
    if (params.turn_id !== undefined) record.turn_id = params.turn_id;
    if (params.event_id !== undefined) record.event_id = params.event_id;
    if (params.sequence !== undefined) record.sequence = params.sequence;
    if (!this.#sink) return this.#persist(record, rpcKey, size, params);
    let sunk: void | Promise<void>;
    try {
      sunk = this.#sink(record);
    } catch {
      throw sinkRefused();
    }
    if (!isPromiseLike(sunk)) return this.#persist(record, rpcKey, size, params);
    return sunk.then(
      () => this.#persist(record, rpcKey, size, params),
      () => Promise.reject(sinkRefused()),
    );
  }

  /** Writes the event (and drops the oldest beyond the bounds) in the store, then keeps it. */
  #persist(
    record: SessionEventRecord,
    rpc: string,
    size: number,
    params: SessionEventParams,
  ): MaybePromise<SessionEventResult> {
    const store = this.#store;
    const drop = this.#overflow(size);
    if (!store) return this.#keep(record, rpc, size, params, drop);
    const stored: StoredEvent = { record, rpc, bytes: size };
    if (store.writeGrouped !== undefined) return this.#persistGrouped(stored, params, drop);
    const batch: StoreOp[] = [{ put: keys.event(this.sessionId, record.index), value: stored }];
    if (drop > 0) this.#trim(batch, record, drop);
    let written: MaybePromise<void>;
    try {
      written = store.write(batch);
    } catch {
      throw storeRefused();
    }
    if (!isPromiseLike(written)) return this.#keep(record, rpc, size, params, drop);
    // Appends wait for this one (see #busy): the kept events are still those counted above.
    return Promise.resolve(written).then(
      () => this.#keep(record, rpc, size, params, drop),
      () => Promise.reject(storeRefused()),
    );
  }

  /**
   * Group commit: the event is kept at once (so the requests behind it are decided on it), its
   * readers woken and its ACK sent once the store has made it durable. The events of a task (or
   * of a burst) go to the store together, several to a row: one row written for many events.
   * When that transaction fails, every event of it is refused and the log reads back what the
   * store holds.
   */
  #persistGrouped(
    stored: StoredEvent,
    params: SessionEventParams,
    drop: number,
  ): Promise<SessionEventResult> {
    const { record, rpc, bytes } = stored;
    let unwritten = this.#unwritten;
    if (unwritten === undefined) {
      let resolve!: () => void;
      let reject!: (error: unknown) => void;
      const durable = new Promise<void>((yes, no) => {
        resolve = yes;
        reject = no;
      });
      unwritten = this.#unwritten = {
        rows: [],
        lastRowBytes: 0,
        deletes: [],
        durable,
        resolve,
        reject,
      };
      const undurable = this.#undurable ??= new Set();
      undurable.add(durable);
      const settle = () => void undurable.delete(durable);
      durable.then(settle, settle);
      this.#burst.defer(this.#flushUnwritten);
    }
    this.#pack(unwritten, stored);
    if (drop > 0) this.#trim(unwritten.deletes, record, drop);
    const ack = this.#keep(record, rpc, bytes, params, drop, false);
    this.#decided = true;
    return unwritten.durable.then(() => {
      if (this.#waiters) this.#wake();
      this.#onAccepted?.(record);
      return ack;
    }, () => {
      this.#forget();
      return Promise.reject(storeRefused());
    });
  }

  /** Adds an accepted event to the last row of `unwritten`, or to a new row. */
  #pack(unwritten: UnwrittenEvents, stored: StoredEvent): void {
    const rows = unwritten.rows;
    const atOnce = this.#maxBytes * AT_ONCE_SHARE;
    const last = rows.length === 0 ? undefined : rows[rows.length - 1];
    if (
      last !== undefined && stored.bytes <= atOnce && last[0].bytes <= atOnce &&
      unwritten.lastRowBytes + stored.bytes <= MAX_ROW_BYTES &&
      Math.floor(last[0].record.index / EVENT_BLOCK) ===
        Math.floor(stored.record.index / EVENT_BLOCK)
    ) {
      last.push(stored);
      unwritten.lastRowBytes += stored.bytes;
      return;
    }
    rows.push([stored]);
    unwritten.lastRowBytes = stored.bytes;
  }

  /**
   * Hands the unwritten events to the store's group commit: a row each (a lone event as its
   * {@linkcode StoredEvent}, several as an array), under the key of the row's first event, then
   * the deletes of the events dropped meanwhile.
   */
  #flush(): void {
    const unwritten = this.#unwritten;
    if (unwritten === undefined) return;
    this.#unwritten = undefined;
    this.#burst.mark();
    const batch: StoreOp[] = [];
    for (const row of unwritten.rows) {
      const value: StoredEventRow = row.length === 1 ? row[0] : row;
      batch.push({ put: keys.event(this.sessionId, row[0].record.index), value });
    }
    for (const op of unwritten.deletes) batch.push(op);
    let durable: Promise<void>;
    try {
      durable = this.#store!.writeGrouped!(batch);
    } catch (error) {
      this.#refuse(unwritten, error);
      return;
    }
    durable.then(unwritten.resolve, (error) => this.#refuse(unwritten, error));
  }

  /**
   * Refuses `unwritten`, and the events accepted after it that wait to be handed over: they were
   * decided on it (their sequence checks, their indexes). The store refuses those handed over
   * meanwhile itself.
   */
  #refuse(unwritten: UnwrittenEvents, error: unknown): void {
    unwritten.reject(error);
    const later = this.#unwritten;
    if (later === undefined) return;
    this.#unwritten = undefined;
    later.reject(error);
  }

  /** Forgets what the log holds, to read it back from the store on next use. */
  #forget(): void {
    if (this.#pendingLoad) return;
    this.#records = [];
    this.#sizes = [];
    this.#head = 0;
    this.#dropped = 0;
    this.#bytes = 0;
    this.#ackedSequence = 0;
    this.#rpcIds = new RecentIds(this.#remember);
    this.#eventIds = new RecentIds(this.#remember);
    this.#pendingLoad = true;
  }

  /**
   * Adds to `batch` the deletes that dropping the `drop` oldest kept events (to keep `record`)
   * calls for: each large one, and every block now wholly below the oldest event kept.
   */
  #trim(batch: StoreOp[], record: SessionEventRecord, drop: number): void {
    // A large event has a row of its own (#pack): deleting its key takes it alone.
    const atOnce = this.#maxBytes * AT_ONCE_SHARE;
    for (let i = 0; i < drop; i++) {
      if (this.#sizes[this.#head + i] > atOnce) {
        batch.push({ delete: keys.event(this.sessionId, this.#records[this.#head + i]!.index) });
      }
    }
    const kept = this.#records.length - this.#head - drop;
    const oldest = kept > 0 ? this.#records[this.#head + drop]!.index : record.index;
    let block = Math.floor(this.#storedFrom / EVENT_BLOCK);
    const last = Math.min(Math.floor(oldest / EVENT_BLOCK), block + MAX_BLOCKS_PER_BATCH);
    for (; block < last; block++) {
      batch.push({ deletePrefix: keys.eventBlock(this.sessionId, block) });
    }
    this.#nextStoredFrom = Math.max(this.#storedFrom, block * EVENT_BLOCK);
  }

  /** How many of the oldest kept events must go to add one of `bytes`. */
  #overflow(bytes: number): number {
    let count = this.#records.length - this.#head + 1;
    let total = this.#bytes + bytes;
    let drop = 0;
    while (count > this.#maxRecords || (total > this.#maxBytes && count > 1)) {
      total -= this.#sizes[this.#head + drop];
      count--;
      drop++;
    }
    return drop;
  }

  /** Keeps an accepted event, dropping the oldest beyond the bounds. */
  #keep(
    record: SessionEventRecord,
    rpc: string,
    size: number,
    params: SessionEventParams,
    drop: number,
    announce = true,
  ): SessionEventResult {
    const records = this.#records;
    records.push(record);
    this.#sizes.push(size);
    if (drop > 0) this.#storedFrom = this.#nextStoredFrom;
    this.#bytes += size;
    for (let i = 0; i < drop; i++) {
      this.#bytes -= this.#sizes[this.#head];
      records[this.#head] = undefined;
      this.#head++;
      this.#dropped++;
    }
    // Cleared slots are given back once they are half the array: amortized O(1) per record.
    if (this.#head >= 1024 && this.#head * 2 >= records.length) {
      this.#records = records.slice(this.#head);
      this.#sizes = this.#sizes.slice(this.#head);
      this.#head = 0;
    }
    if (byRpcId(params)) this.#rpcIds.add(rpc);
    if (params.event_id !== undefined) this.#eventIds.add(params.event_id);
    if (params.sequence !== undefined) this.#ackedSequence = params.sequence;
    if (announce) {
      if (this.#waiters) this.#wake();
      this.#onAccepted?.(record);
    }
    return this.#ackedSequence > 0 ? { acked_sequence: this.#ackedSequence } : {};
  }

  /**
   * The answer to a duplicate: at once when every accepted event is durable; else once the
   * events not yet durable are (their group commits settled), as the original may be among them
   * — a duplicate acknowledged before its original is committed would acknowledge an event the
   * store may never hold. A failed commit refuses it as it refuses the original (-32004), even
   * when the original was an older event: the executor sends it again, and is then answered
   * from what the store holds.
   */
  #repeat(): MaybePromise<SessionEventResult> {
    const undurable = this.#undurable;
    if (undurable === undefined || undurable.size === 0) return this.#duplicate();
    // Decided: it changes nothing in the log, so the requests behind it need not wait for it.
    this.#decided = true;
    return Promise.all(undurable).then(
      () => this.#duplicate(),
      () => Promise.reject(storeRefused()),
    );
  }

  #duplicate(): SessionEventResult {
    return this.#ackedSequence > 0
      ? { acked_sequence: this.#ackedSequence, duplicate: true }
      : { duplicate: true };
  }

  /** Resolves when a record arrives, the log closes, `signal` aborts or the reader returns. */
  #changed(signal: AbortSignal | undefined, reader: Reader): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal?.aborted || reader.stopped) return resolve();
      const waiter: Waiter = {
        resolve: () => {
          signal?.removeEventListener("abort", leave);
          reader.leave = undefined;
          resolve();
        },
      };
      // An aborted or returned reader leaves the waiters at once: readers that come and go on a
      // quiet session (a brain API client reconnecting) must not pile up until its next event.
      const leave = () => {
        signal?.removeEventListener("abort", leave);
        reader.leave = undefined;
        const at = this.#waiters?.indexOf(waiter) ?? -1;
        if (at >= 0) this.#waiters!.splice(at, 1);
        resolve();
      };
      signal?.addEventListener("abort", leave, { once: true });
      reader.leave = leave;
      (this.#waiters ??= []).push(waiter);
    });
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = undefined;
    for (const waiter of waiters ?? []) waiter.resolve();
  }

  // ---- reading back from the store -------------------------------------------------------------

  /** Reads the kept events back now, when the store answers synchronously. */
  #loadSync(): void {
    if (!this.#pendingLoad) return;
    try {
      const loading = this.#load();
      if (isPromiseLike(loading)) loading.catch(settled);
    } catch {
      // Tried again on the next use.
    }
  }

  /**
   * Reads the kept events back from the store (once; again after a failure, which refuses the
   * events waiting for it: the executor sends them again).
   */
  #load(): MaybePromise<void> {
    if (!this.#pendingLoad) return this.#loading;
    this.#pendingLoad = false;
    // The events not yet handed over are read back with the rest.
    this.#flush();
    let listed: MaybePromise<[string, StoredEventRow][]>;
    // The oldest event stored: below the bounds' window when the last run's trimming lagged
    // (or its bounds were wider), and where this run's trimming starts.
    let first: MaybePromise<[string, StoredEventRow][]>;
    try {
      const prefix = keys.events(this.sessionId);
      // At most this many rows: each holds one event at least.
      listed = this.#store!.list<StoredEventRow>(prefix, {
        reverse: true,
        limit: this.#maxRecords,
      });
      first = this.#store!.list<StoredEventRow>(prefix, { limit: 1 });
    } catch {
      this.#pendingLoad = true;
      throw storeRefused();
    }
    const adopt = ([rows, oldest]: [string, StoredEventRow][][]) => {
      this.#loading = undefined;
      const events: StoredEvent[] = [];
      let bytes = 0;
      newest: for (const [, row] of rows) {
        const packed = Array.isArray(row) ? row : [row as StoredEvent];
        for (let i = packed.length - 1; i >= 0; i--) {
          const stored = packed[i];
          if (
            events.length > 0 &&
            (events.length >= this.#maxRecords || bytes + stored.bytes > this.#maxBytes)
          ) break newest;
          events.push(stored);
          bytes += stored.bytes;
        }
      }
      events.reverse();
      const last = events.at(-1)?.record.index ?? 0;
      this.#records = events.map((e) => e.record);
      this.#sizes = events.map((e) => e.bytes);
      this.#head = 0;
      this.#bytes = bytes;
      this.#dropped = last - events.length;
      const oldestRow = oldest[0]?.[1];
      const oldestStored = Array.isArray(oldestRow) ? oldestRow[0] : oldestRow as StoredEvent;
      this.#storedFrom = this.#nextStoredFrom = oldestStored?.record.index ?? last + 1;
      for (const { record, rpc } of events) {
        if (byRpcId(record)) this.#rpcIds.add(rpc);
        if (record.event_id !== undefined) this.#eventIds.add(record.event_id);
        if (record.sequence !== undefined && record.sequence > this.#ackedSequence) {
          this.#ackedSequence = record.sequence;
        }
      }
    };
    if (!isPromiseLike(listed) && !isPromiseLike(first)) {
      adopt([listed, first]);
      return undefined;
    }
    this.#loading = Promise.all([listed, first]).then(adopt, () => {
      this.#loading = undefined;
      this.#pendingLoad = true;
      return Promise.reject(storeRefused());
    });
    return this.#loading;
  }
}

function settled(): void {}

// Not stored, so not acknowledged: the executor keeps the event and sends it again.
function sinkRefused(): UnavailableError {
  return new UnavailableError("event store unavailable", { reason: "backend_unavailable" });
}

const storeRefused = sinkRefused;

/**
 * Whether an event is a repeat by its JSON-RPC id (a tool executor's, as the seeds say): one
 * without `event_id` and `sequence`, by which an agent's events are told apart instead.
 */
function byRpcId(event: { event_id?: string; sequence?: number }): boolean {
  return event.event_id === undefined && event.sequence === undefined;
}
