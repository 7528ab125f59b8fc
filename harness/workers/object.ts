/**
 * {@linkcode HarnessObject}: the Durable Object that hosts one {@linkcode Harness} — the same
 * portable core as on Node, Deno and Bun — over the object's storage and the WebSocket
 * hibernation API. The runtime may evict the object between any two events while its sockets
 * stay open; the next event constructs it anew on the same storage, and each socket is taken
 * back with the connection snapshot kept in its attachment.
 */
import { brainApi } from "../../http/brain-api/brain-api.ts";
import type { ConnectionSnapshot } from "../connection.ts";
import { Harness } from "../harness.ts";
import { openDurableObjectStore } from "../store/durable-object.workers.ts";
import { type FedTransport, fedTransport } from "../../transport/fed.ts";
import { isUpgradeRequest, offeredProtocols } from "../../transport/server.ts";
import type { Transport } from "../../transport/transport.ts";
import { randomId } from "../../protocol/ids.ts";
import { AlarmClock } from "./alarm-clock.ts";
import { type HarnessEnv, type HarnessObjectOptions, harnessOptionsFromEnv } from "./config.ts";
import {
  createWebSocketPair,
  type DurableObjectStateLike,
  upgradeResponse,
  type WorkersWebSocket,
} from "./types.ts";

/** The object's path prefix of the brain API (the Worker strips `/v1/harness/<name>`). */
export const BRAIN_PATH = "/_brain";
/**
 * `/v1/harness/<name>/metrics` as the object receives it: answered by the harness's own
 * `GET /metrics` (`metricsEndpoint`), so each object is scraped at a URL that names it.
 */
const METRICS_VIA_BRAIN_PATH = `${BRAIN_PATH}/metrics`;

/** What a socket's attachment holds: its id, and the connection's latest snapshot. */
interface Attachment {
  readonly id: string;
  readonly snapshot?: ConnectionSnapshot;
  /** The harness is done with the connection: its socket is never restored. */
  readonly closed?: true;
}

const decoder = new TextDecoder();

/**
 * The harness Durable Object. Export it from your Worker under the class name bound in
 * `wrangler.toml`; subclass it to pass options (see `harness/workers/README.md`). Its options
 * default to {@linkcode harnessOptionsFromEnv} of the Worker's environment.
 */
export class HarnessObject {
  /** The harness: executors, sessions, tool calls, through the same API as everywhere. */
  readonly harness: Harness;
  readonly #ctx: DurableObjectStateLike;
  readonly #clock: AlarmClock;
  readonly #mayConnect: boolean;
  readonly #brainApi: { fetch(request: Request): Response | Promise<Response> } | undefined;
  /** This incarnation's transport of each socket, by attachment id. */
  readonly #transports = new Map<string, Promise<FedTransport | undefined>>();
  /** Each transport's socket and attachment id. */
  readonly #sockets = new Map<Transport, { ws: WorkersWebSocket; id: string }>();
  /**
   * The attachment id and transport each socket had when last looked up: workerd hands one
   * incarnation the same socket object for every event, so a frame needs no read of the
   * attachment (a structured-clone copy of the snapshot) to find its transport.
   */
  readonly #seen = new WeakMap<
    WorkersWebSocket,
    { id: string; transport: Promise<FedTransport | undefined> }
  >();

  /** Built by the runtime on every wake-up of the object (also after an eviction). */
  constructor(
    ctx: DurableObjectStateLike,
    env: HarnessEnv,
    options: HarnessObjectOptions = harnessOptionsFromEnv(env),
  ) {
    this.#ctx = ctx;
    this.#mayConnect = options.insecureNoAuth === true ||
      options.authenticate !== undefined || options.tokens !== undefined;
    const { brain, brainApi: api, ...harnessOptions } = options;
    // Deadlines and timers share the object's one alarm.
    const clock = new AlarmClock(
      (at) => void ctx.storage.setAlarm(at),
      () => this.harness?.nextDeadline,
    );
    this.#clock = clock;
    this.harness = new Harness({
      clock,
      ...harnessOptions,
      store: openDurableObjectStore(ctx.storage),
      // Made anew on every wake-up: an executor that never comes back still expires.
      recoveredLeases: "stored",
      deadlines: { wake: () => clock.wake() },
      onConnectionChange: (transport, snapshot) => {
        const socket = this.#sockets.get(transport);
        socket?.ws.serializeAttachment({ id: socket.id, snapshot } satisfies Attachment);
      },
    });
    // The deadlines read back from the store, told before `harness` was there.
    clock.wake();
    this.#brainApi = api && brainApi(this.harness, { ...api, basePath: BRAIN_PATH });
    // Every socket the runtime kept is taken back now, not when it next speaks: a connection
    // the harness does not know could not be replaced by its executor's new registration (4004),
    // and would take the executor back from it when it spoke again.
    for (const ws of ctx.getWebSockets()) void this.#transport(ws);
    brain?.(this.harness);
  }

  /**
   * Executor upgrades (decided by the harness before any socket: 400, 401, 404, 503), the
   * brain API under {@linkcode BRAIN_PATH} (its `metrics` being the harness's metrics), and
   * the rest of the harness's HTTP side (token endpoint, `GET /metrics`).
   */
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === METRICS_VIA_BRAIN_PATH) {
      url.pathname = "/metrics";
      return settled(request, await this.harness.fetch(new Request(url, request)));
    }
    if (url.pathname === BRAIN_PATH || url.pathname.startsWith(`${BRAIN_PATH}/`)) {
      if (!this.#brainApi) return json(404, { error: "not_found" });
      return settled(request, await this.#brainApi.fetch(request));
    }
    if (isUpgradeRequest(request)) return await this.#connect(request);
    return settled(request, await this.harness.fetch(request));
  }

  /** A frame from an executor (the hibernation API's entry point). */
  async webSocketMessage(ws: WorkersWebSocket, message: string | ArrayBuffer): Promise<void> {
    const transport = await this.#transport(ws);
    transport?.deliver(typeof message === "string" ? message : decoder.decode(message));
  }

  /**
   * The executor closed its socket (or it broke). A socket this incarnation never took back is
   * not restored just to end: its executor may have registered again on another socket since,
   * and a restore would replace that one; its lease runs out instead (or it resumes).
   */
  async webSocketClose(ws: WorkersWebSocket, code: number, reason: string): Promise<void> {
    (await this.#transport(ws, false))?.end(code, reason);
    // Without this answer the executor sees 1006 instead of its own code; 1005 and 1006
    // cannot be sent in a close frame.
    try {
      ws.close(code === 1005 || code === 1006 || code === 1015 ? 1000 : code, reason);
    } catch {
      // Already closed.
    }
  }

  /** The socket failed. */
  async webSocketError(ws: WorkersWebSocket): Promise<void> {
    (await this.#transport(ws, false))?.end(1006, "socket error");
  }

  /**
   * Every deadline (leases, register and token deadlines, stop waits) and timer (request
   * timeouts) falls due here.
   */
  alarm(): void {
    this.#clock.alarm(() => this.harness.runDeadlines());
  }

  async #connect(request: Request): Promise<Response> {
    if (!this.#mayConnect) {
      // As `Harness.serve`: no authenticate, no tokens, no explicit opt-out: nobody connects.
      return json(401, { error: "unauthorized" });
    }
    const decision = await this.harness.upgrade(request, offeredProtocols(request));
    if (!decision.accept) return decision.response;
    const [client, server] = createWebSocketPair();
    this.#ctx.acceptWebSocket(server);
    const id = randomId("ws_");
    server.serializeAttachment({ id } satisfies Attachment);
    const transport = this.#fed(server, id, decision.protocol);
    this.#transports.set(id, Promise.resolve(transport));
    decision.onOpen(transport);
    return upgradeResponse(client, decision.protocol);
  }

  /**
   * This incarnation's transport of `ws`: the one it made or took back, else (with `restore`)
   * one restored from the attachment.
   */
  #transport(ws: WorkersWebSocket, restore = true): Promise<FedTransport | undefined> {
    const seen = this.#seen.get(ws);
    // Still this socket's transport: a closed one has left `#transports` (and its attachment
    // says closed).
    if (seen && this.#transports.get(seen.id) === seen.transport) return seen.transport;
    const att = ws.deserializeAttachment() as Attachment | null;
    if (!att?.id || att.closed) return Promise.resolve(undefined);
    let transport = this.#transports.get(att.id);
    if (!transport && restore) {
      transport = this.#restore(ws, att);
      this.#transports.set(att.id, transport);
    }
    if (!transport) return Promise.resolve(undefined);
    this.#seen.set(ws, { id: att.id, transport });
    return transport;
  }

  async #restore(ws: WorkersWebSocket, att: Attachment): Promise<FedTransport | undefined> {
    if (!att.snapshot) {
      ws.close(1011, "connection state lost");
      return undefined;
    }
    const transport = this.#fed(ws, att.id, att.snapshot.protocol);
    try {
      await this.harness.restore(transport, att.snapshot);
    } catch {
      // The harness closed the transport (it is shutting down): the executor reconnects.
      return undefined;
    }
    return transport;
  }

  #fed(ws: WorkersWebSocket, id: string, protocol: string): FedTransport {
    const transport = fedTransport({
      protocol,
      send: (frame) => ws.send(frame),
      close: (code, reason) => ws.close(code, reason),
    });
    this.#sockets.set(transport, { ws, id });
    transport.closed.then(() => {
      this.#sockets.delete(transport);
      this.#transports.delete(id);
      // A replaced connection's socket must not come back bound to its executor.
      try {
        ws.serializeAttachment({ id, closed: true } satisfies Attachment);
      } catch {
        // A socket past its close may refuse; the object forgets it either way.
      }
    });
    return transport;
  }
}

/**
 * `response`, once the request's body has been read to its end: a body left unread (a refusal
 * answered before reading it) makes workerd reset the client's kept-alive connection under its
 * next request (seen from Bun's fetch); cancelling the body does not help. The Workers runtime
 * bounds how large a request body may be.
 */
async function settled(request: Request, response: Response): Promise<Response> {
  if (request.body && !request.bodyUsed) await request.arrayBuffer().catch(() => {});
  return response;
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}
