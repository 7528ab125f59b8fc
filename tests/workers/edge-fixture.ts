/**
 * Fixtures of the edge harness tests: the esbuild bundle of `fixture-worker.ts` (the example's
 * Worker, and a `HarnessObject` with the conformance harness agent as its brain inside) running
 * in real workerd through Miniflare on 127.0.0.1, that brain over fetch, and `ExecutorClient`s
 * dialing it with `ws`.
 */
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import WebSocket from "ws";
import { ExecutorClient, type ExecutorClientOptions } from "../../executor/node.ts";
import { CapturingLogger } from "../helpers/raw.ts";
import { untilEvicted } from "../helpers/workerd-eviction.ts";

/** Credentials the Worker's token endpoint accepts in these tests. */
export const EDGE = {
  jwtSecret: "edge-test-signing-secret-0123456789abcdef",
  brainToken: "brain_SECRET_token_5d1c0a",
  environmentId: "env_edge",
  environmentKey: "ek_edge_SECRET_key_93ab17",
  machineId: "m_edge",
  machineToken: "mt_edge_SECRET_token_c4e2d8",
} as const;

/** Executor info of every test client. */
export const INFO = { name: "edge-test", os: "linux", arch: "amd64", version: "0.0.1" } as const;

let bundle: Promise<string> | undefined;

/** The name the bundle of fixture-worker.ts has in workerd. */
const FIXTURE_MODULE = new URL("./fixture-worker.mjs", import.meta.url).pathname;

/** The bundle of fixture-worker.ts, built once per test process (as wrangler would). */
export function workerBundle(): Promise<string> {
  bundle ??= build({
    entryPoints: [new URL("./fixture-worker.ts", import.meta.url).pathname],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    logLevel: "silent",
  }).then((result) => result.outputFiles[0].text);
  return bundle;
}

/** An error the brain inside the object answered with (name, code, reason, data as thrown). */
export class DriverError extends Error {
  readonly code?: number;
  readonly reason?: string;
  readonly data?: unknown;
  constructor(
    wire: { name: string; message: string; code?: number; reason?: string; data?: unknown },
  ) {
    super(wire.message);
    this.name = wire.name;
    this.code = wire.code;
    this.reason = wire.reason;
    this.data = wire.data;
  }
}

/** Options of {@linkcode startEdge}. */
export interface EdgeOptions {
  /** Extra Worker vars (numbers as strings), e.g. `BMA_HEARTBEAT_INTERVAL_MS`. */
  vars?: Record<string, string>;
  /**
   * `false`: no token endpoint and no token check (`BMA_INSECURE_NO_AUTH`), for executors that
   * dial with a bare `harnessUrl`. Default true.
   */
  auth?: boolean;
}

/** An answer of the brain API. */
export interface BrainAnswer {
  status: number;
  body: any;
}

/** A running edge harness. */
export class Edge {
  readonly mf: Miniflare;
  /** `http://127.0.0.1:<port>`: token endpoint, connect endpoint, brain API. */
  readonly url: string;
  readonly #clients: ExecutorClient[] = [];
  readonly #sockets: WebSocket[] = [];
  readonly #cleanups: (() => Promise<void> | void)[] = [];

  private constructor(mf: Miniflare, url: string) {
    this.mf = mf;
    this.url = url.replace(/\/$/, "");
  }

  /** Starts workerd with the bundled Worker. */
  static async start(options: EdgeOptions = {}): Promise<Edge> {
    const mf = new Miniflare({
      // The module given, not found by Miniflare: its dynamic import of workerd:unsafe
      // (`evictNow`) is resolved by workerd.
      modules: [{ type: "ESModule", path: FIXTURE_MODULE, contents: await workerBundle() }],
      compatibilityDate: "2025-09-01",
      compatibilityFlags: ["unsafe_module"],
      durableObjects: { BMA_HARNESS: { className: "TestHarnessObject", useSQLite: true } },
      bindings: {
        BMA_BRAIN_TOKEN: EDGE.brainToken,
        ...(options.auth === false ? { BMA_INSECURE_NO_AUTH: "true" } : {
          BMA_JWT_SECRET: EDGE.jwtSecret,
          BMA_CREDENTIALS: JSON.stringify([
            { environmentId: EDGE.environmentId, environmentKey: EDGE.environmentKey },
            { machineId: EDGE.machineId, machineToken: EDGE.machineToken },
          ]),
        }),
        ...options.vars,
      },
      host: "127.0.0.1",
      port: 0,
    });
    const url = await mf.ready;
    return new Edge(mf, url.href);
  }

  /** `ws://127.0.0.1:<port>/v1/executors/connect`. */
  get connectUrl(): string {
    return `${this.url.replace(/^http/, "ws")}/v1/executors/connect`;
  }

  /**
   * Calls a method of the brain inside the object `object` (the conformance harness agent's
   * methods, its harness id left out); rejects with a {@linkcode DriverError} as it threw.
   * `detach`: answers at once, the brain awaiting the method's outcome on its own.
   */
  async driver<T = any>(
    method: string,
    args: unknown[] = [],
    object = `environments/${EDGE.environmentId}`,
    options: { detach?: boolean } = {},
  ): Promise<T> {
    const query = options.detach ? "?detach" : "";
    const path = `/_driver/${encodeURIComponent(object)}/${method}${query}`;
    const response = await fetch(`${this.url}${path}`, {
      method: "POST",
      body: JSON.stringify(args),
    });
    const body = await response.json() as {
      result?: T;
      error?: ConstructorParameters<typeof DriverError>[0];
    };
    if (body.error) throw new DriverError(body.error);
    return body.result as T;
  }

  /** The in-memory incarnation of the object `object` (a new one after each eviction). */
  async instance(object = `environments/${EDGE.environmentId}`): Promise<string> {
    const response = await fetch(`${this.url}/_driver/${encodeURIComponent(object)}/instance`);
    return ((await response.json()) as { instance: string }).instance;
  }

  /**
   * Resolves once workerd has evicted the object `object` on its own, the object having gone
   * idle: a look finds a new incarnation.
   */
  async evicted(object = `environments/${EDGE.environmentId}`): Promise<void> {
    await untilEvicted(() => this.instance(object), await this.instance(object));
  }

  /**
   * Has workerd evict the object `object` now, through its idle-eviction path, once its live
   * requests ended; resolves once a look finds a new incarnation.
   */
  async evictNow(object = `environments/${EDGE.environmentId}`): Promise<void> {
    const before = await this.instance(object);
    const response = await fetch(`${this.url}/_evict/${encodeURIComponent(object)}`, {
      method: "POST",
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`the eviction failed: ${response.status} ${text}`);
    if (await this.instance(object) === before) throw new Error("the object was not evicted");
  }

  /** Calls the brain API of `route` (default: the test environment's object). */
  async brain(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    route = `environments/${EDGE.environmentId}`,
  ): Promise<BrainAnswer> {
    const response = await fetch(`${this.url}/v1/harness/${route}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${EDGE.brainToken}`,
        "content-type": "application/json",
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  /** An executor client with the environment credential, exchanged at this Worker. */
  client(options: Partial<ExecutorClientOptions> = {}): ExecutorClient {
    const client = new ExecutorClient({
      baseUrl: this.url,
      environmentKey: EDGE.environmentKey,
      environmentId: EDGE.environmentId,
      executor: INFO,
      logger: new CapturingLogger(),
      reconnect: { initialDelayMs: 10, maxDelayMs: 100 },
      retry: { initialDelayMs: 10, maxDelayMs: 100 },
      ...options,
    });
    this.#clients.push(client);
    return client;
  }

  /** A token from the Worker's endpoint (environment scope unless `machine`). */
  async token(machine = false): Promise<{ token: string; expires_at: string }> {
    const path = machine
      ? `/v1/machines/${EDGE.machineId}/token`
      : `/v1/environments/${EDGE.environmentId}/token`;
    const response = await fetch(`${this.url}${path}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${machine ? EDGE.machineToken : EDGE.environmentKey}`,
        "content-type": "application/json",
      },
      body: "{}",
    });
    if (response.status !== 200) throw new Error(`token exchange: ${response.status}`);
    return await response.json();
  }

  /** A raw `ws` socket to the connect endpoint, closed at cleanup. */
  raw(
    token: string,
    protocols: string[] = ["bma.executor.v1.1"],
    headers: Record<string, string> = {},
  ): RawSocket {
    const ws = new WebSocket(this.connectUrl, protocols, {
      headers: { authorization: `Bearer ${token}`, ...headers },
    });
    this.#sockets.push(ws);
    return new RawSocket(ws);
  }

  /** Runs `fn` at cleanup. */
  defer(fn: () => Promise<void> | void): void {
    this.#cleanups.push(fn);
  }

  /** Stops every client and raw socket made so far. */
  async stopClients(): Promise<void> {
    await Promise.all(this.#clients.splice(0).map((client) => bounded(client.stop())));
    for (const ws of this.#sockets.splice(0)) ws.terminate();
  }

  /** Stops every client and socket, then workerd. */
  async dispose(): Promise<void> {
    await this.stopClients();
    for (const fn of this.#cleanups.splice(0).reverse()) await fn();
    await this.mf.dispose();
  }
}

/** A `ws` client socket read frame by frame. */
export class RawSocket {
  readonly ws: WebSocket;
  readonly opened: Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly #frames: any[] = [];
  #waiters: ((frame: any) => void)[] = [];
  #nextId = 1;

  constructor(ws: WebSocket) {
    this.ws = ws;
    this.opened = new Promise((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
      ws.once("unexpected-response", (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    this.opened.catch(() => {});
    this.closed = new Promise((resolve) => {
      ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() }));
    });
    ws.on("message", (data) => {
      const frame = JSON.parse(data.toString());
      const waiter = this.#waiters.shift();
      if (waiter) waiter(frame);
      else this.#frames.push(frame);
    });
  }

  /** Sends a request and resolves with its response (harness requests in between are kept). */
  async call(method: string, params: unknown): Promise<any> {
    const id = this.#nextId++;
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    for (;;) {
      const frame = await this.next();
      if (frame.id === id && !("method" in frame)) return frame;
    }
  }

  /** The next frame. */
  next(): Promise<any> {
    const frame = this.#frames.shift();
    if (frame !== undefined) return Promise.resolve(frame);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

/** `executor.register` params of a raw environment-scoped executor. */
export function registerParams(protocol = "bma.executor.v1.1"): Record<string, unknown> {
  return {
    protocol,
    environment_id: EDGE.environmentId,
    executor: INFO,
    capabilities: { tools: ["bash"] },
  };
}

function bounded(promise: Promise<unknown>): Promise<unknown> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.catch(() => {}),
    new Promise((resolve) => (timer = setTimeout(resolve, 2_000))),
  ]).finally(() => clearTimeout(timer));
}

/** Resolves once `predicate` holds, checking after each macrotask turn (no timing involved). */
export async function until(
  predicate: () => boolean | Promise<boolean>,
  what = "condition",
): Promise<void> {
  for (let i = 0; i < 1_000_000; i++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, i < 100 ? 0 : 10));
  }
  throw new Error(`never happened: ${what}`);
}

/** A promise with its resolve function, to hold a tool handler until the test lets it go. */
export function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}
