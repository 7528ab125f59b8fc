/**
 * MCP servers for the MCP channel (`mcp.open` / `mcp.message` / `mcp.close`): servers configured
 * in an `mcp.json` (the common `mcpServers` format) are started over stdio, one instance per
 * channel, as processes of the session (in its workdir, under the executor's child environment
 * policy), and raw MCP JSON-RPC messages are relayed unchanged, one JSON per line.
 *
 * A server's output is framed in linear time (each byte is looked at once) and a line is
 * bounded: a server that writes more than `maxLineBytes` without a newline has its channel
 * closed, so no server can make the executor buffer without limit. The same holds for messages
 * the server does not read from its stdin.
 */
import { readFile, stat } from "node:fs/promises";
import * as z from "zod";
import { randomUUID } from "node:crypto";
import { isAbsolute, resolve } from "node:path";
import type {
  McpCloseParams,
  McpCloseResult,
  McpMessageParams,
  McpOpenParams,
  McpOpenResult,
} from "../../protocol/generated/contract.ts";
import {
  NotFoundError,
  ResourceExhaustedError,
  UnavailableError,
} from "../../protocol/generated/errors.ts";
import { FrameTooLargeError } from "../../protocol/errors.ts";
import { jsonSyntaxError, type Logger } from "../../protocol/logger.ts";
import { type ProcessUnit, SpawnError } from "./process-group.node.ts";
import type { McpServerConfig } from "./mcp-config.ts";
import { concatBytes } from "../../transport/bytes.ts";

export type { McpServerConfig };

/** How often a server whose output is held back looks whether the link has drained, ms. */
const CONGESTION_POLL_MS = 10;

/** Reads the `mcpServers` map of an `mcp.json` file. */
export async function readMcpConfig(path: string): Promise<Record<string, McpServerConfig>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(path, "utf8"));
  } catch (error) {
    // The parser's message quotes the text, and an MCP server's env holds its keys.
    if (error instanceof SyntaxError) throw new Error(`mcp.json: ${jsonSyntaxError(error)}`);
    throw error;
  }
  // `servers` as VS Code spells the map; each entry as `McpServerConfig` says.
  const file = McpConfigFile.safeParse(parsed);
  if (!file.success) {
    // Where, never what: an env value may be a key.
    const issue = file.error.issues[0];
    const at = issue.path.length ? issue.path.map(String).join(".") : "the file";
    throw new Error(`mcp.json: ${at}: ${issue.message}`);
  }
  const servers = file.data.mcpServers ?? file.data.servers ?? {};
  return servers as Record<string, McpServerConfig>;
}

const McpServerEntry = z.object({
  command: z.string().min(1, "a server needs a command"),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().optional(),
});

const McpConfigFile = z.object({
  mcpServers: z.record(z.string(), McpServerEntry).optional(),
  servers: z.record(z.string(), McpServerEntry).optional(),
}).refine((file) => file.mcpServers !== undefined || file.servers !== undefined, {
  message: "holds no mcpServers map",
});

/** What the relay needs from the executor. */
export interface McpRelayLink {
  /**
   * Sends `mcp.message` to the harness; throws `FrameTooLargeError` for a message its frame
   * cannot carry (the channel is then closed: `message_too_large`).
   */
  message(params: McpMessageParams): void;
  /**
   * Whether the link to the harness holds more unsent than it should (a harness that reads
   * slowly): the server's output is then left unread, so that the server blocks on its write
   * (MCP messages are not lossy; they wait in the server instead of in the executor).
   */
  congested?(): boolean;
  /** Sends `mcp.close` to the harness (the server exited, or its channel was closed). */
  closed(params: McpCloseParams): void;
  /** Reports `session.status` `detail: "mcp_unavailable"` when a server fails to start. */
  unavailable(sessionId: string, server: string): void;
  /** The session's workdir (its real path). */
  workdir(sessionId: string): Promise<string>;
  /** Starts a server as a process of the session, with `env` over the child environment. */
  spawn(
    sessionId: string,
    argv: readonly string[],
    options: { cwd: string; env: Record<string, string> | undefined },
  ): Promise<ProcessUnit>;
}

/** Options of an {@linkcode McpRelay}. */
export interface McpRelayOptions {
  /** Time between SIGTERM and SIGKILL. Default 2 s. */
  graceMs?: number;
  /** Longest line (one message) a server may write, in bytes. Default 16 MiB. */
  maxLineBytes?: number;
  /** Most bytes waiting to be written to a server's stdin. Default 16 MiB. */
  maxPendingInputBytes?: number;
  /** Channels open at once in one session (then -32009 `too_many_channels`). Default 32. */
  maxChannelsPerSession?: number;
  /** Channels open at once on the executor, over all sessions (each a process). Default 128. */
  maxChannels?: number;
  logger?: Logger;
}

/** The default of {@linkcode McpRelayOptions.maxChannelsPerSession}. */
export const DEFAULT_MCP_CHANNELS_PER_SESSION = 32;
/** The default of {@linkcode McpRelayOptions.maxChannels}. */
export const DEFAULT_MCP_CHANNELS = 128;

/** The default bound of one line from a server (the default frame limit of the connection). */
export const DEFAULT_MCP_MAX_LINE_BYTES = 16 * 1024 * 1024;

interface Channel {
  readonly id: string;
  readonly sessionId: string;
  readonly server: string;
  readonly unit: ProcessUnit;
  closing: boolean;
}

const NEWLINE = 0x0a;

/** Splits a byte stream into lines, each byte scanned once, a line at most `maxBytes`. */
export class LineFramer {
  readonly #maxBytes: number;
  #parts: Uint8Array[] = [];
  #length = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /**
   * Feeds a chunk; calls `line` with each complete line (without the newline). Returns false,
   * and keeps nothing, once a line grows past the bound.
   */
  push(chunk: Uint8Array, line: (bytes: Uint8Array) => void): boolean {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(NEWLINE, start);
      if (newline < 0) break;
      const piece = chunk.subarray(start, newline);
      if (this.#length + piece.byteLength > this.#maxBytes) return this.#overflow();
      if (this.#parts.length === 0) {
        line(piece);
      } else {
        this.#parts.push(piece);
        line(concatBytes(this.#parts, this.#length + piece.byteLength));
        this.#parts = [];
        this.#length = 0;
      }
      start = newline + 1;
    }
    if (start < chunk.byteLength) {
      const rest = chunk.subarray(start);
      if (this.#length + rest.byteLength > this.#maxBytes) return this.#overflow();
      // Copied: the stream may reuse its chunk's memory.
      this.#parts.push(rest.slice());
      this.#length += rest.byteLength;
    }
    return true;
  }

  #overflow(): false {
    this.#parts = [];
    this.#length = 0;
    return false;
  }
}

const utf8 = new TextDecoder();

/** The MCP channels of one executor. */
export class McpRelay {
  readonly #servers: Record<string, McpServerConfig>;
  readonly #link: McpRelayLink;
  readonly #channels = new Map<string, Channel>();
  readonly #graceMs: number;
  readonly #maxLineBytes: number;
  readonly #maxPendingInputBytes: number;
  readonly #maxChannelsPerSession: number;
  readonly #maxChannels: number;
  /** Channels opening or open, by session (counted before the server starts). */
  readonly #perSession = new Map<string, number>();
  #opening = 0;
  readonly #logger: Logger | undefined;

  constructor(
    servers: Record<string, McpServerConfig>,
    link: McpRelayLink,
    options: McpRelayOptions = {},
  ) {
    this.#servers = servers;
    this.#link = link;
    this.#graceMs = options.graceMs ?? 2_000;
    this.#maxLineBytes = options.maxLineBytes ?? DEFAULT_MCP_MAX_LINE_BYTES;
    this.#maxPendingInputBytes = options.maxPendingInputBytes ?? 16 * 1024 * 1024;
    this.#maxChannelsPerSession = options.maxChannelsPerSession ?? DEFAULT_MCP_CHANNELS_PER_SESSION;
    this.#maxChannels = options.maxChannels ?? DEFAULT_MCP_CHANNELS;
    this.#logger = options.logger;
  }

  /** The configured server names (advertised as `capabilities.mcp.servers`). */
  get serverNames(): string[] {
    return Object.keys(this.#servers);
  }

  /** `mcp.open`: starts one instance of the server for a new channel. */
  async open(params: McpOpenParams): Promise<McpOpenResult> {
    const config = Object.hasOwn(this.#servers, params.server)
      ? this.#servers[params.server]
      : undefined;
    if (!config) throw new NotFoundError("unknown MCP server", { reason: "unknown_server" });
    // Each channel is a process: bounded per session and on the executor, as terminals are.
    const sessionId = params.session_id;
    const inSession = this.#perSession.get(sessionId) ?? 0;
    if (
      inSession >= this.#maxChannelsPerSession ||
      this.#channels.size + this.#opening >= this.#maxChannels
    ) {
      throw new ResourceExhaustedError("too many MCP channels open", {
        reason: "too_many_channels",
      });
    }
    this.#perSession.set(sessionId, inSession + 1);
    this.#opening++;
    let opened = false;
    try {
      const result = await this.#start(params, config);
      opened = true;
      return result;
    } finally {
      this.#opening--;
      if (!opened) this.#release(sessionId);
    }
  }

  /** A channel of `sessionId` is gone: its place in the bounds is free. */
  #release(sessionId: string): void {
    const left = (this.#perSession.get(sessionId) ?? 1) - 1;
    if (left > 0) this.#perSession.set(sessionId, left);
    else this.#perSession.delete(sessionId);
  }

  async #start(params: McpOpenParams, config: McpServerConfig): Promise<McpOpenResult> {
    const workdir = await this.#link.workdir(params.session_id);
    const cwd = config.cwd === undefined
      ? workdir
      : isAbsolute(config.cwd)
      ? config.cwd
      : resolve(workdir, config.cwd);
    let unit: ProcessUnit;
    try {
      unit = await this.#link.spawn(params.session_id, [config.command, ...(config.args ?? [])], {
        cwd,
        env: config.env,
      });
    } catch (error) {
      if (!(error instanceof SpawnError)) throw error;
      this.#logger?.warn("MCP server did not start", {
        server: params.server,
        session_id: params.session_id,
        // A missing cwd fails the spawn as if the program were missing: said as it is.
        error: await isDirectory(cwd) ? error.message : `its cwd is not a directory: ${cwd}`,
      });
      this.#link.unavailable(params.session_id, params.server);
      throw new UnavailableError("MCP server did not start", { reason: "mcp_unavailable" });
    }
    const channel: Channel = {
      id: `mcp_${randomUUID()}`,
      sessionId: params.session_id,
      server: params.server,
      unit,
      closing: false,
    };
    this.#channels.set(channel.id, channel);
    const child = unit.child;
    child.stdin!.on("error", () => {});
    const framer = new LineFramer(this.#maxLineBytes);
    const stdout = child.stdout!;
    stdout.on("data", (chunk: Uint8Array) => {
      if (channel.closing) return;
      const fits = framer.push(chunk, (line) => this.#forward(channel, line));
      if (!fits) {
        this.#logger?.warn("MCP server wrote a line over the limit: channel closed", {
          server: channel.server,
          channel_id: channel.id,
          max_line_bytes: this.#maxLineBytes,
        });
        this.#end(channel, "message_too_large");
        return;
      }
      if (this.#link.congested?.()) this.#holdBack(channel, stdout);
    });
    // The server's last messages are read before the channel ends (unless a descendant holds
    // its stdout open).
    const drained = new Promise<void>((resolve) => {
      child.stdout!.once("close", resolve);
      child.stdout!.once("end", resolve);
    });
    unit.leaderExited.then(() =>
      Promise.race([drained, new Promise((resolve) => setTimeout(resolve, 100))])
    ).then(() => this.#end(channel, "server_exited"));
    return { channel_id: channel.id };
  }

  /** `mcp.message` from the harness: one message to the server's stdin. */
  deliver(params: McpMessageParams): void {
    const channel = this.#channels.get(params.channel_id);
    if (!channel || channel.closing) {
      this.#logger?.debug("mcp.message for an unknown channel dropped", {
        channel_id: params.channel_id,
      });
      return;
    }
    const stdin = channel.unit.child.stdin!;
    if (stdin.destroyed || stdin.writableEnded) return;
    if (stdin.writableLength > this.#maxPendingInputBytes) {
      this.#logger?.warn("MCP server does not read its input: channel closed", {
        server: channel.server,
        channel_id: channel.id,
      });
      this.#end(channel, "server_not_reading");
      return;
    }
    stdin.write(`${JSON.stringify(params.message)}\n`);
  }

  /** `mcp.close` from the harness: ends the server (a channel of the session named only). */
  async close(params: McpCloseParams): Promise<McpCloseResult> {
    const channel = this.#channels.get(params.channel_id);
    if (!channel || channel.closing || channel.sessionId !== params.session_id) {
      return { closed: false };
    }
    await this.#stop(channel);
    return { closed: true };
  }

  /**
   * Ends every channel: the connection they were opened on is gone, and the harness ended them
   * with it (`disconnected`); their servers would otherwise run until their sessions end.
   */
  closeAll(): Promise<void> {
    return Promise.all([...this.#channels.values()].map((channel) => this.#stop(channel)))
      .then(() => {});
  }

  /** Ends every channel of a session (on session stop). */
  async closeSession(sessionId: string, graceMs = this.#graceMs): Promise<void> {
    const channels = [...this.#channels.values()].filter((c) => c.sessionId === sessionId);
    await Promise.all(channels.map((channel) => this.#stop(channel, graceMs)));
  }

  /**
   * Stops reading the server's output while the link is congested, looking again every
   * {@linkcode CONGESTION_POLL_MS} (a transport says how much it holds, not when it drained).
   */
  #holdBack(channel: Channel, stdout: NodeJS.ReadableStream): void {
    stdout.pause();
    const look = () => {
      if (channel.closing) return;
      if (this.#link.congested?.()) setTimeout(look, CONGESTION_POLL_MS);
      else stdout.resume();
    };
    setTimeout(look, CONGESTION_POLL_MS);
  }

  #forward(channel: Channel, line: Uint8Array): void {
    let message: unknown;
    try {
      message = JSON.parse(utf8.decode(line));
    } catch {
      return; // a server's stray log line is not a message
    }
    if (typeof message === "object" && message !== null && !Array.isArray(message)) {
      try {
        this.#link.message({ channel_id: channel.id, message: message as Record<string, unknown> });
      } catch (error) {
        if (!(error instanceof FrameTooLargeError)) throw error;
        // Under the line bound, but not in a frame with its wrapper (or its bytes re-encoded):
        // closed as a line over the bound is, never dropped in silence.
        this.#logger?.warn("MCP server wrote a message over the frame limit: channel closed", {
          server: channel.server,
          channel_id: channel.id,
          bytes: line.byteLength,
        });
        this.#end(channel, "message_too_large");
      }
    }
  }

  /** The channel ends on the executor's side: the harness is told with `mcp.close`. */
  #end(channel: Channel, reason: string): void {
    if (channel.closing) return;
    void this.#stop(channel);
    this.#link.closed({ channel_id: channel.id, session_id: channel.sessionId, reason });
  }

  /** Closes stdin, then ends the server and everything it started. */
  async #stop(channel: Channel, graceMs = this.#graceMs): Promise<void> {
    if (!channel.closing) {
      channel.closing = true;
      this.#release(channel.sessionId);
    }
    this.#channels.delete(channel.id);
    const child = channel.unit.child;
    child.stdin?.end();
    child.stdout?.destroy();
    await channel.unit.terminate(graceMs);
  }
}

function isDirectory(path: string): Promise<boolean> {
  return stat(path).then((found) => found.isDirectory(), () => false);
}
