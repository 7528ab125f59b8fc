/**
 * The MCP channel (`channel=mcp`) as a transport for the MCP TypeScript SDK: raw MCP JSON-RPC
 * messages travel unchanged inside `mcp.message` notifications between the harness (where the
 * MCP client runs) and an MCP server the executor runs for the session over stdio.
 *
 * The class has the shape of the SDK's `Transport` (`start`, `send`, `close`, `onmessage`,
 * `onclose`, `onerror`), so `await new Client(...).connect(await session.mcp("echo"))` works
 * without this package depending on the SDK.
 *
 * The harness holds each channel's {@linkcode McpChannelState} (messages from the executor go
 * in there, and the end); the {@linkcode McpChannel} given to the MCP client is its view.
 */
import { raceSignal, throwIfAborted } from "../protocol/abort.ts";
import { McpChannelClosedError } from "./errors.ts";

/** One MCP JSON-RPC message (request, notification or response), relayed unchanged. */
export type McpMessage = { jsonrpc: "2.0"; [member: string]: unknown };

/** How a channel reaches its executor (internal). */
export interface McpChannelLink {
  /** Sends `mcp.message`; throws when the executor cannot be reached. */
  send(message: McpMessage): void;
  /** Sends `mcp.close` (best effort) and forgets the channel. */
  close(reason: string): Promise<void>;
}

/** What a channel's view is told (internal). */
interface McpChannelReceiver {
  message(message: McpMessage): void;
  closed(): void;
}

/**
 * Most messages from the server held for a client that has not called `start()` yet: past it the
 * channel ends (`not_started`) and the executor stops the server.
 */
export const MAX_MESSAGES_BEFORE_START = 10_000;

/**
 * Most bytes (their JSON's UTF-16 length) of the messages held before `start()`: a few large
 * messages end the channel as many small ones do.
 */
export const MAX_BYTES_BEFORE_START = 16 * 1024 * 1024;

/** One open channel as the harness holds it (internal). */
export class McpChannelState {
  readonly channelId: string;
  readonly server: string;
  readonly sessionId: string;
  readonly link: McpChannelLink;
  /** Settles with the reason once the channel is closed, by either side. */
  readonly closed: Promise<string>;
  /** The view handed to the MCP client. */
  readonly view: McpChannel;
  /** Messages that arrived before the client started reading. */
  buffer: McpMessage[] | undefined = [];
  closeReason: string | undefined;
  receiver: McpChannelReceiver | undefined;
  #bufferedBytes = 0;
  #resolveClosed!: (reason: string) => void;

  constructor(channelId: string, server: string, sessionId: string, link: McpChannelLink) {
    this.channelId = channelId;
    this.server = server;
    this.sessionId = sessionId;
    this.link = link;
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    this.view = new McpChannel(this);
  }

  /** A message from the server (`mcp.message` from the executor). */
  deliver(message: McpMessage): void {
    if (this.closeReason !== undefined) return;
    // Messages that arrive before start() wait for it, as the MCP SDK expects; a client that
    // never starts ends the channel before they fill the harness's memory.
    if (this.buffer) {
      // Sized only while held: a started channel's messages pass without it.
      this.#bufferedBytes += JSON.stringify(message).length;
      if (
        this.buffer.length >= MAX_MESSAGES_BEFORE_START ||
        this.#bufferedBytes > MAX_BYTES_BEFORE_START
      ) {
        this.end("not_started");
        void this.link.close("not_started");
        return;
      }
      this.buffer.push(message);
    } else this.receiver?.message(message);
  }

  /** The channel ended (either side, or with the session). Idempotent. */
  end(reason: string): void {
    if (this.closeReason !== undefined) return;
    this.closeReason = reason;
    this.buffer = undefined;
    this.#resolveClosed(reason);
    this.receiver?.closed();
  }
}

/** An open MCP channel to one server of a session. */
export class McpChannel {
  /** The executor's id of the channel. */
  readonly channelId: string;
  /** The MCP server's name. */
  readonly server: string;
  /** The BMA session the server belongs to. */
  readonly bmaSessionId: string;
  /** Settles with the reason once the channel is closed, by either side. */
  readonly closed: Promise<string>;
  /** Receives each message from the server (set by the MCP client). */
  onmessage?: ((message: McpMessage) => void) | undefined;
  /** Called once when the channel closes. */
  onclose?: (() => void) | undefined;
  /** Called for failures that are not tied to a `send`. */
  onerror?: ((error: Error) => void) | undefined;

  readonly #state: McpChannelState;

  /** Channels are opened by `Session.mcp`. */
  constructor(state: McpChannelState) {
    this.#state = state;
    this.channelId = state.channelId;
    this.server = state.server;
    this.bmaSessionId = state.sessionId;
    this.closed = state.closed;
    state.receiver = {
      message: (message) => this.#dispatch(message),
      closed: () => {
        try {
          this.onclose?.();
        } catch {
          // A client's close handler failing changes nothing here.
        }
      },
    };
  }

  /** Whether the channel is closed. */
  get isClosed(): boolean {
    return this.#state.closeReason !== undefined;
  }

  /** Starts delivering messages to `onmessage` (those received so far first). */
  start(): Promise<void> {
    const state = this.#state;
    const buffered = state.buffer;
    state.buffer = undefined;
    for (const message of buffered ?? []) this.#dispatch(message);
    return Promise.resolve();
  }

  /** Sends one MCP message to the server. */
  send(message: McpMessage): Promise<void> {
    const state = this.#state;
    if (state.closeReason !== undefined) {
      return Promise.reject(new McpChannelClosedError(this.channelId, state.closeReason));
    }
    try {
      state.link.send(message);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Closes the channel (`mcp.close`): the executor stops the server. Resolves once the executor
   * has answered (or the connection is gone). `options.signal` stops that wait (rejects with
   * `RequestAbortedError`): the channel is closed on this side all the same; an already-aborted
   * one closes nothing.
   */
  async close(options: { signal?: AbortSignal } = {}): Promise<void> {
    const state = this.#state;
    if (state.closeReason !== undefined) return;
    throwIfAborted(options.signal, "mcp.close");
    state.end("closed");
    await raceSignal(state.link.close("closed"), options.signal, "mcp.close");
  }

  /** Closes it as {@linkcode close} does: `await using channel = await session.mcp(…)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #dispatch(message: McpMessage): void {
    try {
      this.onmessage?.(message);
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }
}
