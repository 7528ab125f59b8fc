/**
 * The Workers column of the conformance matrix (the hook `tests/conformance/matrix.ts` loads):
 * the executor agent on Node against the edge harness in real workerd, over WebSocket. Each
 * scenario's harness is its own Miniflare instance (the scenario's heartbeat interval is a
 * Worker var), and the scenarios drive it only through the brain HTTP API: this adapter maps the
 * harness agent's methods onto `/v1/harness/default/...` and the brain API's errors onto the
 * error names and fields the scenarios check.
 *
 * Executors dial with a bare `harnessUrl` (the executor agent has no credentials), so these
 * Workers run with `BMA_INSECURE_NO_AUTH`: every connection lands in the `default` object, like
 * the Node cells' `insecureNoAuth` harness. Authentication is covered by tests/workers/.
 */
import type * as Sdk from "../../harness/mod.ts";
import { type BrainAnswer, Edge } from "./edge-fixture.ts";

// The shapes below are those of tests/conformance/ (harness-agent.ts, matrix.ts, rpc.ts),
// restated so this module stands alone: the suite loads it by path when it exists, and the
// scenarios themselves check that the shapes match.

/** How a scenario's harness is reached (`HarnessSpec` of the conformance suite). */
export interface HarnessSpec {
  serve: "ws" | "unix" | "none";
  path?: string;
  heartbeatIntervalMs?: number;
}

/** A tool call as a scenario asks for it. */
export interface CallSpec {
  tool: string;
  input: Record<string, unknown>;
  tool_call_id?: string;
}

/** One executor as the scenarios see it. */
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

/** A column contributed to the conformance matrix (`ExternalCell`). */
export interface ExternalCell {
  readonly id: string;
  readonly executor: "node" | "deno" | "bun";
  readonly harness: string;
  readonly transport: "ws" | "unix";
  readonly skip?: Readonly<Record<string, string>>;
  open(): Promise<{ H: EdgeHarnessAgent; close(): Promise<void> }>;
}

/** An error as the scenarios check it: `name`, `code`, `reason`, `data` (as `ScenarioError`). */
export class ScenarioError extends Error {
  readonly code?: number;
  readonly reason?: string;
  readonly status?: number;
  readonly data?: unknown;
  constructor(
    wire: {
      name: string;
      message: string;
      code?: number;
      reason?: string;
      status?: number;
      data?: unknown;
    },
  ) {
    super(wire.message);
    this.name = wire.name;
    this.code = wire.code;
    this.reason = wire.reason;
    this.status = wire.status;
    this.data = wire.data;
  }
}

const ROUTE = "default";
/** Each long poll's wait; loops repeat it until the outcome (the scenario's timeout bounds it). */
const WAIT_MS = 10_000;

interface FeedEvent {
  index: number;
  type: string;
  executor_id: string;
  name: string;
  reason?: string;
}

/** The harness agent's methods over the edge harness's brain API. */
export class EdgeHarnessAgent {
  readonly #edges = new Map<string, Edge>();
  #next = 1;

  #edge(h: string): Edge {
    const edge = this.#edges.get(h);
    if (!edge) throw new Error(`no harness ${h}`);
    return edge;
  }

  #brain(h: string, method: "GET" | "POST", path: string, body?: unknown): Promise<BrainAnswer> {
    return this.#edge(h).brain(method, path, body, ROUTE);
  }

  /** The executor feed from the start; with `after`, waits for an entry past it. */
  async #feed(h: string, after?: number): Promise<FeedEvent[]> {
    const query = after === undefined ? "from=0&limit=1000" : `from=${after}&wait_ms=${WAIT_MS}`;
    const answer = await this.#brain(h, "GET", `/executor-events?${query}`);
    return answer.body.events;
  }

  /** The id of the latest registration named `name`. */
  async #idOf(h: string, name: string): Promise<string> {
    const events = await this.#feed(h);
    const latest = events.filter((e) =>
      e.name === name && (e.type === "registered" || e.type === "reconnected")
    ).pop();
    if (!latest) throw new Error(`no executor named ${name}`);
    return latest.executor_id;
  }

  async #view(h: string, id: string, name: string): Promise<ExecutorView> {
    const answer = await this.#brain(h, "GET", `/executors/${id}`);
    if (answer.status === 404) {
      return {
        id,
        name,
        protocol: "",
        connected: false,
        draining: false,
        gone: true,
        tools: [],
        sessions: [],
      };
    }
    const v = answer.body;
    return {
      id: v.executor_id,
      name: v.executor.name,
      protocol: v.protocol,
      connected: v.connected,
      draining: v.draining,
      gone: false,
      tools: v.capabilities.tools ?? [],
      sessions: v.sessions,
    };
  }

  async create(spec: HarnessSpec): Promise<{ id: string; url?: string }> {
    if (spec.serve !== "ws") throw new Error("the Workers harness serves WebSocket only");
    const edge = await Edge.start({
      auth: false,
      vars: {
        BMA_HEARTBEAT_INTERVAL_MS: String(spec.heartbeatIntervalMs ?? 1_000),
        BMA_REQUEST_TIMEOUT_MS: "10000",
      },
    });
    const id = `w${this.#next++}`;
    this.#edges.set(id, edge);
    return { id, url: edge.url.replace(/^http/, "ws") };
  }

  dial(_h: string, _url: string): Promise<void> {
    return Promise.reject(new Error("a Worker cannot dial a listening executor"));
  }

  async waitEvent(h: string, type: string, name: string, nth = 1): Promise<ExecutorView> {
    const types = type.split("|");
    let events = await this.#feed(h);
    for (;;) {
      const seen = events.filter((e) => types.includes(e.type) && e.name === name);
      if (seen.length >= nth) return await this.#view(h, await this.#idOf(h, name), name);
      const last = events.length ? events[events.length - 1].index : 0;
      await this.#feed(h, last);
      events = await this.#feed(h);
    }
  }

  async eventTypes(h: string, name: string): Promise<string[]> {
    return (await this.#feed(h)).filter((e) => e.name === name).map((e) => e.type);
  }

  async executor(h: string, name: string): Promise<ExecutorView> {
    return await this.#view(h, await this.#idOf(h, name), name);
  }

  async assign(
    h: string,
    name: string,
    session: string,
    metadata?: Record<string, unknown>,
  ): Promise<string> {
    const assigned = await this.#brain(h, "POST", "/sessions", {
      session_id: session,
      executor_id: await this.#idOf(h, name),
      ...(metadata ? { metadata } : {}),
    });
    if (assigned.status !== 201) throw brainError(assigned);
    for (;;) {
      const ready = await this.#brain(
        h,
        "GET",
        `/sessions/${session}?until=ready&wait_ms=${WAIT_MS}`,
      );
      if (ready.status === 200) return ready.body.state;
    }
  }

  async call(
    h: string,
    session: string,
    call: CallSpec,
  ): Promise<{ result: Sdk.ToolCallResult; progress: Sdk.ToolProgressParams[] }> {
    let answer = await this.#brain(
      h,
      "POST",
      `/sessions/${session}/tool-calls?wait_ms=${WAIT_MS}`,
      call,
    );
    if (answer.status !== 200 && answer.status !== 202) throw brainError(answer);
    while (answer.status === 202) {
      const id = answer.body.tool_call_id;
      answer = await this.#brain(h, "GET", `/tool-calls/${id}?wait_ms=${WAIT_MS}`);
    }
    if (answer.body.error) throw callError(answer.body.error);
    return { result: answer.body.result, progress: answer.body.progress };
  }

  async cancel(h: string, _session: string, toolCallId: string): Promise<Sdk.ToolCancelResult> {
    const answer = await this.#brain(h, "POST", `/tool-calls/${toolCallId}/cancel`, {
      reason: "conformance",
    });
    if (answer.status !== 200) throw brainError(answer);
    return answer.body;
  }

  async events(h: string, session: string, count: number): Promise<unknown[]> {
    const events: unknown[] = [];
    for (;;) {
      const wait = events.length < count ? `&wait_ms=${WAIT_MS}` : "";
      const page = await this.#brain(
        h,
        "GET",
        `/sessions/${session}/events?from=${events.length}&limit=1000${wait}`,
      );
      events.push(...page.body.events.map((record: { event: unknown }) => record.event));
      if (events.length >= count || page.body.ended || page.body.events.length === 0 && !wait) {
        return events;
      }
    }
  }

  async sessionState(h: string, session: string): Promise<string> {
    return (await this.#brain(h, "GET", `/sessions/${session}`)).body.state;
  }

  async stop(h: string, session: string, reason: string): Promise<Sdk.SessionEnd> {
    const answer = await this.#brain(h, "POST", `/sessions/${session}/stop?wait_ms=${WAIT_MS}`, {
      reason,
    });
    if (answer.status !== 200 && answer.status !== 202) throw brainError(answer);
    return await this.ended(h, session);
  }

  async ended(h: string, session: string): Promise<Sdk.SessionEnd> {
    for (;;) {
      const answer = await this.#brain(
        h,
        "GET",
        `/sessions/${session}?until=ended&wait_ms=${WAIT_MS}`,
      );
      if (answer.status === 200) return { reason: answer.body.end_reason };
    }
  }

  async drain(h: string, name: string): Promise<Sdk.ExecutorDrainResult> {
    const id = await this.#idOf(h, name);
    const answer = await this.#brain(h, "POST", `/executors/${id}/drain`, {
      reason: "conformance",
    });
    if (answer.status !== 200) throw brainError(answer);
    return answer.body;
  }

  async closeExecutor(h: string, name: string, reason: string): Promise<void> {
    const id = await this.#idOf(h, name);
    const answer = await this.#brain(h, "POST", `/executors/${id}/close`, { reason });
    if (answer.status !== 200) throw brainError(answer);
  }

  async gone(h: string, name: string): Promise<Sdk.ExecutorEnd> {
    const id = await this.#idOf(h, name);
    let events = await this.#feed(h);
    for (;;) {
      const gone = events.find((e) => e.type === "gone" && e.executor_id === id);
      if (gone) return { reason: gone.reason as Sdk.ExecutorGoneReason };
      await this.#feed(h, events.length ? events[events.length - 1].index : 0);
      events = await this.#feed(h);
    }
  }

  async close(h: string): Promise<void> {
    const edge = this.#edges.get(h);
    if (!edge) return;
    this.#edges.delete(h);
    await edge.dispose();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#edges.keys()].map((h) => this.close(h)));
  }
}

/** The names the scenarios check, for the brain API's error codes. */
const ERROR_NAMES: Record<string, string> = {
  capability_not_advertised: "CapabilityNotAdvertisedError",
  session_refused: "SessionRefusedError",
  session_ended: "SessionEndedError",
  tool_outcome_unknown: "ToolOutcomeUnknownError",
  executor_unavailable: "ExecutorUnavailableError",
};

function callError(error: { code: number | string; message: string; data?: any }): ScenarioError {
  return new ScenarioError({
    name: typeof error.code === "number" ? "ProtocolError" : ERROR_NAMES[error.code] ?? error.code,
    message: error.message,
    ...(typeof error.code === "number" ? { code: error.code } : {}),
    ...(typeof error.data?.reason === "string" ? { reason: error.data.reason } : {}),
    ...(error.data !== undefined ? { data: error.data } : {}),
  });
}

function brainError(answer: BrainAnswer): ScenarioError {
  const error = answer.body?.error;
  if (!error || typeof error !== "object") {
    return new ScenarioError({
      name: "Error",
      message: `HTTP ${answer.status}`,
      status: answer.status,
    });
  }
  return callError(error);
}

/** The Workers column: the Node executor against the edge harness over WebSocket. */
export function conformanceCells(): Promise<ExternalCell[]> {
  return Promise.resolve([{
    id: "nww",
    executor: "node",
    harness: "workers",
    transport: "ws",
    open() {
      const agent = new EdgeHarnessAgent();
      return Promise.resolve({ H: agent, close: () => agent.closeAll() });
    },
  }]);
}
