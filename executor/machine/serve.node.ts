/**
 * Wires the machine tools into an {@linkcode ExecutorClient}: the `bash` and file tools confined
 * to the workdir, and the process capability (`process.*`) with one process table per session,
 * ended with the session (SIGTERM, then SIGKILL after the grace period).
 */
import type { Disposable } from "../../protocol/peer.ts";
import type { ExecutorClient } from "../client.ts";
import { ToolError } from "../tool-results.ts";
import { BashTimeoutError, runBash } from "./bash.node.ts";
import {
  DEFAULT_FILE_LIMITS,
  editTool,
  type FileLimits,
  FileToolError,
  globTool,
  grepTool,
  readTool,
  writeTool,
} from "./files.node.ts";
import { ProcessTable } from "./processes.node.ts";
import { Workdir } from "./workdir.node.ts";
import { McpRelay, type McpServerConfig } from "./mcp.node.ts";
import {
  backupWorkspace,
  DEFAULT_TRANSFER_LIMITS,
  downloadFile,
  installSkill,
  type TransferLimits,
  uploadFile,
} from "./transfer.node.ts";
import { GitCredentialStore } from "./git-credentials.node.ts";
import { join } from "node:path";

/** Options of {@linkcode serveMachine}. */
export interface ServeMachineOptions {
  /** The directory every tool and process is confined to. */
  workdir: string;
  /** Time between SIGTERM and SIGKILL for bash calls and processes. Default 2 s. */
  graceMs?: number;
  /** Environment added to every command. */
  env?: Record<string, string>;
  /** MCP servers for the MCP channel (the `mcpServers` map of an `mcp.json`). */
  mcpServers?: Record<string, McpServerConfig>;
  /** Where `skill.install` puts skills. Default `<workdir>/.bma/skills`. */
  skillsRoot?: string;
  /** Fetch for skill archives and backup uploads. Default: the global fetch. */
  fetch?: typeof fetch;
  /** Bounds of the file tools, file transfer, skills and backups (defaults in the README). */
  limits?: Partial<FileLimits & TransferLimits>;
}

/** A file tool failure the model can act on becomes a tool error (`is_error: true`). */
async function asToolError<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof FileToolError) throw new ToolError(error.message);
    throw error;
  }
}

/** Registers the machine tools and the process capability; dispose to withdraw them. */
export function serveMachine(client: ExecutorClient, options: ServeMachineOptions): Disposable {
  const workdir = new Workdir(options.workdir);
  const limits = { ...DEFAULT_FILE_LIMITS, ...DEFAULT_TRANSFER_LIMITS, ...options.limits };
  const graceMs = options.graceMs ?? 2_000;
  const tables = new Map<string, ProcessTable>();
  const tableOf = (sessionId: string): ProcessTable => {
    let table = tables.get(sessionId);
    if (!table) {
      table = new ProcessTable({
        sessionId,
        workdir,
        graceMs,
        onOutput: (params) => {
          try {
            client.notify("process.output", params);
          } catch { /* lossy while disconnected: process.read catches up */ }
        },
      });
      tables.set(sessionId, table);
      const created = table;
      client.session(sessionId)?.onCleanup(async () => {
        tables.delete(sessionId);
        await created.closeAll();
      });
    }
    return table;
  };
  const git = new GitCredentialStore();
  const envFor = (sessionId: string) => ({ ...options.env, ...git.env(sessionId) });
  const fetchFn = options.fetch ?? fetch;
  const onSessionEnd = (sessionId: string, release: () => unknown) => {
    client.session(sessionId)?.onCleanup(async () => {
      await release();
    });
  };
  const mcp = new McpRelay(options.mcpServers ?? {}, {
    message: (params) => {
      try {
        client.notify("mcp.message", params);
      } catch { /* lossy */ }
    },
    closed: (params) => void client.call("mcp.close", params).catch(() => {}),
    unavailable: (sessionId) => {
      try {
        client.sessionStatus(sessionId, "error", "mcp_unavailable");
      } catch { /* reported again on the next open */ }
    },
  }, graceMs);
  const registrations: Disposable[] = [
    client.tools.bash.handle(async (input, ctx) => {
      try {
        return await runBash(input, {
          workdir,
          signal: ctx.signal,
          graceMs,
          env: envFor(ctx.sessionId),
          onOutput: (stream, text) => ctx.progress({ output: { stream, text } }),
        });
      } catch (error) {
        if (error instanceof BashTimeoutError) {
          // As `timeout(1)` reports it: the call completed, the command did not.
          return {
            ...error.partial,
            stderr: `${error.partial.stderr}${error.message}\n`,
            exit_code: 124,
          };
        }
        if (error instanceof Error && error.name === "PathOutsideWorkdirError") {
          throw new ToolError(error.message);
        }
        throw error;
      }
    }),
    client.tools.read.handle((input) => asToolError(readTool(input, workdir, limits))),
    client.tools.write.handle((input) => asToolError(writeTool(input, workdir))),
    client.tools.edit.handle((input) => asToolError(editTool(input, workdir, limits))),
    client.tools.glob.handle((input, ctx) =>
      asToolError(globTool(input, workdir, limits, ctx.signal))
    ),
    client.tools.grep.handle((input, ctx) =>
      asToolError(grepTool(input, workdir, limits, ctx.signal))
    ),
    client.onRequest(
      "process.start",
      (params) =>
        tableOf(params.session_id).start({
          ...params,
          env: { ...envFor(params.session_id), ...params.env },
        }),
    ),
    client.onRequest("process.write", (params) => tableOf(params.session_id).write(params)),
    client.onRequest(
      "process.read",
      (params, ctx) => tableOf(params.session_id).read(params, ctx.signal),
    ),
    client.onRequest("process.signal", (params) => tableOf(params.session_id).signal(params)),
    client.onRequest(
      "process.wait",
      (params, ctx) => tableOf(params.session_id).wait(params, ctx.signal),
    ),
    client.onRequest("process.list", (params) => tableOf(params.session_id).list()),
    client.onRequest("file.upload", (params) => uploadFile(params, workdir)),
    client.onRequest("file.download", (params) => downloadFile(params, workdir, limits)),
    client.onRequest(
      "skill.install",
      (params) =>
        installSkill(params, options.skillsRoot ?? join(workdir.root, ".bma", "skills"), fetchFn, {
          workdir,
          limits,
        }),
    ),
    client.onRequest(
      "workspace.backup",
      (params) => backupWorkspace(params, workdir, fetchFn, limits),
    ),
    client.onRequest("git.credentials", (params) => {
      const result = git.store(params);
      onSessionEnd(params.session_id, () => git.drop(params.session_id));
      return result;
    }),
  ];
  if (mcp.serverNames.length > 0) {
    registrations.push(
      client.onRequest("mcp.open", async (params) => {
        const opened = await mcp.open(params);
        onSessionEnd(params.session_id, () => mcp.closeSession(params.session_id));
        return opened;
      }),
      client.onNotification("mcp.message", (params) => mcp.deliver(params)),
      client.onRequest("mcp.close", (params) => mcp.close(params)),
    );
  }
  return {
    dispose: () => {
      for (const registration of registrations) registration.dispose();
      for (const table of tables.values()) void table.closeAll();
      tables.clear();
    },
  };
}
