/**
 * A stream's lossy output notifications (`terminal.output`, `process.output`) without leaving
 * the receiver behind for good. A congested link drops them, and the receiver learns of the gap
 * from the offset of the next chunk it gets, then reads the gap back (`terminal.read`,
 * `process.read`). A stream that goes quiet after a drop has no next chunk: a shell's prompt
 * after a flood would never reach the receiver. So the latest dropped chunk of each stream is
 * kept and sent again once the link has room, unless a later chunk of the stream got through
 * first.
 */
import { type Clock, systemClock, type TimerHandle } from "../../protocol/clock.ts";

/** How a stream's notifications leave: `send` is false when the link dropped one (congested). */
export interface LossyLink<P> {
  /** Sends a notification: false when dropped, throws when there is no connection. */
  send(params: P): boolean;
  /** Whether the link holds more unsent than it takes before dropping. */
  congested(): boolean;
}

/** How often a congested link is looked at again: a transport says how much it holds, not when. */
export const LOSSY_RETRY_MS = 50;

/** The notifications of many streams, each keyed by `key` (its session first). */
export class LossyOutput<P extends { readonly session_id: string }> {
  readonly #link: LossyLink<P>;
  readonly #key: (params: P) => string;
  readonly #clock: Clock;
  /** The latest dropped chunk of each stream whose later chunks have not got through. */
  readonly #owed = new Map<string, P>();
  #timer: TimerHandle | undefined;

  constructor(link: LossyLink<P>, key: (params: P) => string, clock: Clock = systemClock) {
    this.#link = link;
    this.#key = key;
    this.#clock = clock;
  }

  /** Streams with a dropped chunk not yet sent again. */
  get owed(): number {
    return this.#owed.size;
  }

  /** Sends a chunk; a dropped one is sent again once the link has room. */
  send(params: P): void {
    const key = this.#key(params);
    let sent: boolean;
    try {
      sent = this.#link.send(params);
    } catch {
      // Not connected: the receiver reads back what it missed once the executor resumes.
      this.#owed.delete(key);
      return;
    }
    if (sent) {
      this.#owed.delete(key);
      return;
    }
    this.#owed.set(key, params);
    this.#timer ??= this.#clock.setTimeout(() => this.#retry(), LOSSY_RETRY_MS);
  }

  /** Forgets the streams of a session that ended (its receiver reads nothing more of them). */
  forgetSession(sessionId: string): void {
    for (const [key, params] of this.#owed) {
      if (params.session_id === sessionId) this.#owed.delete(key);
    }
  }

  /** Forgets every stream and stops looking at the link. */
  dispose(): void {
    this.#owed.clear();
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #retry(): void {
    this.#timer = undefined;
    if (this.#owed.size === 0) return;
    if (this.#link.congested()) {
      this.#timer = this.#clock.setTimeout(() => this.#retry(), LOSSY_RETRY_MS);
      return;
    }
    const owed = [...this.#owed.values()];
    this.#owed.clear();
    // One may be dropped again (the link filled up meanwhile): it is owed again.
    for (const params of owed) this.send(params);
  }
}
