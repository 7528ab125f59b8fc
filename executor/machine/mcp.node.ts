/**
 * MCP servers for the MCP channel (`mcp.open` / `mcp.message` / `mcp.close`): servers configured
 * in an `mcp.json` (the common `mcpServers` format) are started over stdio, one instance per
 * channel, and raw MCP JSON-RPC messages are relayed unchanged, one JSON per line.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import type {
  McpCloseParams,
  McpCloseResult,
  McpMessageParams,
  McpOpenParams,
  McpOpenResult,
} from "../../protocol/generated/contract.ts";
import { NotFoundError, UnavailableError } from "../../protocol/generated/errors.ts";
import { terminateGroup } from "./process-group.node.ts";

/** One server of an `mcp.json`: how to start it over stdio. */
export interface McpServerConfig {
  command: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
}

/** Reads the `mcpServers` map of an `mcp.json` file. */
export async function readMcpConfig(path: string): Promise<Record<string, McpServerConfig>> {
  const parsed = JSON.parse(await readFile(path, "utf8")) as {
    mcpServers?: Record<string, McpServerConfig>;
  };
  const servers = parsed.mcpServers ?? {};
  for (const [name, server] of Object.entries(servers)) {
    if (typeof server?.command !== "string") {
      throw new Error(`mcp.json: server "${name}" has no command`);
    }
  }
  return servers;
}

/** What the relay needs from the executor. */
export interface McpRelayLink {
  /** Sends `mcp.message` to the harness. */
  message(params: McpMessageParams): void;
  /** Sends `mcp.close` to the harness (the server exited). */
  closed(params: McpCloseParams): void;
  /** Reports `session.status` `detail: "mcp_unavailable"` when a server fails to start. */
  unavailable(sessionId: string, server: string): void;
}

interface Channel {
  readonly sessionId: string;
  readonly server: string;
  readonly child: ChildProcess;
  closing: boolean;
}

/** The MCP channels of one executor. */
export class McpRelay {
  readonly #servers: Record<string, McpServerConfig>;
  readonly #link: McpRelayLink;
  readonly #channels = new Map<string, Channel>();
  readonly #graceMs: number;

  constructor(servers: Record<string, McpServerConfig>, link: McpRelayLink, graceMs = 2_000) {
    this.#servers = servers;
    this.#link = link;
    this.#graceMs = graceMs;
  }

  /** The configured server names (advertised as `capabilities.mcp.servers`). */
  get serverNames(): string[] {
    return Object.keys(this.#servers);
  }

  /** `mcp.open`: starts one instance of the server for a new channel. */
  async open(params: McpOpenParams): Promise<McpOpenResult> {
    const config = this.#servers[params.server];
    if (!config) throw new NotFoundError("unknown MCP server", { reason: "unknown_mcp_server" });
    const child = spawn(config.command, config.args ?? [], {
      cwd: config.cwd,
      env: { ...process.env, ...config.env },
      stdio: ["pipe", "pipe", "ignore"],
      detached: process.platform !== "win32",
    });
    const failure = await new Promise<Error | undefined>((resolve) => {
      child.once("spawn", () => resolve(undefined));
      child.once("error", resolve);
    });
    if (failure) {
      this.#link.unavailable(params.session_id, params.server);
      throw new UnavailableError("MCP server did not start", { reason: "mcp_unavailable" });
    }
    const channelId = `mcp_${randomUUID()}`;
    const channel: Channel = {
      sessionId: params.session_id,
      server: params.server,
      child,
      closing: false,
    };
    this.#channels.set(channelId, channel);
    child.stdin!.on("error", () => {});
    let partial = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      partial += chunk;
      let newline: number;
      while ((newline = partial.indexOf("\n")) >= 0) {
        const line = partial.slice(0, newline).trim();
        partial = partial.slice(newline + 1);
        if (!line) continue;
        let message: unknown;
        try {
          message = JSON.parse(line);
        } catch {
          continue; // a server's stray log line is not a message
        }
        if (typeof message === "object" && message !== null && !Array.isArray(message)) {
          this.#link.message({
            channel_id: channelId,
            message: message as Record<string, unknown>,
          });
        }
      }
    });
    child.once("exit", () => {
      if (!this.#channels.delete(channelId) || channel.closing) return;
      this.#link.closed({
        channel_id: channelId,
        session_id: channel.sessionId,
        reason: "server_exited",
      });
    });
    return { channel_id: channelId };
  }

  /** `mcp.message` from the harness: one message to the server's stdin. */
  deliver(params: McpMessageParams): void {
    const channel = this.#channels.get(params.channel_id);
    if (!channel) return; // lossy notification to a closed channel
    channel.child.stdin!.write(`${JSON.stringify(params.message)}\n`);
  }

  /** `mcp.close` from the harness: ends the server. */
  async close(params: McpCloseParams): Promise<McpCloseResult> {
    const channel = this.#channels.get(params.channel_id);
    if (!channel) return { closed: false };
    channel.closing = true;
    this.#channels.delete(params.channel_id);
    channel.child.stdin!.end();
    await terminateGroup(channel.child, this.#graceMs);
    return { closed: true };
  }

  /** Ends every channel of a session (on session stop). */
  async closeSession(sessionId: string): Promise<void> {
    const ids = [...this.#channels].filter(([, c]) => c.sessionId === sessionId).map(([id]) => id);
    await Promise.all(ids.map((id) => this.close({ channel_id: id })));
  }
}
