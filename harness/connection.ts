/**
 * One executor WebSocket on the harness side (internal): register-first admission, the
 * executor's requests and notifications, the register deadline (close 1008) and the token
 * deadline (close 4001).
 */
import { Peer, PeerHandlers } from "../protocol/peer.ts";
import type { TimerHandle } from "../protocol/clock.ts";
import type { ProtocolError } from "../protocol/errors.ts";
import type { Transport } from "../transport/transport.ts";
import type {
  ExecutorRegisterParams,
  ExecutorRegisterResult,
  ProtocolVersion,
} from "../protocol/generated/contract.ts";
import {
  CloseCode,
  ConflictError,
  ForbiddenError,
  NotFoundError,
} from "../protocol/generated/errors.ts";
import { afterReply, type HarnessContext } from "./context.ts";
import { executorControl, type ExecutorHandle } from "./executor-handle.ts";
import { mcpChannelControl } from "./mcp-channel.ts";
import { type Authenticate, expiryOf, type Principal, samePrincipal } from "./principal.ts";
import { sessionControl } from "./session.ts";

/** What a connection needs from the harness (internal): one object shared by its connections. */
export interface ConnectionHost {
  readonly ctx: HarnessContext;
  readonly maxFrameBytes: number | undefined;
  readonly maxFrameDepth: number | undefined;
  /** Frames refused before `executor.register` that close the connection with 1008. */
  readonly maxUnregisteredRequests: number;
  /** How long a connection may stay unregistered. */
  readonly registerTimeoutMs: number;
  /** Verifies a refreshed token; absent: `executor.token.refresh` is not served (-32601). */
  readonly authenticate: Authenticate | undefined;
  /** The connection registered, or closed before it did: called once per connection. */
  settled(connection: ExecutorConnection): void;
  /** Registers the connection; throws the contract's error to refuse. */
  register(
    connection: ExecutorConnection,
    params: ExecutorRegisterParams,
  ): ExecutorRegisterResult;
  /** The connection ended. */
  closed(connection: ExecutorConnection): void;
}

type State = "unregistered" | "registered" | "closed";

/** The handler tables of a host's connections, one per protocol version (built on first use). */
const handlerTables = new WeakMap<
  ConnectionHost,
  Map<ProtocolVersion, PeerHandlers<ExecutorConnection>>
>();

/**
 * One executor connection. A harness holds one per executor, idle most of the time, so it keeps
 * little: its methods are served from a handler table shared by every connection of the harness
 * (each handler is given the connection), and one timer covers both the register deadline and
 * the token's expiry.
 */
export class ExecutorConnection {
  readonly peer: Peer;
  readonly protocol: ProtocolVersion;
  /** No `authenticate` ran: what the executor registers as is believed (a local harness). */
  readonly trusted: boolean;
  readonly #href: string;
  #principal: Principal;
  #state: State = "unregistered";
  #executor: ExecutorHandle | undefined;
  #closingForGood = false;
  #refused = 0;
  readonly #host: ConnectionHost;
  /** Until when it may stay unregistered; `undefined` once registered (or past). */
  #registerBy: number | undefined;
  /** When its token expires, if it does. */
  #tokenExpiresAt: number | undefined;
  /** The token's expiry has passed (a refresh no longer moves it). */
  #tokenExpired = false;
  /** The one timer, due at the earlier of `#registerBy` and `#tokenExpiresAt`. */
  #timer: TimerHandle | undefined;

  constructor(
    transport: Transport,
    protocol: ProtocolVersion,
    principal: Principal,
    trusted: boolean,
    url: URL,
    host: ConnectionHost,
  ) {
    this.#host = host;
    this.protocol = protocol;
    this.trusted = trusted;
    this.#principal = principal;
    this.#href = url.href;
    const ctx = host.ctx;
    this.peer = new Peer(transport, {
      protocol,
      clock: ctx.clock,
      logger: ctx.logger,
      maxFrameBytes: host.maxFrameBytes,
      maxFrameDepth: host.maxFrameDepth,
      ...(ctx.requestTimeoutMs !== undefined ? { requestTimeoutMs: ctx.requestTimeoutMs } : {}),
      handlers: ExecutorConnection.#handlers(host, protocol),
      owner: this,
    });
    this.#tokenExpiresAt = expiryOf(principal);
    this.#registerBy = ctx.clock.now() + host.registerTimeoutMs;
    this.#arm();
    this.peer.closed.then(() => {
      if (this.#state === "unregistered") host.settled(this);
      this.#state = "closed";
      this.#disarm();
      const executor = this.#executor;
      if (executor) executorControl(executor).detach(this, this.#closingForGood);
      host.closed(this);
    });
  }

  /** The URL it connected with (for token refresh checks); never logged whole. */
  get url(): URL {
    return new URL(this.#href);
  }

  /** The principal `authenticate` returned (replaced by a refreshed token's). */
  get principal(): Principal {
    return this.#principal;
  }

  /** The executor bound by a successful `executor.register`. */
  get executor(): ExecutorHandle | undefined {
    return this.#executor;
  }

  /** When the connection's token expires (ms since the epoch), if it does. */
  get tokenExpiresAt(): number | undefined {
    return this.#tokenExpiresAt;
  }

  /** A new registration with the same executor id took over: close with 4004. */
  replaced(): void {
    this.#executor = undefined;
    this.peer.close(CloseCode.REPLACED, "replaced by a new registration");
  }

  /** Closes the connection. */
  close(code: number, reason: string): Promise<unknown> {
    return this.peer.close(code, reason);
  }

  /** Binds the executor after a successful registration (called by the harness). */
  bind(executor: ExecutorHandle): void {
    this.#executor = executor;
  }

  // ---- deadlines -----------------------------------------------------------------------------

  /** Sets the timer for the earlier pending deadline. */
  #arm(): void {
    this.#disarm();
    if (this.#state === "closed") return;
    const token = this.#tokenExpired ? undefined : this.#tokenExpiresAt;
    const register = this.#registerBy;
    const at = token === undefined
      ? register
      : register === undefined
      ? token
      : Math.min(token, register);
    if (at === undefined) return;
    const clock = this.#host.ctx.clock;
    this.#timer = clock.setTimeout(() => {
      this.#timer = undefined;
      this.#deadlinePassed();
    }, Math.max(0, at - clock.now()));
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    this.#host.ctx.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #deadlinePassed(): void {
    if (this.#state === "closed") return;
    const ctx = this.#host.ctx;
    const now = ctx.clock.now();
    const token = this.#tokenExpiresAt;
    if (!this.#tokenExpired && token !== undefined && token <= now) {
      this.#tokenExpired = true;
      ctx.logger.info("executor token expired: closing", { executor_id: this.#executor?.id });
      this.peer.close(CloseCode.TOKEN_EXPIRED, "token expired");
    }
    const register = this.#registerBy;
    if (register !== undefined && register <= now) {
      this.#registerBy = undefined;
      if (this.#state === "unregistered") {
        this.peer.close(CloseCode.POLICY_VIOLATION, "executor.register not received");
      }
    }
    this.#arm();
  }

  // ---- what the executor sends ---------------------------------------------------------------

  #admit(method: string, kind: "request" | "notification"): ProtocolError | undefined {
    if (this.#state === "registered") {
      return method === "executor.register"
        ? new ConflictError("already registered", { reason: "already_registered" })
        : undefined;
    }
    if (method === "executor.register") return undefined;
    if (kind === "request" && ++this.#refused > this.#host.maxUnregisteredRequests) {
      // Repeated frames before executor.register: a policy violation, not a slow start.
      afterReply(() =>
        this.peer.close(CloseCode.POLICY_VIOLATION, "requests before executor.register")
      );
    }
    return new ForbiddenError("not registered", { reason: "not_registered" });
  }

  #bound(): ExecutorHandle {
    const executor = this.#executor;
    // Admission lets only registered connections through; a replaced one has no executor.
    if (!executor) throw new ForbiddenError("not registered", { reason: "not_registered" });
    return executor;
  }

  #registered(params: ExecutorRegisterParams): ExecutorRegisterResult {
    const result = this.#host.register(this, params);
    this.#state = "registered";
    this.#host.settled(this);
    if (this.#registerBy !== undefined) {
      this.#registerBy = undefined;
      this.#arm();
    }
    return result;
  }

  async #refresh(token: string): Promise<{ expires_at: string }> {
    const authenticate = this.#host.authenticate!;
    let next: Principal;
    try {
      next = await authenticate({
        kind: "refresh",
        token,
        url: this.url,
        headers: new Headers({ authorization: `Bearer ${token}` }),
        protocols: [],
      });
    } catch {
      throw new ForbiddenError("token invalid", { reason: "token_invalid" });
    }
    const expiresAt = expiryOf(next);
    if (expiresAt === undefined || expiresAt <= this.#host.ctx.clock.now()) {
      throw new ForbiddenError("token invalid", { reason: "token_invalid" });
    }
    if (!samePrincipal(this.#principal, next)) {
      throw new ForbiddenError("token mismatch", { reason: "token_mismatch" });
    }
    this.#principal = next;
    // A deadline that has passed, or a connection that has closed, is not moved.
    if (!this.#tokenExpired && this.#state !== "closed") {
      this.#tokenExpiresAt = expiresAt;
      this.#arm();
    }
    return { expires_at: new Date(expiresAt).toISOString() };
  }

  /** The handler table of a host's connections on one protocol version. */
  static #handlers(
    host: ConnectionHost,
    protocol: ProtocolVersion,
  ): PeerHandlers<ExecutorConnection> {
    let tables = handlerTables.get(host);
    if (!tables) handlerTables.set(host, tables = new Map());
    let table = tables.get(protocol);
    if (!table) tables.set(protocol, table = ExecutorConnection.#serve(host, protocol));
    return table;
  }

  static #serve(host: ConnectionHost, protocol: ProtocolVersion): PeerHandlers<ExecutorConnection> {
    const ctx = host.ctx;
    const table = new PeerHandlers<ExecutorConnection>();
    table.admit = (connection, method, kind) => connection.#admit(method, kind);

    table.onRequest("executor.register", (params, _, connection) => connection.#registered(params));

    table.onRequest(
      "executor.heartbeat",
      (_params, _, connection) => executorControl(connection.#bound()).heartbeat(),
    );

    if (host.authenticate && protocol !== "bma.executor.v1") {
      table.onRequest(
        "executor.token.refresh",
        ({ token }, _, connection) => connection.#refresh(token),
      );
    }

    table.onRequest("session.ready", ({ session_id }, _, connection) => {
      const session = executorControl(connection.#bound()).session(session_id);
      if (!session) throw unknownSession();
      const repeat = sessionControl(session).markReady();
      return repeat ? { ok: true, duplicate: true } : { ok: true };
    });

    table.onRequest("session.event", (params, context, connection) => {
      const session = executorControl(connection.#bound()).session(params.session_id);
      if (!session) throw unknownSession();
      return sessionControl(session).appendEvent(params, context.id, context.frameLength);
    });

    table.onRequest("session.ended", ({ session_id, reason }, _, connection) => {
      const session = executorControl(connection.#bound()).session(session_id);
      // A repeat, or a session the harness no longer knows, ends the executor's retry loop.
      if (!session || session.state === "ended") return { ok: true, duplicate: true };
      sessionControl(session).end(reason ?? "ended", "session_ended");
      return { ok: true };
    });

    table.onRequest("tool.result", (params, _, connection) => {
      const executor = connection.#bound();
      const acceptance = ctx.ledger.accept(params, executor.id);
      if (acceptance === "unknown") {
        throw new NotFoundError("unknown tool call", { reason: "unknown_tool_call" });
      }
      return acceptance === "duplicate" ? { ok: true, duplicate: true } : { ok: true };
    });

    table.onRequest("mcp.close", ({ channel_id, reason }, _, connection) => {
      const control = executorControl(connection.#bound());
      const channel = control.channel(channel_id);
      if (!channel || channel.isClosed) return { closed: false };
      control.dropChannel(channel_id);
      mcpChannelControl(channel).end(reason ?? "closed by executor");
      return { closed: true };
    });

    table.onNotification("mcp.message", ({ channel_id, message }, connection) => {
      const channel = executorControl(connection.#bound()).channel(channel_id);
      if (!channel) {
        ctx.logger.warn("mcp.message for an unknown channel dropped", { channel_id });
        return;
      }
      mcpChannelControl(channel).deliver(message as { jsonrpc: "2.0" });
    });

    table.onNotification("executor.capabilities.update", ({ capabilities }, connection) => {
      executorControl(connection.#bound()).updateCapabilities(capabilities);
    });

    table.onNotification("executor.close", ({ reason }, connection) => {
      ctx.logger.info("executor closing for good", {
        executor_id: connection.#executor?.id,
        reason,
      });
      connection.#closingForGood = true;
    });

    table.onNotification("session.status", (params, connection) => {
      const session = executorControl(connection.#bound()).session(params.session_id);
      if (session) sessionControl(session).status(params);
    });

    table.onNotification("tool.progress", (params, connection) => {
      const session = executorControl(connection.#bound()).session(params.session_id);
      if (session) sessionControl(session).progress(params);
    });

    table.onNotification("terminal.output", (params, connection) => {
      const session = executorControl(connection.#bound()).session(params.session_id);
      if (session) sessionControl(session).terminalOutput(params);
    });

    // The agent capability's executor-to-harness methods: served only with an agent platform,
    // so a harness without one answers -32601 (the executor then keeps its tokens).
    const agent = ctx.agent;
    if (agent) {
      table.onNotification(
        "session.event_delta",
        (params, connection) => agent.delta(connection.#bound(), params),
      );
      table.onRequest(
        "interaction.request",
        (params, _, connection) => agent.requestInteraction(connection.#bound(), params),
      );
      table.onRequest(
        "interaction.cancel",
        (params, _, connection) => agent.cancelInteraction(connection.#bound(), params),
      );
      table.onRequest(
        "model_token.refresh",
        (params, _, connection) => agent.modelToken(connection.#bound(), params),
      );
      table.onRequest(
        "tools_token.refresh",
        (params, _, connection) => agent.toolsToken(connection.#bound(), params),
      );
    }
    return table;
  }
}

function unknownSession(): NotFoundError {
  return new NotFoundError("unknown session", { reason: "unknown_session" });
}
