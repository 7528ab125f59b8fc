/**
 * The harness side of the conformance suite: any number of `Harness`es (one per scenario)
 * built from a runtime entry point, operated through methods that take and return JSON. The
 * suite uses it in-process (the Node harness) or in a child process on Deno or Bun
 * (`harness-child.ts`), through `rpc.ts` either way, so every cell is driven alike.
 *
 * Executors are found by the name they register with (`executor.name`).
 */
import type * as Sdk from "../../node.ts";
import type * as Agent from "../../agent/mod.ts";

/** One executor as the harness sees it. */
export interface ExecutorView {
  id: string;
  name: string;
  protocol: string;
  connected: boolean;
  draining: boolean;
  gone: boolean;
  tools: string[];
  sessions: string[];
}

/** How a harness of a scenario is reached. */
export interface HarnessSpec {
  /** `ws`: TCP on 127.0.0.1; `unix`: a socket at `path`; `none`: it dials (`dial`). */
  serve: "ws" | "unix" | "none";
  path?: string;
  /** Short for lease scenarios (the lease is two intervals). Default 1 000 ms. */
  heartbeatIntervalMs?: number;
  /** Keep the harness's state in this SQLite file (`openSqliteStore`): a restart goes on. */
  store?: string;
  /** Serve the agent capability (an `AgentPlatform`). */
  agent?: boolean;
}

/** A tool call as a scenario asks for it. */
export interface CallSpec {
  tool: string;
  input: Record<string, unknown>;
  tool_call_id?: string;
}

interface Instance {
  harness: Sdk.Harness;
  platform: Agent.AgentPlatform | undefined;
  store: Sdk.HarnessStore | undefined;
  servers: Sdk.HarnessServer[];
  links: Sdk.DialedExecutorLink[];
  /** Every executor event, in order: `registered`, `reconnected`, `disconnected`, `gone`. */
  events: { type: string; id: string; name: string }[];
  /** The latest handle per executor name (kept after it is gone). */
  byName: Map<string, Sdk.ExecutorHandle>;
  sessions: Map<string, Sdk.Session>;
}

function wait(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The harness agent. */
export class HarnessAgent {
  readonly #sdk: typeof Sdk;
  readonly #agent: typeof Agent;
  readonly #instances = new Map<string, Instance>();
  #next = 1;

  constructor(sdk: typeof Sdk, agent: typeof Agent) {
    this.#sdk = sdk;
    this.#agent = agent;
  }

  #get(h: string): Instance {
    const instance = this.#instances.get(h);
    if (!instance) throw new Error(`no harness ${h}`);
    return instance;
  }

  #executor(h: string, name: string): Sdk.ExecutorHandle {
    const executor = this.#get(h).byName.get(name);
    if (!executor) throw new Error(`no executor named ${name}`);
    return executor;
  }

  #session(h: string, id: string): Sdk.Session {
    const session = this.#get(h).sessions.get(id);
    if (!session) throw new Error(`no session ${id}`);
    return session;
  }

  #view(executor: Sdk.ExecutorHandle): ExecutorView {
    const tools = (executor.capabilities as { tools?: string[] }).tools ?? [];
    return {
      id: executor.id,
      name: executor.info.name,
      protocol: executor.protocol,
      connected: executor.connected,
      draining: executor.draining,
      gone: executor.gone,
      tools: [...tools],
      sessions: [...executor.sessions.keys()],
    };
  }

  /** A new harness; `url` is where executors dial (absent for `serve: "none"`). */
  async create(spec: HarnessSpec): Promise<{ id: string; url?: string }> {
    const store = spec.store ? await this.#sdk.openSqliteStore(spec.store) : undefined;
    const platform = spec.agent ? new this.#agent.AgentPlatform() : undefined;
    const harness = new this.#sdk.Harness({
      insecureNoAuth: true,
      heartbeatIntervalMs: spec.heartbeatIntervalMs ?? 1_000,
      requestTimeoutMs: 10_000,
      ...(store ? { store } : {}),
      ...(platform ? { agent: platform } : {}),
    });
    const id = `h${this.#next++}`;
    const instance: Instance = {
      harness,
      platform,
      store,
      servers: [],
      links: [],
      events: [],
      byName: new Map(),
      sessions: new Map(),
    };
    harness.onExecutor((event) => {
      const name = event.executor.info.name;
      instance.events.push({ type: event.type, id: event.executor.id, name });
      if (event.type === "registered" || event.type === "reconnected") {
        instance.byName.set(name, event.executor);
      }
    });
    this.#instances.set(id, instance);
    if (spec.serve === "none") return { id };
    const server = spec.serve === "unix"
      ? await harness.serveUnix(spec.path!)
      : await harness.serve({ hostname: "127.0.0.1", port: 0 });
    instance.servers.push(server);
    return { id, url: server.url };
  }

  /** Dials a listening executor (`Harness.dial`). */
  async dial(h: string, url: string): Promise<void> {
    this.#get(h).links.push(await this.#get(h).harness.dial(url));
  }

  /**
   * Waits for the `nth` event of `type` (or of any of `a|b`) of the executor named `name`;
   * returns its view now.
   */
  async waitEvent(h: string, type: string, name: string, nth = 1): Promise<ExecutorView> {
    const instance = this.#get(h);
    const types = type.split("|");
    for (;;) {
      const seen = instance.events.filter((e) => types.includes(e.type) && e.name === name);
      if (seen.length >= nth) return this.#view(instance.byName.get(name)!);
      await wait(5);
    }
  }

  /** The executor events seen so far, as `type` strings, for the executor named `name`. */
  eventTypes(h: string, name: string): Promise<string[]> {
    return Promise.resolve(
      this.#get(h).events.filter((e) => e.name === name).map((e) => e.type),
    );
  }

  /** The executor named `name` as the harness sees it now. */
  executor(h: string, name: string): Promise<ExecutorView> {
    return Promise.resolve(this.#view(this.#executor(h, name)));
  }

  /** Assigns a session and waits for `session.ready`; returns its state. */
  async assign(
    h: string,
    name: string,
    session: string,
    metadata?: Record<string, unknown>,
  ): Promise<string> {
    const assigned = await this.#executor(h, name).assignSession({
      session_id: session,
      ...(metadata ? { metadata: metadata as Sdk.SessionMetadata } : {}),
    });
    this.#get(h).sessions.set(session, assigned);
    await assigned.ready();
    return assigned.state;
  }

  /** Calls a tool; resolves with the result and the progress notices received. */
  async call(
    h: string,
    session: string,
    call: CallSpec,
  ): Promise<{ result: Sdk.ToolCallResult; progress: Sdk.ToolProgressParams[] }> {
    const progress: Sdk.ToolProgressParams[] = [];
    const result = await this.#session(h, session).callTool(call, {
      onProgress: (p) => progress.push(p),
    });
    return { result, progress };
  }

  /** Cancels a call (`tool.cancel`). */
  cancel(h: string, session: string, toolCallId: string): Promise<Sdk.ToolCancelResult> {
    return this.#session(h, session).cancelTool(toolCallId, "conformance");
  }

  /** Waits until the session holds `count` durable events; returns their payloads in order. */
  async events(h: string, session: string, count: number): Promise<unknown[]> {
    const s = this.#session(h, session);
    while (s.eventRecords.length < count && s.state !== "ended") await wait(5);
    return s.eventRecords.map((r) => r.event);
  }

  /** The session's state (`ready`, `ended`, ...). */
  sessionState(h: string, session: string): Promise<string> {
    return Promise.resolve(this.#session(h, session).state);
  }

  /** Stops a session; resolves with its end after `session.ended`. */
  async stop(h: string, session: string, reason: string): Promise<Sdk.SessionEnd> {
    return await this.#session(h, session).stop(reason);
  }

  /** Waits for the session to end; resolves with its end. */
  ended(h: string, session: string): Promise<Sdk.SessionEnd> {
    return this.#session(h, session).ended;
  }

  /** Asks the executor to drain. */
  drain(h: string, name: string): Promise<Sdk.ExecutorDrainResult> {
    return this.#executor(h, name).drain({ reason: "conformance" });
  }

  /** Closes the executor for good (`executor.close`, then 1000). */
  closeExecutor(h: string, name: string, reason: string): Promise<void> {
    return this.#executor(h, name).close(reason);
  }

  /** Waits until the executor is gone; resolves with why. */
  gone(h: string, name: string): Promise<Sdk.ExecutorEnd> {
    return this.#executor(h, name).closed;
  }

  /**
   * Takes up a session the harness read back from its store (a previous run held it); returns
   * its state.
   */
  recovered(h: string, session: string): Promise<string | undefined> {
    const found = this.#get(h).harness.session(session);
    if (found) this.#get(h).sessions.set(session, found);
    return Promise.resolve(found?.state);
  }

  // ---- MCP channel ------------------------------------------------------------------------------

  /**
   * Opens an MCP channel to the session's server `server`, sends each request and collects the
   * answer to each (by id), then closes the channel; returns the answers.
   */
  async mcp(
    h: string,
    session: string,
    server: string,
    requests: { id: number; method: string; params?: unknown }[],
  ): Promise<{ answers: unknown[]; closed: string }> {
    const channel = await this.#session(h, session).mcp(server);
    const answers = new Map<number, unknown>();
    let wake: (() => void) | undefined;
    channel.onmessage = (message) => {
      const id = (message as { id?: number }).id;
      if (typeof id === "number") answers.set(id, message);
      wake?.();
    };
    await channel.start();
    for (const request of requests) {
      await channel.send({ jsonrpc: "2.0", ...request } as Sdk.McpMessage);
    }
    while (answers.size < requests.length) await new Promise<void>((resolve) => (wake = resolve));
    await channel.close();
    return { answers: requests.map((r) => answers.get(r.id)), closed: await channel.closed };
  }

  // ---- the agent capability ------------------------------------------------------------------

  /** Starts a turn on the executor named `name`. */
  async startTurn(h: string, name: string, session: string, turn: string, text: string) {
    return await this.#executor(h, name).startTurn({
      session_id: session,
      turn_id: turn,
      input: [{ type: "text", text }],
    });
  }

  /** Waits for an open interaction and answers it; returns it as it was asked. */
  async answerInteraction(
    h: string,
    outcome: "approved" | "denied",
  ): Promise<{ kind: string; interaction_id: string; tool_use_id?: string; status: string }> {
    const platform = this.#get(h).platform!;
    const open = await platform.waitInteraction();
    platform.respond(open.id, { outcome });
    return {
      kind: open.kind,
      interaction_id: open.interaction_id,
      ...(open.tool_use_id !== undefined ? { tool_use_id: open.tool_use_id } : {}),
      status: open.status,
    };
  }

  /** Waits until the turn has ended; returns its state and the session's event types. */
  async turnEnded(
    h: string,
    session: string,
    turn: string,
  ): Promise<{ state: string; events: string[] }> {
    const platform = this.#get(h).platform!;
    for (;;) {
      const info = platform.turnById(session, turn);
      if (info && !info.active) {
        const executor = [...this.#get(h).byName.values()].find((e) => e.sessions.has(session));
        const records = executor?.sessions.get(session)?.eventRecords ?? [];
        return { state: info.state, events: records.map((r) => r.event.type) };
      }
      await wait(5);
    }
  }

  /** Closes a harness. */
  async close(h: string): Promise<void> {
    const instance = this.#instances.get(h);
    if (!instance) return;
    this.#instances.delete(h);
    await instance.harness.close();
    await instance.store?.close?.();
  }

  /** Closes every harness (the suite's clean-up). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#instances.keys()].map((h) => this.close(h)));
  }
}
