/**
 * The executor side of the conformance suite, run as a child process on Node, Deno or Bun with
 * that runtime's entry point (`node.ts`, `deno.ts`, `bun.ts`): it holds any number of
 * `ExecutorClient`s, one per scenario, driven by the suite through `rpc.ts`.
 *
 * The bash handler interprets its command, so a scenario decides what the tool does:
 * `echo <text>`, `sleep <ms>` (until canceled), `progress <n>`, `fail <text>` (ToolError),
 * `crash` (an exception), `count <key> [<ms>]` (counts runs, for run-once checks).
 */
import type * as Sdk from "../../node.ts";
import type { McpMessageParams } from "../../protocol/mod.ts";
import { serveAgent } from "../../agent/mod.ts";
import type { Runtime } from "./rpc.ts";

const RUNTIME: Runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Sdk = await import(`../../${RUNTIME}.ts`);

/** How a scenario configures one executor. */
export interface ClientSpec {
  /** The executor's name (how the harness side finds it). */
  name: string;
  /** Where to dial (dial mode). */
  url?: string;
  /** Default `env_conformance`; `""` with `machineId` makes it machine-scoped. */
  environmentId?: string;
  machineId?: string;
  /** Serve `process.start` (advertises the process capability a machine-scoped executor needs). */
  process?: boolean;
  /** Serve an MCP server named `echo` for every session (`mcp.open` / `mcp.message`). */
  mcp?: boolean;
  /**
   * Serve the agent capability: each turn asks to run its input as a command (a permission
   * interaction) and reports the tool's result if approved.
   */
  agent?: boolean;
  maxSessions?: number;
}

/** How a client ended, as data. */
export interface ClosedView {
  reason: string;
  code?: number;
  error?: string;
}

/** What a client is doing now, as data. */
export interface ClientView {
  state: string;
  connected: boolean;
  executorId?: string;
  draining: boolean;
  sessions: string[];
}

interface Entry {
  client: Sdk.ExecutorClient;
  drains: { source: string; reason?: string }[];
  stops: string[];
  registered?: Promise<unknown>;
  closed?: ClosedView;
}

const INFO = { os: "linux", arch: "amd64", version: "0.0.0-conformance" };
const FAST = { initialDelayMs: 20, maxDelayMs: 250 };

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The executor agent: its methods take and return JSON. */
export class ExecutorAgent {
  readonly runtime: Runtime = RUNTIME;
  readonly #clients = new Map<string, Entry>();
  readonly #counters = new Map<string, number>();

  #create(id: string, spec: ClientSpec): Entry {
    if (this.#clients.has(id)) throw new Error(`client ${id} exists`);
    const client = new sdk.ExecutorClient({
      ...(spec.url ? { harnessUrl: spec.url } : {}),
      environmentId: spec.environmentId ?? "env_conformance",
      ...(spec.machineId ? { machineId: spec.machineId } : {}),
      ...(spec.maxSessions ? { maxSessions: spec.maxSessions } : {}),
      executor: { name: spec.name, ...INFO },
      reconnect: FAST,
      retry: FAST,
      sessionGraceMs: 200,
    });
    const entry: Entry = { client, drains: [], stops: [] };
    client.tools.bash.handle((input, ctx) => this.#bash(input.command, ctx));
    client.tool("conformance_echo").handle((input) => JSON.stringify(input));
    if (spec.process) {
      client.onRequest("process.start", () => {
        throw new sdk.UnavailableError("no processes in the conformance executor", {
          reason: "unavailable",
        });
      });
    }
    if (spec.mcp) this.#serveMcp(client);
    if (spec.agent) this.#serveAgent(client);
    client.onDrain((info) => void entry.drains.push({ source: info.source, reason: info.reason }));
    client.onSessionStop((session) => void entry.stops.push(session.id));
    client.closed.then((info) => {
      entry.closed = {
        reason: info.reason,
        ...(info.code !== undefined ? { code: info.code } : {}),
        ...(info.error ? { error: info.error.name } : {}),
      };
    });
    this.#clients.set(id, entry);
    return entry;
  }

  /** An in-process MCP server `echo`: `tools/call` answers with its arguments as text. */
  #serveMcp(client: Sdk.ExecutorClient): void {
    let next = 1;
    client.onRequest("mcp.open", ({ server }) => {
      if (server !== "echo") {
        throw new sdk.NotFoundError("unknown server", { reason: "unknown_server" });
      }
      return { channel_id: `ch_${next++}` };
    });
    client.onNotification("mcp.message", ({ channel_id, message }) => {
      const m = message as { id?: number; method?: string; params?: { arguments?: unknown } };
      if (m.id === undefined) return;
      const result = m.method === "tools/call"
        ? { content: [{ type: "text", text: JSON.stringify(m.params?.arguments ?? {}) }] }
        : m.method === "initialize"
        ? { protocolVersion: "2025-06-18", capabilities: {}, serverInfo: { name: "echo" } }
        : { echo: m.method };
      client.notify("mcp.message", {
        channel_id,
        message: { jsonrpc: "2.0", id: m.id, result } as McpMessageParams["message"],
      });
    });
    client.onRequest("mcp.close", () => ({ closed: true }));
  }

  /** An agent that asks before it runs the turn's input as a command. */
  #serveAgent(client: Sdk.ExecutorClient): void {
    serveAgent(client, {
      runTurn: async (turn) => {
        const input = turn.input.map((b) => (b as { text?: string }).text ?? "").join("");
        const toolUseId = turn.eventId();
        await turn.emit({
          type: "agent.tool_use",
          name: "bash",
          input: { command: input },
          evaluated_permission: "ask",
        }, { eventId: toolUseId });
        const answer = await turn.requestInteraction({
          kind: "permission",
          tool_use_id: toolUseId,
          title: `Run ${input}?`,
        });
        if (answer.outcome !== "approved") {
          await turn.emit({ type: "agent.message", content: [{ type: "text", text: "denied" }] });
          return;
        }
        await turn.emit({
          type: "agent.tool_result",
          tool_use_id: toolUseId,
          content: [{ type: "text", text: `ran ${input}` }],
        });
        await turn.emit({ type: "agent.message", content: [{ type: "text", text: "done" }] });
      },
    });
  }

  async #bash(command: string, ctx: Sdk.ToolContext): Promise<Sdk.ToolOutput<Sdk.BashResult>> {
    const [verb, ...rest] = command.split(" ");
    const arg = rest.join(" ");
    const out = (stdout: string) => ({ stdout, stderr: "", exit_code: 0 });
    switch (verb) {
      case "echo":
        return out(arg);
      case "sleep":
        await sleep(Number(arg), ctx.signal);
        return out("slept");
      case "progress": {
        const total = Number(arg);
        for (let i = 1; i <= total; i++) {
          ctx.progress({ message: `step ${i}`, progress: i, total });
          await sleep(5);
        }
        return out("done");
      }
      case "fail":
        throw new sdk.ToolError(arg);
      case "crash":
        throw new Error("the handler crashed");
      case "count": {
        const [key, ms] = rest;
        const n = (this.#counters.get(key) ?? 0) + 1;
        this.#counters.set(key, n);
        if (ms) await sleep(Number(ms), ctx.signal);
        return out(String(n));
      }
      default:
        throw new sdk.ToolError(`unknown command ${verb}`);
    }
  }

  #entry(id: string): Entry {
    const entry = this.#clients.get(id);
    if (!entry) throw new Error(`no client ${id}`);
    return entry;
  }

  /** Dials and registers; resolves with the registration. */
  async start(id: string, spec: ClientSpec): Promise<{ executor_id: string; protocol: string }> {
    const registration = await this.#create(id, spec).client.start();
    return { executor_id: registration.executor_id, protocol: registration.protocol };
  }

  /** Listens on a socket for the harness to dial in; resolves once listening. */
  async listen(id: string, spec: ClientSpec & { path: string }): Promise<{ url: string }> {
    const entry = this.#create(id, spec);
    const listener = await entry.client.listen(`unix://${spec.path}`);
    entry.registered = listener.registered;
    listener.registered.catch(() => {});
    return { url: listener.url };
  }

  /** Resolves with the first registration of a listening client. */
  async registered(id: string): Promise<{ executor_id: string; protocol: string }> {
    const r = await this.#entry(id).registered as Sdk.ExecutorRegisterResult;
    return { executor_id: r.executor_id, protocol: r.protocol };
  }

  status(id: string): Promise<ClientView> {
    const c = this.#entry(id).client;
    return Promise.resolve({
      state: c.state,
      connected: c.connected,
      ...(c.executorId ? { executorId: c.executorId } : {}),
      draining: c.draining,
      sessions: c.sessions.map((s) => s.id),
    });
  }

  /** Waits until the client is connected again with at least `registrations` registrations seen. */
  waitConnected(id: string): Promise<ClientView> {
    const c = this.#entry(id).client;
    if (c.connected) return this.status(id);
    return new Promise((resolve) => {
      const sub = c.onStateChange((state) => {
        if (state === "connected") {
          sub.dispose();
          resolve(this.status(id));
        }
      });
    });
  }

  /** Stops the client; resolves with how it ended. */
  async stop(id: string): Promise<ClosedView> {
    const entry = this.#entry(id);
    await entry.client.stop();
    await entry.client.closed;
    return entry.closed!;
  }

  /** Waits until the client has stopped for good. */
  async closed(id: string): Promise<ClosedView> {
    const entry = this.#entry(id);
    await entry.client.closed;
    return entry.closed!;
  }

  /** Sends `count` durable events (all queued at once); resolves once all are acknowledged. */
  async sendEvents(id: string, session: string, count: number, from = 1): Promise<number> {
    const client = this.#entry(id).client;
    const acks = [];
    for (let n = from; n < from + count; n++) {
      acks.push(
        client.call("session.event", {
          session_id: session,
          event: { type: "conformance", n } as Sdk.SessionEventPayload,
        }),
      );
    }
    await Promise.all(acks);
    return acks.length;
  }

  counter(key: string): Promise<number> {
    return Promise.resolve(this.#counters.get(key) ?? 0);
  }

  /** Waits for the client's `count`-th drain notice; returns the notices. */
  async drains(id: string, count = 1): Promise<Entry["drains"]> {
    const entry = this.#entry(id);
    while (entry.drains.length < count) await sleep(5);
    return entry.drains;
  }

  /** The sessions `onSessionStop` saw. */
  stops(id: string): Promise<string[]> {
    return Promise.resolve(this.#entry(id).stops);
  }

  /**
   * A raw executor: dials offering `offer`, and (if a subprotocol was negotiated) sends
   * `executor.register` claiming `claim`. Reports what happened, including the close.
   */
  async rawRegister(
    url: string,
    offer: string[],
    claim?: string,
  ): Promise<{
    negotiated?: string;
    status?: number;
    result?: unknown;
    error?: { code?: number; reason?: string };
    close?: { code: number; reason: string };
  }> {
    let transport: Sdk.Transport;
    try {
      transport = await sdk.dialWebSocket(url, { protocols: offer });
    } catch (error) {
      return { status: (error as Sdk.DialError).status };
    }
    const peer = new sdk.Peer(transport, { validateOutgoing: false });
    const report: Awaited<ReturnType<ExecutorAgent["rawRegister"]>> = {
      negotiated: transport.protocol,
    };
    try {
      report.result = await peer.call("executor.register", {
        protocol: (claim ?? transport.protocol) as Sdk.ProtocolVersion,
        environment_id: "env_conformance",
        executor: { name: "raw", ...INFO },
        capabilities: {},
      }, { timeoutMs: 5_000 });
    } catch (error) {
      const e = error as { code?: number; data?: { reason?: string } };
      report.error = { code: e.code, reason: e.data?.reason };
    }
    // The harness closes after a refusal (waited for, to see its code); a registered raw
    // executor is closed by us.
    if (report.result) transport.close(1000, "raw executor done");
    const timer = setTimeout(() => transport.close(1000, "raw executor done"), 2_000);
    const info = await transport.closed;
    clearTimeout(timer);
    report.close = { code: info.code, reason: info.reason };
    return report;
  }

  /** Stops every client (the suite's clean-up). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.#clients.values()].map((e) => e.client.stop().catch(() => {})));
    this.#clients.clear();
  }
}
