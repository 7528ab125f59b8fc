/**
 * The Workers column of the conformance matrix (the hook `tests/conformance/matrix.ts` loads):
 * the executor agent on Node against the edge harness in real workerd, over WebSocket. Each
 * scenario's harness is its own Miniflare instance (the scenario's heartbeat interval is a
 * Worker var), and its brain is the conformance suite's own harness agent running inside the
 * Durable Object (`fixture-worker.ts`) on the object's `Harness`: this adapter only forwards
 * each method to it.
 *
 * Executors dial with a bare `harnessUrl` (the executor agent has no credentials), so these
 * Workers run with `BMA_INSECURE_NO_AUTH`: every connection lands in the `default` object, like
 * the Node cells' `insecureNoAuth` harness. Authentication is covered by tests/workers/.
 *
 * The restart row's Workers form is an eviction: {@linkcode EdgeHarnessAgent.startCall} leaves
 * a call awaited by the brain inside the object only, and {@linkcode EdgeHarnessAgent.evict}
 * has workerd evict the object (its in-memory state dropped).
 */
import { Edge } from "./edge-fixture.ts";

/** How a scenario's harness is reached (`HarnessSpec` of the conformance suite). */
export interface HarnessSpec {
  serve: "ws" | "unix" | "none";
  path?: string;
  heartbeatIntervalMs?: number;
}

/** A column contributed to the conformance matrix (`ExternalCell`). */
export interface ExternalCell {
  readonly id: string;
  readonly executor: "node" | "deno" | "bun";
  readonly harness: string;
  readonly transport: "ws" | "unix";
  readonly skip?: Readonly<Record<string, string>>;
  open(): Promise<{ H: EdgeHarnessAgent; close(): Promise<void>; eviction: EdgeHarnessAgent }>;
}

const OBJECT = "default";

type Forwarded = (h: string, ...args: unknown[]) => Promise<any>;

/** The harness agent's methods, run by the brain inside each edge harness's object. */
export class EdgeHarnessAgent {
  readonly #edges = new Map<string, Edge>();
  #next = 1;

  #edge(h: string): Edge {
    const edge = this.#edges.get(h);
    if (!edge) throw new Error(`no harness ${h}`);
    return edge;
  }

  #forward(method: string): Forwarded {
    return (h, ...args) => this.#edge(h).driver(method, args, OBJECT);
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

  readonly waitEvent = this.#forward("waitEvent");
  readonly eventTypes = this.#forward("eventTypes");
  readonly executor = this.#forward("executor");
  readonly assign = this.#forward("assign");
  readonly call = this.#forward("call");
  readonly cancel = this.#forward("cancel");
  readonly events = this.#forward("events");
  readonly sessionState = this.#forward("sessionState");
  readonly stop = this.#forward("stop");
  readonly ended = this.#forward("ended");
  readonly drain = this.#forward("drain");
  readonly closeExecutor = this.#forward("closeExecutor");
  readonly gone = this.#forward("gone");
  readonly recovered = this.#forward("recovered");
  readonly mcp = this.#forward("mcp");
  readonly startTurn = this.#forward("startTurn");
  readonly answerInteraction = this.#forward("answerInteraction");
  readonly turnEnded = this.#forward("turnEnded");

  /**
   * Starts a tool call awaited only by the brain inside the object (no request stays open, so
   * the object may be evicted while the call runs).
   */
  startCall(h: string, session: string, call: unknown): Promise<void> {
    return this.#edge(h).driver("call", [session, call], OBJECT, { detach: true });
  }

  /**
   * Has workerd evict the object (its idle-eviction path, at once); resolves once a new
   * incarnation answers.
   */
  evict(h: string): Promise<void> {
    return this.#edge(h).evictNow(OBJECT);
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

/** The Workers column: the Node executor against the edge harness over WebSocket. */
export function conformanceCells(): Promise<ExternalCell[]> {
  return Promise.resolve([{
    id: "nww",
    executor: "node",
    harness: "workers",
    transport: "ws",
    open() {
      const agent = new EdgeHarnessAgent();
      return Promise.resolve({ H: agent, close: () => agent.closeAll(), eviction: agent });
    },
  }]);
}
