/**
 * The terminals the inspector's page opens, held by the inspector rather than by a page: a page
 * that reloads, loses its connection or is opened in another browser attaches to the same
 * terminal and gets its output from where it left off (the event id of each output message is
 * the byte offset after it, which `EventSource` sends back as `Last-Event-ID`). Each terminal
 * keeps its last {@linkcode TERMINAL_KEPT_BYTES} of output for that; a page that comes back
 * from before them is told how many bytes it missed.
 *
 * Portable: web-standard APIs only.
 */
import type { Logger } from "../../protocol/logger.ts";
import type { Session } from "../../harness/handles.ts";
import type { Terminal } from "../../harness/terminal.ts";
import { concatBytes } from "../../transport/bytes.ts";

/** Output each terminal keeps for pages that attach later: 1 MiB. */
export const TERMINAL_KEPT_BYTES = 1024 * 1024;
/** Exited terminals listed at the most (the oldest is forgotten first). */
const EXITED_KEPT = 16;

/** A terminal as the page lists it. */
export interface InspectorTerminalView {
  readonly id: string;
  readonly sessionId: string;
  readonly cols: number;
  readonly rows: number;
  /** The offset after the last byte of output. */
  readonly offset: number;
  /** Whether its program has exited (or its session ended). */
  readonly exited: boolean;
  /** The exit code, once exited (`null`: a signal, or unknown). */
  readonly exitCode: number | null | undefined;
  readonly openedAt: number;
}

/** What a page attached to a terminal is sent. */
export interface TerminalListener {
  /** Output from `offset` on. */
  output(offset: number, bytes: Uint8Array): void;
  /** Bytes before `from` are no longer kept (the page asked for older ones). */
  skipped(from: number, to: number): void;
  /** What was kept has been sent: from here on, output as it comes. */
  live(): void;
  /** The program exited; nothing more comes. */
  exit(exitCode: number | null): void;
  /**
   * Whether the page has room for more of what is kept: the output kept from before it
   * attached is sent while this holds, and the rest at {@linkcode TerminalAttachment.resume}.
   */
  hasRoom(): boolean;
}

/** A page attached to a terminal. */
export interface TerminalAttachment {
  /** Sends more of what is kept, as far as the page has room: call it when the page read. */
  resume(): void;
  /** Stops sending anything. */
  detach(): void;
}

/**
 * The most bytes of kept output sent as one message: kept chunks (as the PTY wrote them, often
 * a few bytes) are joined up to it, so that a page catching up on a megabyte is sent a few dozen
 * messages rather than thousands.
 */
const REPLAY_MESSAGE_BYTES = 32 * 1024;

interface Chunk {
  readonly offset: number;
  readonly bytes: Uint8Array;
}

/** One terminal and what it keeps. */
class HeldTerminal {
  readonly terminal: Terminal;
  readonly openedAt: number;
  cols: number;
  rows: number;
  readonly #chunks: Chunk[] = [];
  #kept = 0;
  #end = 0;
  #exited = false;
  #exitCode: number | null | undefined;
  readonly #listeners = new Set<TerminalListener>();

  constructor(terminal: Terminal, cols: number, rows: number, openedAt: number) {
    this.terminal = terminal;
    this.cols = cols;
    this.rows = rows;
    this.openedAt = openedAt;
  }

  get exited(): boolean {
    return this.#exited;
  }

  view(): InspectorTerminalView {
    return {
      id: this.terminal.id,
      sessionId: this.terminal.sessionId,
      cols: this.cols,
      rows: this.rows,
      offset: this.#end,
      exited: this.#exited,
      exitCode: this.#exitCode,
      openedAt: this.openedAt,
    };
  }

  /** Reads the terminal's output until it ends. */
  async pump(logger: Logger): Promise<void> {
    try {
      for await (const bytes of this.terminal.output()) this.#append(bytes);
    } catch (error) {
      logger.info("inspector terminal output ended with an error", {
        terminal_id: this.terminal.id,
        error: String(error),
      });
    }
    const code = await this.terminal.exited;
    this.#exited = true;
    this.#exitCode = code;
    for (const listener of this.#listeners) listener.exit(code);
    this.#listeners.clear();
  }

  /**
   * Sends what is kept from `from` on, as fast as the page takes it (`hasRoom`, `resume`), then
   * what follows as it comes: the page goes live once it has caught up with the output. Output
   * that is no longer kept by the time the page gets to it is reported as skipped.
   */
  attach(from: number, listener: TerminalListener): TerminalAttachment {
    let next = from;
    let state: "catching up" | "live" | "detached" = "catching up";
    const resume = () => {
      while (state === "catching up" && listener.hasRoom()) {
        const start = this.#end - this.#kept;
        if (next < start) {
          listener.skipped(next, start);
          next = start;
        } else if (next < this.#end) {
          const bytes = this.#read(next, REPLAY_MESSAGE_BYTES);
          listener.output(next, bytes);
          next += bytes.byteLength;
        } else if (this.#exited) {
          state = "detached";
          listener.exit(this.#exitCode ?? null);
        } else {
          state = "live";
          listener.live();
          this.#listeners.add(listener);
        }
      }
    };
    resume();
    return {
      resume,
      detach: () => {
        state = "detached";
        this.#listeners.delete(listener);
      },
    };
  }

  /** Up to `max` kept bytes from `offset` (which is kept), joined from the chunks that hold them. */
  #read(offset: number, max: number): Uint8Array {
    const chunks = this.#chunks;
    // The last chunk that starts at or before `offset`.
    let low = 0;
    for (let high = chunks.length - 1; low < high;) {
      const mid = (low + high + 1) >> 1;
      if (chunks[mid].offset <= offset) low = mid;
      else high = mid - 1;
    }
    const parts: Uint8Array[] = [];
    let at = offset;
    for (let i = low; i < chunks.length && at - offset < max; i++) {
      const { bytes, offset: chunkAt } = chunks[i];
      const part = bytes.subarray(at - chunkAt, at - chunkAt + max - (at - offset));
      parts.push(part);
      at += part.byteLength;
    }
    return parts.length === 1 ? parts[0] : concatBytes(parts);
  }

  #append(bytes: Uint8Array): void {
    const chunk = { offset: this.#end, bytes };
    this.#chunks.push(chunk);
    this.#kept += bytes.byteLength;
    this.#end += bytes.byteLength;
    while (this.#kept - this.#chunks[0].bytes.byteLength >= TERMINAL_KEPT_BYTES) {
      this.#kept -= this.#chunks.shift()!.bytes.byteLength;
    }
    for (const listener of this.#listeners) listener.output(chunk.offset, bytes);
  }
}

/** The terminals of one inspector. */
export class InspectorTerminals {
  readonly #held = new Map<string, HeldTerminal>();
  readonly #logger: Logger;
  readonly #now: () => number;

  constructor(logger: Logger, now: () => number) {
    this.#logger = logger;
    this.#now = now;
  }

  /** Opens a terminal of `session` and keeps it. */
  async open(
    session: Session,
    options: { cols: number; rows: number; terminalId: string },
  ): Promise<InspectorTerminalView> {
    const terminal = await session.terminal({
      terminalId: options.terminalId,
      cols: options.cols,
      rows: options.rows,
    });
    const existing = this.#held.get(terminal.id);
    if (existing) return existing.view();
    const held = new HeldTerminal(terminal, options.cols, options.rows, this.#now());
    this.#held.set(terminal.id, held);
    void held.pump(this.#logger).then(() => this.#forgetOld());
    return held.view();
  }

  /** The terminals of `sessionId`, oldest first. */
  list(sessionId: string): InspectorTerminalView[] {
    return [...this.#held.values()]
      .filter((held) => held.terminal.sessionId === sessionId)
      .map((held) => held.view());
  }

  /** The terminal `id`, if the inspector holds it. */
  get(id: string): HeldTerminal | undefined {
    return this.#held.get(id);
  }

  /** Closes every terminal still open (the inspector closes). */
  close(): void {
    for (const held of this.#held.values()) {
      if (held.exited) continue;
      held.terminal.close().catch((error) =>
        this.#logger.debug("inspector terminal close failed", { error: String(error) })
      );
    }
  }

  #forgetOld(): void {
    const exited = [...this.#held.values()].filter((held) => held.exited);
    for (const held of exited.slice(0, Math.max(0, exited.length - EXITED_KEPT))) {
      this.#held.delete(held.terminal.id);
    }
  }
}
