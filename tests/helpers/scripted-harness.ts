/**
 * A harness scripted by the test, for the failures the real `Harness` never produces on purpose
 * (a refused `tool.result`, a missing `executor.token.refresh`, a close code of the test's
 * choosing): a real WebSocket server on 127.0.0.1 with a real HTTP token endpoint, where each
 * connection is a contract `Peer` whose handlers the test sets.
 */
import {
  type Clock,
  type JsonRpcId,
  MethodNotFoundError,
  Peer,
  PROTOCOLS,
  type RequestHandler,
  type RequestMethod,
  systemClock,
  type Transport,
} from "../../mod.ts";
import type { ExecutorRegisterParams } from "../../protocol/mod.ts";
import { type RunningServer, serveWebSocket } from "../../transport/node.ts";

/** One request the harness received. */
export interface Received {
  readonly connection: number;
  readonly method: string;
  readonly id: JsonRpcId | undefined;
  readonly params: any;
}

/** One executor connection. */
export class ScriptedConnection {
  readonly index: number;
  readonly peer: Peer;
  /** Headers of the upgrade request. */
  readonly headers: Headers;
  register: ExecutorRegisterParams | undefined;
  constructor(index: number, peer: Peer, headers: Headers) {
    this.index = index;
    this.peer = peer;
    this.headers = headers;
  }
}

type AnyHandler = (params: any, context: { id: JsonRpcId; connection: ScriptedConnection }) => any;

/** Options of {@linkcode ScriptedHarness.start}. */
export interface ScriptedHarnessOptions {
  clock?: Clock;
  /** Lifetime of issued tokens. Default 300 s. */
  tokenTtlMs?: number;
  /** Heartbeat interval handed out by register. Default 1000 ms. */
  heartbeatIntervalMs?: number;
}

const SERVED = [
  "executor.register",
  "executor.heartbeat",
  "executor.token.refresh",
  "session.ready",
  "session.event",
  "session.ended",
  "tool.result",
  // Answered -32601 unless a test serves them (`on`), as a harness without them does.
  "model_token.refresh",
  "tools_token.refresh",
] as const;

const DEFAULT_HANDLERS: Record<string, AnyHandler> = {
  "executor.register": (params: ExecutorRegisterParams, { connection }) => ({
    executor_id: "exec_scripted",
    protocol: connection.peer.protocol,
    heartbeat_interval_ms: 1000,
    ...(params.resume ? { resumed_sessions: params.resume.active_sessions } : {}),
  }),
  "executor.heartbeat": () => ({ drain: false }),
  "executor.token.refresh": () => ({ expires_at: new Date(Date.now() + 300_000).toISOString() }),
  "session.ready": () => ({ ok: true }),
  "session.event": () => ({}),
  "session.ended": () => ({ ok: true }),
  "tool.result": () => ({ ok: true }),
};

/** The scripted harness. */
export class ScriptedHarness {
  readonly connections: ScriptedConnection[] = [];
  readonly received: Received[] = [];
  readonly notifications: Received[] = [];
  /** Every token request: path and authorization header. */
  readonly tokenRequests: { path: string; authorization: string | null; body: string }[] = [];
  /** Status the token endpoint answers with (200 issues a token). */
  tokenStatus = 200;
  /** While set, token requests are received but answered only once it resolves. */
  tokenGate: Promise<void> | undefined;
  /** Paths of the HTTP endpoints that answer 404 (an older deployment). */
  missingPaths: RegExp | undefined;
  /** Every artifact uploaded: path, headers and bytes. */
  readonly artifacts: { path: string; headers: Headers; bytes: Uint8Array }[] = [];
  /** Status that refuses upgrades (undefined: accept). */
  refuseUpgrade: number | undefined;
  /** Subprotocol to pick instead of the preferred one. */
  pickProtocol: string | undefined;
  readonly #handlers = new Map<string, AnyHandler>(Object.entries(DEFAULT_HANDLERS));
  readonly #waiters = new Set<() => void>();
  readonly #clock: Clock;
  readonly #ttl: number;
  readonly #heartbeat: number;
  #server!: RunningServer;
  #tokens = 0;

  private constructor(options: ScriptedHarnessOptions) {
    this.#clock = options.clock ?? systemClock;
    this.#ttl = options.tokenTtlMs ?? 300_000;
    this.#heartbeat = options.heartbeatIntervalMs ?? 1000;
    this.#handlers.set("executor.token.refresh", () => ({
      expires_at: new Date(this.#clock.now() + this.#ttl).toISOString(),
    }));
    const register = DEFAULT_HANDLERS["executor.register"];
    this.#handlers.set("executor.register", (params, ctx) => ({
      ...register(params, ctx),
      heartbeat_interval_ms: this.#heartbeat,
    }));
  }

  /** Starts it on 127.0.0.1:0. */
  static async start(options: ScriptedHarnessOptions = {}): Promise<ScriptedHarness> {
    const harness = new ScriptedHarness(options);
    harness.#server = await serveWebSocket({
      hostname: "127.0.0.1",
      port: 0,
      upgrade: (request, offered) => Promise.resolve(harness.#upgrade(request, offered)),
      fetch: (request) => harness.#fetch(request),
    });
    return harness;
  }

  /** The WebSocket URL. */
  get url(): string {
    return this.#server.url;
  }

  /** The HTTP base URL (token endpoint). */
  get httpUrl(): string {
    return this.#server.httpUrl;
  }

  /** Tokens issued so far. */
  get tokensIssued(): number {
    return this.#tokens;
  }

  /** The latest connection. */
  get last(): ScriptedConnection {
    return this.connections[this.connections.length - 1];
  }

  /** Serves `method` with `handler` on every connection (current and future). */
  on<M extends RequestMethod>(
    method: M,
    handler: (
      params: Parameters<RequestHandler<M>>[0],
      context: { id: JsonRpcId; connection: ScriptedConnection },
    ) => ReturnType<RequestHandler<M>>,
  ): void {
    this.#handlers.set(method, handler as AnyHandler);
  }

  /** Removes the handler of `method` (requests for it get -32601). */
  unserve(method: string): void {
    this.#handlers.delete(method);
  }

  /** Requests of `method` received so far. */
  requests(method: string): Received[] {
    return this.received.filter((r) => r.method === method);
  }

  /** Resolves once `predicate` holds (checked whenever something arrives). */
  async waitFor(predicate: () => boolean): Promise<void> {
    while (!predicate()) await new Promise<void>((resolve) => this.#waiters.add(resolve));
  }

  /** Resolves once `count` requests of `method` have arrived. */
  waitForRequests(method: string, count = 1): Promise<void> {
    return this.waitFor(() => this.requests(method).length >= count);
  }

  /** Resolves once `count` connections were opened. */
  waitForConnections(count: number): Promise<void> {
    return this.waitFor(() => this.connections.length >= count);
  }

  /** Stops it. */
  async close(): Promise<void> {
    for (const connection of this.connections) {
      if (!connection.peer.isClosed) connection.peer.close(1001, "test over");
    }
    await this.#server.close();
  }

  #wake(): void {
    for (const wake of [...this.#waiters]) {
      this.#waiters.delete(wake);
      wake();
    }
  }

  #upgrade(request: Request, offered: string[]) {
    if (this.refuseUpgrade !== undefined) {
      return {
        accept: false as const,
        response: new Response("no", { status: this.refuseUpgrade }),
      };
    }
    const protocol = this.pickProtocol ?? PROTOCOLS.find((p) => offered.includes(p));
    if (!protocol) {
      return { accept: false as const, response: new Response("no protocol", { status: 400 }) };
    }
    return {
      accept: true as const,
      protocol,
      onOpen: (transport: Transport) => this.#open(transport, request.headers),
    };
  }

  #open(transport: Transport, headers: Headers): void {
    // Outgoing frames are not validated: tests send malformed requests on purpose.
    const peer = new Peer(transport, {
      clock: this.#clock,
      requestTimeoutMs: 0,
      validateOutgoing: false,
    });
    const connection = new ScriptedConnection(this.connections.length, peer, headers);
    this.connections.push(connection);
    for (const spec of SERVED) {
      peer.onRequest(
        spec,
        ((params: any, ctx: { id: JsonRpcId }) => {
          this.received.push({ connection: connection.index, method: spec, id: ctx.id, params });
          this.#wake();
          const handler = this.#handlers.get(spec);
          if (!handler) throw new MethodNotFoundError();
          if (spec === "executor.register") {
            connection.register = params;
            peer.capabilities = params.capabilities;
          }
          return handler(params, { id: ctx.id, connection });
        }) as any,
      );
    }
    for (
      const method of [
        "session.status",
        "tool.progress",
        "executor.capabilities.update",
        "executor.close",
      ] as const
    ) {
      peer.onNotification(method, (params: any) => {
        this.notifications.push({ connection: connection.index, method, id: undefined, params });
        if (method === "executor.capabilities.update") peer.capabilities = params.capabilities;
        this.#wake();
      });
    }
    peer.closed.then(() => this.#wake());
    this.#wake();
  }

  async #fetch(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (this.missingPaths?.test(path)) {
      this.tokenRequests.push({ path, authorization: null, body: "" });
      return new Response("not found", { status: 404 });
    }
    if (path.endsWith("/artifacts")) {
      const bytes = new Uint8Array(await request.arrayBuffer());
      this.artifacts.push({ path, headers: request.headers, bytes });
      this.#wake();
      return Response.json({
        artifact_id: `art_${this.artifacts.length}`,
        name: decodeURIComponent(request.headers.get("x-artifact-name") ?? ""),
        size: bytes.byteLength,
      }, { status: 201 });
    }
    const body = await request.text();
    this.tokenRequests.push({ path, authorization: request.headers.get("authorization"), body });
    this.#wake();
    if (!path.endsWith("/token")) return new Response("not found", { status: 404 });
    if (this.tokenGate) await this.tokenGate;
    if (this.tokenStatus !== 200) {
      return Response.json({ error: "invalid_credential" }, { status: this.tokenStatus });
    }
    const n = ++this.#tokens;
    return Response.json({
      token: `scripted.jwt.SECRET-${n}`,
      expires_at: new Date(this.#clock.now() + this.#ttl).toISOString(),
      expires_in: Math.round(this.#ttl / 1000),
      url: this.url,
    });
  }
}
