/**
 * The harness dials an executor that listens on a local socket (seed 003: "Local socket (brain
 * dials bmad)"). The harness opens the socket and offers the subprotocols, but the conversation
 * is the usual one: the executor sends `executor.register` first. When the connection ends the
 * link dials again with backoff, so the executor can `resume` within its lease, unless the close
 * code forbids it (the contract's `reconnect: false` codes: 1000 after `executor.close`, 1008,
 * 4002, 4003, 4004) or the link or harness was closed. A harness that closes tells the executor
 * 1001, as it tells those that dialed in.
 */
import { raceSignal } from "../protocol/abort.ts";
import type { Clock, TimerHandle } from "../protocol/clock.ts";
import { PROTOCOLS } from "../protocol/generated/contract.ts";
import { CLOSE_CODES, CloseCode } from "../protocol/generated/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import type { CloseInfo, Dialer, Transport } from "../transport/transport.ts";

/** Options of {@linkcode Harness.dial}. */
export interface HarnessDialOptions {
  /** Extra handshake headers for the executor's socket. */
  headers?: Record<string, string>;
  /** Subprotocols to offer, preferred first. Default: `bma.executor.v1.1`, `bma.executor.v1`. */
  protocols?: string[];
  /** First redial delay in ms, doubling up to `maxRedialDelayMs`. Default 100. */
  redialDelayMs?: number;
  /** Cap on the redial delay in ms. Default 5 000. */
  maxRedialDelayMs?: number;
  /** Dial only once: no redial after the connection ends. Default false. */
  once?: boolean;
  /**
   * Aborts the first dial: `dial` rejects with `RequestAbortedError` and the link ends (no
   * redial). Later redials are not tied to it: `close()` ends the link.
   */
  signal?: AbortSignal;
}

/** A harness's link to a listening executor, as {@linkcode Harness.dial} returns it. */
export interface DialedExecutorLink {
  /** The executor's socket URL. */
  readonly url: string;
  /** Whether a connection is open now. */
  readonly connected: boolean;
  /**
   * Settles when the link ends for good: `close()`, the harness closed, `once`, or a close
   * code that forbids redialing (its code and reason).
   */
  readonly closed: Promise<CloseInfo>;
  /**
   * Stops redialing and closes the open connection with 1000. A listening executor of this SDK
   * keeps listening, its sessions kept for the next harness that dials it (this one again, or
   * another); to stop it for good, close its handle (`executor.close()`: `executor.close`, then
   * 1000).
   */
  close(): Promise<void>;
  /** Closes it as `close` does: `await using link = await harness.dial(…)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** What a link needs from the harness (internal). */
export interface DialLinkHost {
  readonly dial: Dialer;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly maxFrameBytes: number | undefined;
  /** Serves an executor on the dialed transport. */
  open(transport: Transport, url: URL): void;
}

/** One dialed executor socket, redialed until closed (internal). */
export class DialLink implements DialedExecutorLink {
  readonly url: string;
  readonly closed: Promise<CloseInfo>;
  readonly #host: DialLinkHost;
  readonly #options: HarnessDialOptions;
  readonly #controller = new AbortController();
  #resolveClosed!: (info: CloseInfo) => void;
  #transport: Transport | undefined;
  #timer: TimerHandle | undefined;
  #ended = false;
  /** How a connection that opens after the link ended is closed. */
  #lateClose: CloseInfo = { code: CloseCode.NORMAL, reason: "harness closed the link" };

  constructor(url: string, host: DialLinkHost, options: HarnessDialOptions) {
    this.url = url;
    this.#host = host;
    this.#options = options;
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
  }

  get connected(): boolean {
    return this.#transport !== undefined;
  }

  /** The first dial: rejects (and ends the link) when it fails or `signal` aborts. */
  async start(signal?: AbortSignal): Promise<void> {
    try {
      // An aborted first dial ends the link: its caller never gets it to close.
      await raceSignal(
        this.#connect(),
        signal,
        "dial",
        () => this.#end({ code: 1006, reason: "dial aborted" }),
      );
    } catch (error) {
      this.#end({ code: 1006, reason: "dial failed" });
      throw error;
    }
  }

  close(): Promise<void> {
    const transport = this.#transport;
    this.#end({ code: 1000, reason: "closed by the harness" });
    if (!transport) return Promise.resolve();
    try {
      transport.close(1000, "harness closed the link");
    } catch {
      // Already closing.
    }
    return transport.closed.then(() => {});
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Ends the link as its harness closes: no more redials, and the open connection is left to
   * the harness's own close, which tells every executor 1001 (going away: reconnect, or for a
   * listening one, wait for the next dial) — as `Harness.close` documents, where `close()`'s
   * 1000 would stop an executor that keeps the contract's "1000: do not reconnect".
   */
  release(): void {
    this.#lateClose = { code: CloseCode.GOING_AWAY, reason: "harness shutting down" };
    this.#end(this.#lateClose);
  }

  async #connect(): Promise<void> {
    const transport = await this.#host.dial(this.url, {
      protocols: this.#options.protocols ?? [...PROTOCOLS],
      headers: this.#options.headers,
      signal: this.#controller.signal,
      ...(this.#host.maxFrameBytes !== undefined
        ? { maxFrameBytes: this.#host.maxFrameBytes }
        : {}),
    });
    if (this.#ended) {
      transport.close(this.#lateClose.code, this.#lateClose.reason);
      return;
    }
    this.#transport = transport;
    transport.closed.then((info) => this.#lost(transport, info));
    this.#host.open(deferredListen(transport), connectUrl(this.url));
  }

  #lost(transport: Transport, info: CloseInfo): void {
    if (this.#transport === transport) this.#transport = undefined;
    if (this.#ended) return;
    const spec = CLOSE_CODES.get(info.code);
    if (this.#options.once || (spec && !spec.reconnect)) {
      this.#end(info);
      return;
    }
    this.#host.logger.info("executor link lost: dialing again", { code: info.code });
    this.#redial(1);
  }

  #redial(attempt: number): void {
    if (this.#ended) return;
    const first = this.#options.redialDelayMs ?? 100;
    const cap = this.#options.maxRedialDelayMs ?? 5_000;
    const delay = Math.min(cap, first * 2 ** (attempt - 1));
    // Jitter: executors dialed by many harnesses are not all redialed at once.
    const jittered = Math.round(delay * (0.5 + Math.random() / 2));
    this.#timer = this.#host.clock.setTimeout(() => {
      this.#timer = undefined;
      this.#connect().catch((error) => {
        if (this.#ended) return;
        this.#host.logger.debug("dialing the executor failed", { error: String(error) });
        this.#redial(attempt + 1);
      });
    }, jittered);
  }

  #end(info: CloseInfo): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#timer !== undefined) this.#host.clock.clearTimeout(this.#timer);
    this.#controller.abort();
    this.#resolveClosed(info);
  }
}

/**
 * The executor speaks first, as soon as its side of the socket opens: its `executor.register`
 * can be buffered on this side before the harness has built the connection, and a peer is fed
 * buffered frames as it subscribes, before its handlers exist. Subscribing a microtask later
 * lets the connection install its handlers first.
 */
function deferredListen(transport: Transport): Transport {
  return {
    get protocol() {
      return transport.protocol;
    },
    closed: transport.closed,
    send: (frame) => transport.send(frame),
    close: (code, reason) => transport.close(code, reason),
    listen: (receiver) => queueMicrotask(() => transport.listen(receiver)),
  };
}

/** The URL a dialed connection is known by (a named pipe path is not a URL). */
function connectUrl(url: string): URL {
  try {
    return new URL(url);
  } catch {
    return new URL("http://localhost/");
  }
}
