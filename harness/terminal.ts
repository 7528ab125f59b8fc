/**
 * A pseudo-terminal on an executor, seen from the harness (`session.terminal(...)`): its output
 * as an async iterator that has every byte once and in order, input, resize, close, and its
 * exit code.
 *
 * `terminal.output` notifications are lossy: they are dropped while the executor is
 * disconnected. The output's byte offsets show what is missing, so the handle reads the missing
 * bytes back with `terminal.read` on a gap, after a reconnect, and when its reader has let
 * {@linkcode TERMINAL_QUEUE_BYTES} pile up: nothing is lost or doubled while the executor still
 * holds it (its buffer keeps the last 8 MiB). Bytes it no longer holds are counted in
 * {@linkcode Terminal.lostBytes}.
 */
import type { CallOptions } from "../protocol/peer.ts";
import { ConnectionClosedError, LocalError, ProtocolError } from "../protocol/errors.ts";
import type {
  Encoding,
  HarnessRequestMethod,
  RequestMap,
  TerminalCloseResult,
  TerminalOutputParams,
  TerminalResizeResult,
} from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import { fromBase64, toBase64 } from "../protocol/base64.ts";
import type { TraceContext } from "../protocol/trace-context.ts";

/** Options of `session.terminal(...)` (`terminal.open`). */
export interface TerminalOptions {
  /**
   * The idempotency key (`terminal_id` on the wire): opening again with the same id answers the
   * same terminal. Generated when absent.
   */
  terminalId?: string;
  /** Program and arguments. Default: the user's login shell on the executor. */
  argv?: string[];
  /** Working directory, relative to the session workdir or absolute inside it. */
  cwd?: string;
  /** Extra environment variables (`TERM` defaults to `xterm-256color`). */
  env?: Record<string, string>;
  /** Columns. Default 80. */
  cols?: number;
  /** Rows. Default 24. */
  rows?: number;
  /**
   * The W3C trace context `terminal.open` carries (`params._meta`): the terminal's program sees
   * it as `TRACEPARENT` (and `TRACESTATE`). An invalid `traceparent` is ignored.
   */
  trace?: TraceContext;
  /**
   * Aborts `terminal.open` while it is pending (rejects with `RequestAbortedError`); once the
   * terminal is open, aborting closes it.
   */
  signal?: AbortSignal;
}

/** Options of reading a terminal's output. */
export interface TerminalReadOptions {
  /** Ends the iteration (quietly, like a session's `events()`). */
  signal?: AbortSignal;
}

/** A second reader of a terminal's output while the first is still reading. */
export class TerminalBusyError extends LocalError {
  /** The terminal already being read. */
  readonly terminalId: string;
  /** Made by `Terminal.output()` and `text()`. */
  constructor(terminalId: string) {
    super(`terminal ${terminalId} already has a reader`);
    this.name = "TerminalBusyError";
    this.terminalId = terminalId;
  }
}

/** Bytes received and not yet taken by the reader, beyond which the rest is read back later. */
export const TERMINAL_QUEUE_BYTES = 4 * 1024 * 1024;
/** Bytes asked for per `terminal.read`. */
const READ_BYTES = 1024 * 1024;

/** What a terminal needs from its session (internal). */
export interface TerminalHost {
  readonly sessionId: string;
  readonly logger: Logger;
  request<M extends HarnessRequestMethod>(
    method: M,
    params: RequestMap[M]["params"],
    options?: CallOptions,
  ): Promise<RequestMap[M]["result"]>;
}

/** A chunk waiting for the bytes before it. */
interface Pending {
  offset: number;
  bytes: Uint8Array;
}

const encoder = new TextEncoder();

function decode(data: string, encoding: Encoding | undefined): Uint8Array {
  return encoding === "base64" ? fromBase64(data) : encoder.encode(data);
}

/**
 * The terminal's output stream (internal): reassembles `terminal.output` and `terminal.read`
 * answers by byte offset into one gap-free, duplicate-free sequence for the reader.
 */
export class TerminalOutput {
  readonly #id: string;
  readonly #host: TerminalHost;
  /** Offset of the next byte the reader gets (everything before it is queued or taken). */
  #next = 0;
  /** The highest end offset the executor has shown. */
  #known = 0;
  /** Where the output ends, once the executor has said so. */
  #eofAt: number | undefined;
  #exitCode: number | null | undefined;
  readonly #pending: Pending[] = [];
  #pendingBytes = 0;
  readonly #queue: Uint8Array[] = [];
  #queued = 0;
  #lost = 0;
  #reading = false;
  /** Read from `#next` even if nothing shows a gap (after a reconnect). */
  #mustRead = false;
  #ended = false;
  #wake: (() => void) | undefined;
  #resolveExit!: (code: number | null) => void;
  readonly exited: Promise<number | null>;

  readonly #onEnd: (() => void) | undefined;

  /** `onEnd` runs once when the output has ended (nothing more will be delivered). */
  constructor(id: string, host: TerminalHost, onEnd?: () => void) {
    this.#id = id;
    this.#host = host;
    this.#onEnd = onEnd;
    this.exited = new Promise((resolve) => (this.#resolveExit = resolve));
  }

  get lostBytes(): number {
    return this.#lost;
  }

  get offset(): number {
    return this.#next;
  }

  get done(): boolean {
    return this.#ended && this.#queue.length === 0;
  }

  /** Whether the output has ended (the program exited, or the session ended). */
  get ended(): boolean {
    return this.#ended;
  }

  /** A `terminal.output` notification. */
  deliver(params: TerminalOutputParams): void {
    if (this.#ended) return;
    const bytes = decode(params.data, params.encoding);
    const end = params.offset + bytes.byteLength;
    if (end > this.#known) this.#known = end;
    if (params.eof) this.#eof(end, params.exit_code ?? null);
    // Past the queue limit the chunk is dropped: it is read back once the reader catches up.
    if (this.#queued < TERMINAL_QUEUE_BYTES) {
      if (this.#reading || !this.#apply(params.offset, bytes)) this.#hold(params.offset, bytes);
    }
    this.#drainPending();
    this.#settle();
  }

  /** The executor reconnected: what was sent meanwhile may be lost, read it back. */
  resumed(): void {
    if (this.#ended) return;
    this.#mustRead = true;
    this.#settle();
  }

  /** `terminal.close` answered: the exit is known even if its notification was lost. */
  closed(exitCode: number | null | undefined): void {
    if (this.#exitCode === undefined) this.#resolveExit(exitCode ?? null);
    this.#mustRead = this.#eofAt === undefined;
    this.#settle();
  }

  /** The session ended (or the terminal is gone): nothing more will come. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#resolveExit(this.#exitCode ?? null);
    this.#notify();
    this.#onEnd?.();
  }

  /** Takes the next chunk; `undefined` once the output has ended and everything was taken. */
  async take(signal?: AbortSignal): Promise<Uint8Array | undefined> {
    for (;;) {
      const chunk = this.#queue.shift();
      if (chunk) {
        this.#queued -= chunk.byteLength;
        this.#drainPending();
        this.#settle();
        return chunk;
      }
      if (this.#ended || signal?.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener("abort", done);
          this.#wake = undefined;
          resolve();
        };
        this.#wake = done;
        signal?.addEventListener("abort", done, { once: true });
      });
    }
  }

  #eof(at: number, exitCode: number | null): void {
    this.#eofAt = at;
    if (at > this.#known) this.#known = at;
    if (this.#exitCode === undefined) {
      this.#exitCode = exitCode;
      this.#resolveExit(exitCode);
    }
  }

  /** Queues the part of a chunk beyond `#next`; false when there is a gap before it. */
  #apply(offset: number, bytes: Uint8Array): boolean {
    if (offset > this.#next) return false;
    const end = offset + bytes.byteLength;
    if (end <= this.#next) return true; // already had it
    const fresh = bytes.subarray(this.#next - offset);
    this.#queue.push(fresh);
    this.#queued += fresh.byteLength;
    this.#next = end;
    this.#notify();
    return true;
  }

  /** Keeps a chunk that arrived out of order, while it fits. */
  #hold(offset: number, bytes: Uint8Array): void {
    if (offset + bytes.byteLength <= this.#next || bytes.byteLength === 0) return;
    if (this.#pendingBytes + bytes.byteLength > TERMINAL_QUEUE_BYTES) return; // read back later
    let at = this.#pending.length;
    while (at > 0 && this.#pending[at - 1].offset > offset) at--;
    this.#pending.splice(at, 0, { offset, bytes });
    this.#pendingBytes += bytes.byteLength;
  }

  /** Moves held chunks that now follow on into the queue. */
  #drainPending(): void {
    if (this.#reading) return;
    while (this.#pending.length > 0 && this.#queued < TERMINAL_QUEUE_BYTES) {
      const head = this.#pending[0];
      if (head.offset > this.#next) break;
      this.#pending.shift();
      this.#pendingBytes -= head.bytes.byteLength;
      this.#apply(head.offset, head.bytes);
    }
  }

  /** Ends the stream when everything up to the end is queued, or reads what is missing. */
  #settle(): void {
    if (this.#ended) return;
    if (this.#eofAt !== undefined && this.#next >= this.#eofAt) {
      this.end();
      return;
    }
    const behind = this.#mustRead || this.#known > this.#next;
    if (behind && !this.#reading && this.#queued < TERMINAL_QUEUE_BYTES) void this.#readBack();
  }

  /** Reads from `#next` with `terminal.read` until nothing is missing. */
  async #readBack(): Promise<void> {
    this.#reading = true;
    try {
      while (!this.#ended && this.#queued < TERMINAL_QUEUE_BYTES) {
        const must = this.#mustRead;
        if (!must && this.#known <= this.#next) break;
        this.#mustRead = false;
        const result = await this.#host.request("terminal.read", {
          session_id: this.#host.sessionId,
          terminal_id: this.#id,
          offset: this.#next,
          max_bytes: READ_BYTES,
        });
        if (this.#ended) return;
        const bytes = decode(result.data, result.encoding);
        if (result.offset > this.#next) {
          // Evicted from the executor's buffer before it could be read: gone for good.
          this.#lost += result.offset - this.#next;
          this.#next = result.offset;
        }
        this.#apply(result.offset, bytes);
        if (result.next_offset > this.#known) this.#known = result.next_offset;
        if (result.eof) this.#eof(result.next_offset, result.exit_code ?? null);
        if (bytes.byteLength === 0) {
          // Nothing more there now: what it showed before is all it has (no read again for it).
          if (this.#known > this.#next) this.#known = this.#next;
          break;
        }
      }
    } catch (error) {
      if (error instanceof ProtocolError) {
        // The executor no longer knows the terminal (or the session): nothing more will come.
        this.#host.logger.debug("terminal.read refused: the terminal output ends", {
          terminal_id: this.#id,
          error: error.message,
        });
        this.end();
        return;
      }
      // Disconnected: read again once the executor is back (`resumed`).
      this.#mustRead = true;
      if (!(error instanceof ConnectionClosedError)) {
        this.#host.logger.debug("terminal.read failed", {
          terminal_id: this.#id,
          error: String(error),
        });
      }
      return;
    } finally {
      this.#reading = false;
    }
    this.#drainPending();
    this.#settle();
  }

  #notify(): void {
    this.#wake?.();
  }
}

/**
 * A terminal of a session. Iterate it (`for await (const text of terminal)`) for its output as
 * text, or use `output()` for the raw bytes; the iteration ends when the terminal's program has
 * exited and every byte was taken, or when the session ends.
 */
export class Terminal implements AsyncIterable<string> {
  /** The terminal id. */
  readonly id: string;
  /** The session it belongs to. */
  readonly sessionId: string;
  /**
   * Resolves with the exit code of the terminal's program once it has exited (`null` when a
   * signal ended it, or when the session ended first and the code is unknown).
   */
  readonly exited: Promise<number | null>;

  readonly #host: TerminalHost;
  readonly #output: TerminalOutput;
  #pid: number | undefined;
  #duplicate = false;
  #reader = false;

  /** Internal: terminals are opened with `session.terminal(...)`. */
  constructor(id: string, host: TerminalHost, output: TerminalOutput) {
    this.id = id;
    this.sessionId = host.sessionId;
    this.#host = host;
    this.#output = output;
    this.exited = output.exited;
  }

  /** The pid of the terminal's program on the executor's machine. */
  get pid(): number | undefined {
    return this.#pid;
  }

  /** Whether `terminal.open` found the terminal already open (the same `terminal_id`). */
  get duplicate(): boolean {
    return this.#duplicate;
  }

  /** Bytes of output taken or queued so far: the offset of the next byte. */
  get offset(): number {
    return this.#output.offset;
  }

  /** Bytes the executor evicted from its buffer before this side could read them back. */
  get lostBytes(): number {
    return this.#output.lostBytes;
  }

  /** Internal: the answer of `terminal.open`. */
  opened(result: { pid?: number; duplicate?: boolean }): void {
    this.#pid = result.pid;
    this.#duplicate = result.duplicate === true;
  }

  /** The output as bytes, in order, each byte once. One reader at a time. */
  async *output(options: TerminalReadOptions = {}): AsyncGenerator<Uint8Array, void, undefined> {
    if (this.#reader) throw new TerminalBusyError(this.id);
    this.#reader = true;
    try {
      for (;;) {
        const chunk = await this.#output.take(options.signal);
        if (!chunk) return;
        yield chunk;
      }
    } finally {
      this.#reader = false;
    }
  }

  /** The output as text (UTF-8, characters never split across chunks). One reader at a time. */
  async *text(options: TerminalReadOptions = {}): AsyncGenerator<string, void, undefined> {
    const decoder = new TextDecoder();
    for await (const chunk of this.output(options)) {
      const text = decoder.decode(chunk, { stream: true });
      if (text) yield text;
    }
    const rest = decoder.decode();
    if (rest) yield rest;
  }

  /** The output as text: `for await (const text of terminal)`. */
  [Symbol.asyncIterator](): AsyncGenerator<string, void, undefined> {
    return this.text();
  }

  /** Types `data` (`terminal.input`): text as UTF-8, bytes as they are. Resolves with the count. */
  async write(data: string | Uint8Array, options: CallOptions = {}): Promise<number> {
    const { written } = await this.#host.request(
      "terminal.input",
      typeof data === "string" ? { session_id: this.sessionId, terminal_id: this.id, data } : {
        session_id: this.sessionId,
        terminal_id: this.id,
        data: toBase64(data),
        encoding: "base64",
      },
      options,
    );
    return written;
  }

  /** Sets the window size (`terminal.resize`). */
  resize(cols: number, rows: number, options: CallOptions = {}): Promise<TerminalResizeResult> {
    return this.#host.request("terminal.resize", {
      session_id: this.sessionId,
      terminal_id: this.id,
      cols,
      rows,
    }, options);
  }

  /**
   * Closes the terminal (`terminal.close`): SIGHUP to its processes, SIGKILL after the grace
   * period. Resolves once they are gone; `closed: false` when it had exited already.
   */
  async close(options: CallOptions = {}): Promise<TerminalCloseResult> {
    const result = await this.#host.request("terminal.close", {
      session_id: this.sessionId,
      terminal_id: this.id,
    }, options);
    this.#output.closed(result.exit_code);
    return result;
  }

  /**
   * Closes the terminal as {@linkcode close} does, unless its program has exited or its session
   * has ended already (nothing is left to close): `await using terminal = await session.terminal()`.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#output.ended) return;
    await this.close();
  }
}

/** Closes `terminal` when `signal` aborts (the `signal` of `session.terminal(...)`). */
export function closeOnAbort(terminal: Terminal, signal: AbortSignal, logger: Logger): void {
  const onAbort = () =>
    void terminal.close().catch((error) =>
      logger.debug("terminal.close after abort failed", { error: String(error) })
    );
  if (signal.aborted) return onAbort();
  signal.addEventListener("abort", onAbort, { once: true });
  terminal.exited.then(() => signal.removeEventListener("abort", onAbort));
}
