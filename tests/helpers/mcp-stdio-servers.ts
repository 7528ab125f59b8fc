/**
 * The executor's half of the MCP channel, for tests: `mcp.open` spawns a real MCP server as a
 * child process speaking MCP over stdio, `mcp.message` relays raw MCP JSON-RPC both ways (one
 * JSON message per line), `mcp.close` stops it, and a server that exits is reported with
 * `mcp.close` to the harness.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type {
  McpCloseParams,
  McpCloseResult,
  McpMessageParams,
  McpOpenParams,
  McpOpenResult,
} from "../../protocol/mod.ts";

/** The MCP server script of these tests (plain JavaScript). */
export const ECHO_SERVER: string = fileURLToPath(new URL("./mcp-echo-server.mjs", import.meta.url));

/** The command that runs a JavaScript module with the current runtime. */
export function runScript(file: string): { command: string; args: string[] } {
  const g = globalThis as { Deno?: unknown };
  if (g.Deno) return { command: process.execPath, args: ["run", "-A", "--quiet", file] };
  return { command: process.execPath, args: [file] };
}

interface Channel {
  readonly child: ChildProcess;
  readonly sessionId: string;
  closedByHarness: boolean;
  readonly exited: Promise<void>;
}

/** MCP servers run per channel, like an executor runs them for a session. */
export class StdioMcpServers {
  readonly #channels = new Map<string, Channel>();
  readonly #servers: Record<string, string>;
  readonly #send: (params: McpMessageParams) => void;
  readonly #reportClosed: (params: McpCloseParams) => Promise<unknown>;
  #next = 0;

  /**
   * `servers` maps server names to scripts; `send` delivers `mcp.message` to the harness;
   * `reportClosed` sends `mcp.close` when a server exits on its own.
   */
  constructor(
    servers: Record<string, string>,
    send: (params: McpMessageParams) => void,
    reportClosed: (params: McpCloseParams) => Promise<unknown>,
  ) {
    this.#servers = servers;
    this.#send = send;
    this.#reportClosed = reportClosed;
  }

  /** Serves `mcp.open`: starts one instance of the server for a new channel. */
  open(params: McpOpenParams): McpOpenResult {
    const script = this.#servers[params.server];
    if (!script) throw new Error(`unknown server ${params.server}`);
    const channelId = `mcp_${++this.#next}`;
    const { command, args } = runScript(script);
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"] });
    // A server that exits while messages are in flight fails their writes (EPIPE): the exit is
    // reported as mcp.close, so the write error itself is nothing to act on.
    child.stdin!.on("error", () => {});
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const channel: Channel = {
      child,
      sessionId: params.session_id,
      closedByHarness: false,
      exited,
    };
    this.#channels.set(channelId, channel);
    let buffered = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      buffered += chunk;
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (line) this.#send({ channel_id: channelId, message: JSON.parse(line) });
      }
    });
    exited.then(() => {
      this.#channels.delete(channelId);
      if (!channel.closedByHarness) {
        this.#reportClosed({
          channel_id: channelId,
          session_id: channel.sessionId,
          reason: "server exited",
        }).catch(() => {});
      }
    });
    return { channel_id: channelId };
  }

  /** Serves `mcp.message` from the harness: one line on the server's stdin. */
  message(params: McpMessageParams): void {
    const stdin = this.#channels.get(params.channel_id)?.child.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) return; // lossy, like the executor's
    stdin.write(JSON.stringify(params.message) + "\n");
  }

  /** Serves `mcp.close` from the harness: closes stdin, then terminates the server. */
  close(params: McpCloseParams): McpCloseResult {
    const channel = this.#channels.get(params.channel_id);
    if (!channel) return { closed: false };
    channel.closedByHarness = true;
    channel.child.stdin!.end();
    channel.child.kill("SIGTERM");
    return { closed: true };
  }

  /** The child process of a channel (to kill it from a test). */
  child(channelId: string): ChildProcess | undefined {
    return this.#channels.get(channelId)?.child;
  }

  /** How many servers are running. */
  get running(): number {
    return this.#channels.size;
  }

  /** Stops every server and waits for it to exit. */
  async stopAll(): Promise<void> {
    const channels = [...this.#channels.values()];
    for (const channel of channels) {
      channel.closedByHarness = true;
      channel.child.kill("SIGKILL");
    }
    await Promise.all(channels.map((c) => c.exited));
  }
}
