/**
 * Test helpers for the harness end: a `Peer` playing the executor over a real WebSocket (real
 * wire traffic through the harness's server), with the register params a test usually wants.
 */
import {
  type Capabilities,
  type ExecutorRegisterResult,
  Peer,
  type PeerOptions,
  type Transport,
} from "../../mod.ts";
import type { ExecutorRegisterParams, ToolCallParams } from "../../protocol/mod.ts";
import { dialWebSocket } from "../../transport/node.ts";

/** The subprotocols an executor offers, preferred first. */
export const OFFERED = ["bma.executor.v1.1", "bma.executor.v1"];

/** Capabilities of a bash-serving machine executor. */
export const BASH_CAPABILITIES: Capabilities = {
  tools: ["bash"],
  shell: { enabled: true },
  process: true,
};

/** Register params of an environment-scoped executor serving bash. */
export function registerParams(
  overrides: Partial<ExecutorRegisterParams> = {},
): ExecutorRegisterParams {
  return {
    protocol: "bma.executor.v1.1",
    environment_id: "env_1",
    executor: { name: "test-executor", os: "linux", arch: "amd64", version: "0.0.1" },
    capabilities: BASH_CAPABILITIES,
    ...overrides,
  };
}

/** A Peer playing the executor on a real WebSocket. */
export class ExecutorPeer {
  readonly peer: Peer;
  readonly transport: Transport;
  /** `tool.call` requests received, in order. */
  readonly toolCalls: ToolCallParams[] = [];
  #toolCallWaiters: ((params: ToolCallParams) => void)[] = [];

  constructor(transport: Transport, options: PeerOptions = {}) {
    this.transport = transport;
    this.peer = new Peer(transport, options);
  }

  /** Dials `url` offering `protocols` (default both) with optional handshake headers. */
  static async dial(
    url: string,
    options: { protocols?: string[]; headers?: Record<string, string>; peer?: PeerOptions } = {},
  ): Promise<ExecutorPeer> {
    const transport = await dialWebSocket(url, {
      protocols: options.protocols ?? OFFERED,
      headers: options.headers,
    });
    return new ExecutorPeer(transport, options.peer);
  }

  /**
   * Serves `session.assign` (accept), `session.stop` (stopping, then `session.ended`) and
   * `tool.call` (ack; the test answers with `tool.result`), then registers.
   */
  async start(params: ExecutorRegisterParams = registerParams()): Promise<ExecutorRegisterResult> {
    this.serveDefaults();
    this.peer.capabilities = params.capabilities;
    return await this.peer.call("executor.register", params);
  }

  /** The default handlers of {@linkcode start}. */
  serveDefaults(): void {
    this.peer.onRequest("session.assign", ({ session_id }) => ({ session_id, accepted: true }));
    this.peer.onRequest("session.stop", ({ session_id, reason }) => {
      queueMicrotask(() => {
        this.peer.call("session.ended", { session_id, reason: reason ?? "stopped" }).catch(
          () => {},
        );
      });
      return { stopping: true };
    });
    this.peer.onRequest("tool.call", (params) => {
      this.toolCalls.push(params);
      const waiter = this.#toolCallWaiters.shift();
      if (waiter) waiter(params);
      return { ok: true };
    });
  }

  /** The next `tool.call` (already received or still to come). */
  nextToolCall(): Promise<ToolCallParams> {
    const seen = this.#seen;
    if (seen < this.toolCalls.length) {
      this.#seen++;
      return Promise.resolve(this.toolCalls[seen]);
    }
    return new Promise((resolve) =>
      this.#toolCallWaiters.push((params) => {
        this.#seen++;
        resolve(params);
      })
    );
  }
  #seen = 0;

  /** Reports a completed bash result for a call. */
  completeBash(call: ToolCallParams, stdout: string): Promise<unknown> {
    return this.peer.call("tool.result", {
      session_id: call.session_id,
      tool_call_id: call.tool_call_id,
      outcome: "completed",
      content: [{ type: "text", text: stdout }],
      structured_content: { stdout, stderr: "", exit_code: 0 },
    });
  }

  /** Closes the socket. */
  close(code = 1000, reason = ""): Promise<unknown> {
    return this.peer.close(code, reason);
  }
}

/** Resolves after pending I/O callbacks have run (a few macrotask turns). */
export async function turns(count = 5): Promise<void> {
  for (let i = 0; i < count; i++) await new Promise((r) => setTimeout(r, 0));
}

/** Resolves when `predicate` holds, polling between macrotask turns; fails after `limit` turns. */
export async function until(predicate: () => boolean, limit = 2000): Promise<void> {
  for (let i = 0; i < limit; i++) {
    if (predicate()) return;
    await new Promise((r) => setTimeout(r, i < 50 ? 0 : 5));
  }
  throw new Error("condition not reached");
}
