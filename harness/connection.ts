/**
 * One executor WebSocket on the harness side (internal): register-first admission, the
 * executor's requests and notifications, and the token deadline (close 4001).
 */
import { Peer } from "../protocol/peer.ts";
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
import { Deadline } from "./lease.ts";
import { mcpChannelControl } from "./mcp-channel.ts";
import { type Authenticate, expiryOf, type Principal } from "./principal.ts";
import { sessionControl } from "./session.ts";

/** What a connection needs from the harness (internal). */
export interface ConnectionHost {
  readonly ctx: HarnessContext;
  readonly maxFrameBytes: number | undefined;
  /** Frames refused before `executor.register` that close the connection with 1008. */
  readonly maxUnregisteredRequests: number;
  /** How long a connection may stay unregistered. */
  readonly registerTimeoutMs: number;
  /** Verifies a refreshed token; absent: `executor.token.refresh` is not served (-32601). */
  readonly authenticate: Authenticate | undefined;
  /** Registers the connection; throws the contract's error to refuse. */
  register(
    connection: ExecutorConnection,
    params: ExecutorRegisterParams,
  ): ExecutorRegisterResult;
  /** The connection ended. */
  closed(connection: ExecutorConnection): void;
}

type State = "unregistered" | "registered" | "closed";

/** One executor connection. */
export class ExecutorConnection {
  readonly peer: Peer;
  readonly protocol: ProtocolVersion;
  /** The URL it connected with (for token refresh checks); never logged whole. */
  readonly url: URL;
  #principal: Principal;
  #state: State = "unregistered";
  #executor: ExecutorHandle | undefined;
  #closingForGood = false;
  #refused = 0;
  readonly #host: ConnectionHost;
  readonly #tokenDeadline: Deadline;
  readonly #registerDeadline: Deadline;

  constructor(
    transport: Transport,
    protocol: ProtocolVersion,
    principal: Principal,
    url: URL,
    host: ConnectionHost,
  ) {
    this.#host = host;
    this.protocol = protocol;
    this.#principal = principal;
    this.url = url;
    const ctx = host.ctx;
    this.peer = new Peer(transport, {
      protocol,
      clock: ctx.clock,
      logger: ctx.logger,
      maxFrameBytes: host.maxFrameBytes,
      ...(ctx.requestTimeoutMs !== undefined ? { requestTimeoutMs: ctx.requestTimeoutMs } : {}),
    });
    this.#tokenDeadline = new Deadline(ctx.clock, () => {
      ctx.logger.info("executor token expired: closing", { executor_id: this.#executor?.id });
      this.peer.close(CloseCode.TOKEN_EXPIRED, "token expired");
    });
    const expiresAt = expiryOf(principal);
    if (expiresAt !== undefined) this.#tokenDeadline.set(expiresAt);
    this.#registerDeadline = new Deadline(ctx.clock, () => {
      if (this.#state === "unregistered") {
        this.peer.close(CloseCode.POLICY_VIOLATION, "executor.register not received");
      }
    });
    this.#registerDeadline.set(ctx.clock.now() + host.registerTimeoutMs);
    this.peer.admit = (method, kind) => this.#admit(method, kind);
    this.#serve();
    this.peer.closed.then(() => {
      this.#state = "closed";
      this.#tokenDeadline.cancel();
      this.#registerDeadline.cancel();
      const executor = this.#executor;
      if (executor) executorControl(executor).detach(this, this.#closingForGood);
      host.closed(this);
    });
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
    return this.#tokenDeadline.at;
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

  #admit(method: string, kind: "request" | "notification") {
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

  #serve(): void {
    const peer = this.peer;
    const ctx = this.#host.ctx;

    peer.onRequest("executor.register", (params) => {
      const result = this.#host.register(this, params);
      this.#state = "registered";
      this.#registerDeadline.cancel();
      return result;
    });

    peer.onRequest("executor.heartbeat", () => executorControl(this.#bound()).heartbeat());

    if (this.#host.authenticate && this.protocol !== "bma.executor.v1") {
      const authenticate = this.#host.authenticate;
      peer.onRequest("executor.token.refresh", async ({ token }) => {
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
        if (expiresAt === undefined || expiresAt <= ctx.clock.now()) {
          throw new ForbiddenError("token invalid", { reason: "token_invalid" });
        }
        if (!sameIdentity(this.#principal, next)) {
          throw new ForbiddenError("token mismatch", { reason: "token_mismatch" });
        }
        this.#principal = next;
        this.#tokenDeadline.set(expiresAt);
        return { expires_at: new Date(expiresAt).toISOString() };
      });
    }

    peer.onRequest("session.ready", ({ session_id }) => {
      const session = executorControl(this.#bound()).session(session_id);
      if (!session) throw unknownSession();
      const repeat = sessionControl(session).markReady();
      return repeat ? { ok: true, duplicate: true } : { ok: true };
    });

    peer.onRequest("session.event", (params, context) => {
      const session = executorControl(this.#bound()).session(params.session_id);
      if (!session) throw unknownSession();
      return sessionControl(session).appendEvent(params, context.id);
    });

    peer.onRequest("session.ended", ({ session_id, reason }) => {
      const session = executorControl(this.#bound()).session(session_id);
      // A repeat, or a session the harness no longer knows, ends the executor's retry loop.
      if (!session || session.state === "ended") return { ok: true, duplicate: true };
      sessionControl(session).end(reason ?? "ended", "session_ended");
      return { ok: true };
    });

    peer.onRequest("tool.result", (params) => {
      const executor = this.#bound();
      const acceptance = ctx.ledger.accept(params, executor.id);
      if (acceptance === "unknown") {
        throw new NotFoundError("unknown tool call", { reason: "unknown_tool_call" });
      }
      return acceptance === "duplicate" ? { ok: true, duplicate: true } : { ok: true };
    });

    peer.onRequest("mcp.close", ({ channel_id, reason }) => {
      const control = executorControl(this.#bound());
      const channel = control.channel(channel_id);
      if (!channel || channel.isClosed) return { closed: false };
      control.dropChannel(channel_id);
      mcpChannelControl(channel).end(reason ?? "closed by executor");
      return { closed: true };
    });

    peer.onNotification("mcp.message", ({ channel_id, message }) => {
      const channel = executorControl(this.#bound()).channel(channel_id);
      if (!channel) {
        ctx.logger.warn("mcp.message for an unknown channel dropped", { channel_id });
        return;
      }
      mcpChannelControl(channel).deliver(message as { jsonrpc: "2.0" });
    });

    peer.onNotification("executor.capabilities.update", ({ capabilities }) => {
      executorControl(this.#bound()).updateCapabilities(capabilities);
    });

    peer.onNotification("executor.close", ({ reason }) => {
      ctx.logger.info("executor closing for good", { executor_id: this.#executor?.id, reason });
      this.#closingForGood = true;
    });

    peer.onNotification("session.status", (params) => {
      const session = executorControl(this.#bound()).session(params.session_id);
      if (session) sessionControl(session).status(params);
    });

    peer.onNotification("tool.progress", (params) => {
      const session = executorControl(this.#bound()).session(params.session_id);
      if (session) sessionControl(session).progress(params);
    });

    // The agent capability's executor-to-harness methods: served only with an agent platform,
    // so a harness without one answers -32601 (the executor then keeps its tokens).
    const agent = ctx.agent;
    if (agent) {
      peer.onNotification("session.event_delta", (params) => agent.delta(this.#bound(), params));
      peer.onRequest(
        "interaction.request",
        (params) => agent.requestInteraction(this.#bound(), params),
      );
      peer.onRequest(
        "interaction.cancel",
        (params) => agent.cancelInteraction(this.#bound(), params),
      );
      peer.onRequest("model_token.refresh", (params) => agent.modelToken(this.#bound(), params));
      peer.onRequest("tools_token.refresh", (params) => agent.toolsToken(this.#bound(), params));
    }
  }

  /** Binds the executor after a successful registration (called by the harness). */
  bind(executor: ExecutorHandle): void {
    this.#executor = executor;
  }
}

function unknownSession(): NotFoundError {
  return new NotFoundError("unknown session", { reason: "unknown_session" });
}

/** Whether a refreshed token names the same executor, scope and credential. */
function sameIdentity(a: Principal, b: Principal): boolean {
  return a.scope === b.scope && a.environmentId === b.environmentId &&
    a.machineId === b.machineId && a.credentialId === b.credentialId &&
    a.executorId === b.executorId;
}
