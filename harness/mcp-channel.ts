/**
 * The MCP channel (`channel=mcp`) as a transport for the MCP TypeScript SDK: raw MCP JSON-RPC
 * messages travel unchanged inside `mcp.message` notifications between the harness (where the
 * MCP client runs) and an MCP server the executor runs for the session over stdio.
 *
 * The class has the shape of the SDK's `Transport` (`start`, `send`, `close`, `onmessage`,
 * `onclose`, `onerror`), so `await new Client(...).connect(await session.mcp("echo"))` works
 * without this package depending on the SDK.
 */
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

/** The harness-internal controls of a channel. */
export interface McpChannelControl {
  /** A message from the server (`mcp.message` from the executor). */
  deliver(message: McpMessage): void;
  /** The channel ended on the executor's side or with the session. */
  end(reason: string): void;
}

const controls = new WeakMap<McpChannel, McpChannelControl>();

/** The internal controls of a channel (for the harness's own modules). */
export function mcpChannelControl(channel: McpChannel): McpChannelControl {
  return controls.get(channel)!;
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

  readonly #link: McpChannelLink;
  #buffer: McpMessage[] | undefined = [];
  #closeReason: string | undefined;
  #resolveClosed!: (reason: string) => void;

  /** Internal: channels are opened by `Session.mcp`. */
  constructor(channelId: string, server: string, bmaSessionId: string, link: McpChannelLink) {
    this.channelId = channelId;
    this.server = server;
    this.bmaSessionId = bmaSessionId;
    this.#link = link;
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
    controls.set(this, {
      deliver: (message) => {
        if (this.#closeReason !== undefined) return;
        // Messages that arrive before start() wait for it, as the MCP SDK expects.
        if (this.#buffer) this.#buffer.push(message);
        else this.#dispatch(message);
      },
      end: (reason) => this.#finish(reason),
    });
  }

  /** Whether the channel is closed. */
  get isClosed(): boolean {
    return this.#closeReason !== undefined;
  }

  /** Starts delivering messages to `onmessage` (those received so far first). */
  start(): Promise<void> {
    const buffered = this.#buffer;
    this.#buffer = undefined;
    for (const message of buffered ?? []) this.#dispatch(message);
    return Promise.resolve();
  }

  /** Sends one MCP message to the server. */
  send(message: McpMessage): Promise<void> {
    if (this.#closeReason !== undefined) {
      return Promise.reject(new McpChannelClosedError(this.channelId, this.#closeReason));
    }
    try {
      this.#link.send(message);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Closes the channel (`mcp.close`): the executor stops the server. */
  async close(): Promise<void> {
    if (this.#closeReason !== undefined) return;
    this.#finish("closed");
    await this.#link.close("closed");
  }

  #dispatch(message: McpMessage): void {
    try {
      this.onmessage?.(message);
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }

  #finish(reason: string): void {
    if (this.#closeReason !== undefined) return;
    this.#closeReason = reason;
    this.#buffer = undefined;
    this.#resolveClosed(reason);
    try {
      this.onclose?.();
    } catch {
      // A client's close handler failing changes nothing here.
    }
  }
}
