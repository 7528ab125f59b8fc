/**
 * A session's MCP channels, harness side: `mcp.open` to one of the session's MCP servers, then
 * a {@linkcode McpChannelState} whose messages travel in `mcp.message` on the executor's current
 * connection (none once it changed: the channel ends with it) and whose close sends `mcp.close`.
 *
 * Part of the harness's sessions (sessions.ts): `Session.mcp`.
 */
import { throwIfAborted } from "../protocol/abort.ts";
import type { Logger } from "../protocol/logger.ts";
import type { CallOptions } from "../protocol/peer.ts";
import { type McpChannel, McpChannelState } from "./mcp-channel.ts";
import { request, unavailable, withTimeout } from "./send.ts";
import { hasEnded, sessionEnded, type SessionEntry, takesNoNewWork } from "./state.ts";

/** Opens a channel to the session's MCP server `server` (capability `mcp`). */
export async function openMcpChannel(
  session: SessionEntry,
  server: string,
  options: CallOptions,
  timeoutMs: number | undefined,
  logger: Logger,
): Promise<McpChannel> {
  throwIfAborted(options.signal, "mcp.open");
  // Nothing new opens in a session that is stopping: its executor would refuse it.
  if (takesNoNewWork(session)) throw sessionEnded(session);
  const executor = session.executor;
  const asked = executor.connection;
  // Given up before the answer (aborted, or timed out): the server the executor starts anyway
  // is closed once it says so, rather than running until the session ends.
  const { channel_id } = await request(
    executor,
    "mcp.open",
    { session_id: session.id, server },
    {
      ...options,
      onLateResult: (result) => {
        const { channel_id } = result as { channel_id: string };
        asked?.peer.call("mcp.close", { channel_id, session_id: session.id, reason: "aborted" })
          .catch((error) => logger.debug("mcp.close failed", { channel_id, error: String(error) }));
      },
    },
    timeoutMs,
  );
  const connection = executor.connection;
  const channel = new McpChannelState(channel_id, server, session.id, {
    send: (message) => {
      if (!connection || executor.connection !== connection) throw unavailable(executor);
      connection.peer.notify("mcp.message", { channel_id, message });
    },
    close: async (reason) => {
      if (executor.channels?.get(channel_id) === channel) executor.channels.delete(channel_id);
      session.channels?.delete(channel_id);
      if (!connection || executor.connection !== connection) return;
      try {
        await connection.peer.call("mcp.close", {
          channel_id,
          session_id: session.id,
          reason,
        }, withTimeout({}, timeoutMs));
      } catch (error) {
        logger.debug("mcp.close failed", { channel_id, error: String(error) });
      }
    },
  });
  if (hasEnded(session) || !connection) {
    channel.end(hasEnded(session) ? "session_ended" : "disconnected");
    return channel.view;
  }
  (executor.channels ??= new Map()).set(channel_id, channel);
  (session.channels ??= new Map()).set(channel_id, channel);
  channel.closed.then(() => {
    if (executor.channels?.get(channel_id) === channel) executor.channels.delete(channel_id);
    session.channels?.delete(channel_id);
  });
  return channel.view;
}
