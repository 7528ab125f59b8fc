/**
 * {@linkcode HarnessObject}: the Durable Object that holds the executors of one environment (or
 * one machine) with the WebSocket hibernation API. The runtime may evict it between any two
 * events while its sockets stay open; the next event constructs it anew, so its state is in
 * storage and in the sockets' attachments, and every timer is a deadline on its single alarm.
 */
import { PROTOCOLS, type ProtocolVersion } from "../../protocol/generated/contract.ts";
import type { Logger } from "../../protocol/logger.ts";
import type { Principal } from "../principal.ts";
import { randomId } from "../token-endpoint.ts";
import { serveBrain } from "./brain.ts";
import {
  type HarnessEnv,
  readSettings,
  resolveAuthenticate,
  resolveLogger,
  type WorkersHarnessOptions,
} from "./config.ts";
import { serveFrame } from "./connection.ts";
import { EdgeCore } from "./core.ts";
import { type ConnectionAttachment, storePrincipal } from "./store.ts";
import {
  createWebSocketPair,
  type DurableObjectStateLike,
  upgradeResponse,
  type WorkersWebSocket,
} from "./types.ts";

/** The header in which the Worker hands an admitted connection to the object (internal). */
export const ADMITTED_HEADER = "x-bma-admitted";
/** The object's internal path for an admitted WebSocket upgrade. */
export const CONNECT_PATH = "/connect";
/** The object's internal prefix of the brain API. */
export const BRAIN_PREFIX = "/brain";

/** What the Worker established before handing a connection to the object (internal). */
export interface AdmittedConnection {
  readonly protocol: ProtocolVersion;
  readonly principal: Principal;
}

const decoder = new TextDecoder();

/**
 * The harness Durable Object. Export it from your Worker under the class name bound in
 * `wrangler.toml` (`export { HarnessObject } from "bma-executor-sdk/workers"`); subclass it to
 * pass options:
 *
 * ```ts
 * export class MyHarness extends HarnessObject {
 *   constructor(state: DurableObjectStateLike, env: HarnessEnv) {
 *     super(state, env, { authenticate: myAuthenticate });
 *   }
 * }
 * ```
 */
export class HarnessObject {
  readonly #core: EdgeCore;
  readonly #logger: Logger;

  /**
   * Built by the runtime on every wake-up of the object (also after an eviction): its state lives
   * in storage and socket attachments.
   */
  constructor(state: DurableObjectStateLike, env: HarnessEnv, options: WorkersHarnessOptions = {}) {
    // Start-up stays cheap: an evicted object is rebuilt on each wake-up.
    this.#logger = resolveLogger(options);
    this.#core = new EdgeCore(
      state,
      readSettings(env),
      this.#logger,
      resolveAuthenticate(options, env, this.#logger),
    );
  }

  /** Admitted connections (from the Worker) and brain API requests. */
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === CONNECT_PATH) return await this.#connect(request);
    if (url.pathname === BRAIN_PREFIX || url.pathname.startsWith(`${BRAIN_PREFIX}/`)) {
      return await serveBrain(this.#core, request, url.pathname.slice(BRAIN_PREFIX.length));
    }
    return new Response(JSON.stringify({ error: "not_found" }), { status: 404 });
  }

  /** A frame from an executor (the hibernation API's entry point). */
  async webSocketMessage(ws: WorkersWebSocket, message: string | ArrayBuffer): Promise<void> {
    const frame = typeof message === "string" ? message : decoder.decode(message);
    await this.#core.serial(async () => {
      const att = this.#core.attachment(ws);
      if (!att) return;
      try {
        await serveFrame(this.#core, ws, att, frame);
      } catch (error) {
        this.#logger.error("frame handling failed", { error: String(error) });
        await this.#core.closeConnection(ws, att, 1011, "internal error");
      }
    });
  }

  /** The executor closed its socket (or it broke). */
  async webSocketClose(
    ws: WorkersWebSocket,
    code: number,
    reason: string,
    _wasClean?: boolean,
  ): Promise<void> {
    await this.#core.serial(async () => {
      const att = this.#core.attachment(ws);
      // 1005 and 1006 cannot be sent in a close frame; answer with a normal close then.
      const answer = code === 1005 || code === 1006 || code === 1015 ? 1000 : code;
      if (att && att.state !== "closed") {
        att.state = "closed";
        try {
          ws.serializeAttachment(att);
        } catch {
          // A socket past its close may refuse; the state below is what counts.
        }
        await this.#core.detach(att);
      }
      // Without this answer the executor sees 1006 instead of its own code.
      try {
        ws.close(answer, reason);
      } catch {
        // Already closed.
      }
    });
  }

  /** The socket failed. */
  async webSocketError(ws: WorkersWebSocket, _error: unknown): Promise<void> {
    await this.#core.serial(async () => {
      const att = this.#core.attachment(ws);
      if (att && att.state !== "closed") {
        att.state = "closed";
        await this.#core.detach(att);
      }
    });
  }

  /** Every deadline (leases, token expiries, register and stop timeouts, purges) fires here. */
  async alarm(): Promise<void> {
    await this.#core.serial(() => this.#core.runDeadlines(Date.now()));
  }

  async #connect(request: Request): Promise<Response> {
    const header = request.headers.get(ADMITTED_HEADER);
    let admitted: AdmittedConnection;
    try {
      admitted = JSON.parse(header ?? "") as AdmittedConnection;
    } catch {
      return new Response(JSON.stringify({ error: "bad_request" }), { status: 400 });
    }
    const protocol = PROTOCOLS.find((p) => p === admitted.protocol);
    if (!protocol) return new Response(JSON.stringify({ error: "bad_request" }), { status: 400 });
    const [client, server] = createWebSocketPair();
    const att: ConnectionAttachment = {
      id: randomId("conn_"),
      protocol,
      principal: storePrincipal(admitted.principal ?? {}),
      state: "unregistered",
      refused: 0,
    };
    // The connection id is the socket's tag: later events find the socket by it.
    this.#core.state.acceptWebSocket(server, [att.id]);
    server.serializeAttachment(att);
    await this.#core.serial(async () => {
      const now = Date.now();
      await this.#core.deadlines.set(
        `register:${att.id}`,
        now + 2 * this.#core.settings.heartbeatIntervalMs,
      );
      if (att.principal.expiresAt !== undefined) {
        await this.#core.deadlines.set(`token:${att.id}`, att.principal.expiresAt);
      }
    });
    return upgradeResponse(client, protocol);
  }
}
