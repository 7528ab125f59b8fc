/**
 * One executor connection on the harness side (internal): its peer, register-first admission,
 * its register deadline (close 1008) and token deadline (close 4001, moved by
 * `executor.token.refresh`). What each method does is the harness's rules (`core.ts`); the
 * connection only knows where it is.
 *
 * A connection's state fits a small JSON object ({@linkcode ConnectionSnapshot}): an edge
 * harness that is evicted while its sockets live on keeps it with each socket and restores the
 * connection from it, registered and bound, without a new `executor.register`.
 */
import { Peer, type PeerHandlers, type ReplyHooks } from "../protocol/peer.ts";
import type { ProtocolError } from "../protocol/errors.ts";
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Transport } from "../transport/transport.ts";
import type { UnsentBudget } from "../transport/unsent-budget.ts";
import type {
  ExecutorRegisterParams,
  ExecutorRegisterResult,
  ProtocolVersion,
} from "../protocol/generated/contract.ts";
import {
  CloseCode,
  ConflictError,
  ErrorCode,
  ForbiddenError,
} from "../protocol/generated/errors.ts";
import type { ExecutorEntry } from "./state.ts";
import { type Authenticate, expiryOf, type Principal, samePrincipal } from "./principal.ts";
import { Deadline, type Scheduler } from "./scheduler.ts";
import { isPromiseLike, type MaybePromise } from "./store/store.ts";

/** Where a connection is. */
type State = "unregistered" | "registered" | "closed";

/**
 * A connection's state as a small JSON value: what restores it after an edge harness was
 * evicted while the socket lived on (`Harness.restore`).
 */
export interface ConnectionSnapshot {
  /** The negotiated subprotocol. */
  readonly protocol: ProtocolVersion;
  /** The URL it connected with. */
  readonly url: string;
  /** What `authenticate` returned (a refreshed token's, after a refresh). */
  readonly principal: Principal;
  /** No `authenticate` ran: what the executor registers as is believed. */
  readonly trusted: boolean;
  /** `registered` once `executor.register` succeeded. */
  readonly state: "unregistered" | "registered";
  /** The executor registered on it. */
  readonly executorId?: string;
  /** Until when it may stay unregistered (ms since the epoch). */
  readonly registerBy?: number;
  /** When its token expires (ms since the epoch). */
  readonly tokenExpiresAt?: number;
  /** The token's expiry passed (the connection is closing with 4001). */
  readonly tokenExpired?: boolean;
  /** Requests refused before `executor.register`. */
  readonly refused?: number;
  /** The executor sent `executor.close`. */
  readonly closingForGood?: boolean;
  /** The executor's lease expiry as its last heartbeat set it. */
  readonly leaseExpiresAt?: number;
}

/** What a connection needs from the harness (one object shared by its connections). */
export interface ConnectionHost {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly scheduler: Scheduler;
  readonly maxFrameBytes: number | undefined;
  readonly maxFrameDepth: number | undefined;
  /** The budget of unsent bytes its connections share. */
  readonly unsentBudget: UnsentBudget;
  readonly requestTimeoutMs: number | undefined;
  /** Frames refused before `executor.register` that close the connection with 1008. */
  readonly maxUnregisteredRequests: number;
  /** How long a connection may stay unregistered. */
  readonly registerTimeoutMs: number;
  /** Verifies a refreshed token; absent: `executor.token.refresh` is not served (-32601). */
  readonly authenticate: Authenticate | undefined;
  /** The handler table of a protocol version (one per harness and version). */
  handlers(protocol: ProtocolVersion): PeerHandlers<ExecutorConnection>;
  /** Registers the connection; throws the contract's error to refuse. */
  register(
    connection: ExecutorConnection,
    params: ExecutorRegisterParams,
    reply: ReplyHooks,
  ): MaybePromise<ExecutorRegisterResult>;
  /** The connection registered, or closed before it did: called once per connection. */
  settled(connection: ExecutorConnection): void;
  /** The connection ended (after its executor, if any, was detached). */
  closed(
    connection: ExecutorConnection,
    executor: ExecutorEntry | undefined,
    forGood: boolean,
  ): void;
  /** Its snapshot changed (an edge harness keeps it with the socket). */
  changed?(connection: ExecutorConnection): void;
}

/**
 * One executor connection. A harness holds one per executor, idle most of the time, so it keeps
 * little: its methods are served from a handler table shared by every connection of the harness
 * (each handler is given the connection), and it is itself the one deadline that covers both
 * the register deadline and the token's expiry.
 */
export class ExecutorConnection extends Deadline {
  readonly peer: Peer;
  readonly protocol: ProtocolVersion;
  /** No `authenticate` ran: what the executor registers as is believed (a local harness). */
  readonly trusted: boolean;
  readonly #href: string;
  #principal: Principal;
  #state: State = "unregistered";
  #executor: ExecutorEntry | undefined;
  #closingForGood = false;
  #refused = 0;
  readonly #host: ConnectionHost;
  /** Until when it may stay unregistered; `undefined` once registered (or past). */
  #registerBy: number | undefined;
  /** When its token expires, if it does. */
  #tokenExpiresAt: number | undefined;
  /** The token's expiry has passed (a refresh no longer moves it). */
  #tokenExpired = false;

  /**
   * Serves a connection from its start, or (`restore`, with its executor) as it was when its
   * snapshot was taken.
   */
  constructor(
    transport: Transport,
    protocol: ProtocolVersion,
    principal: Principal,
    trusted: boolean,
    url: URL,
    host: ConnectionHost,
    restore?: { snapshot: ConnectionSnapshot; executor: ExecutorEntry | undefined },
  ) {
    super();
    this.#host = host;
    this.protocol = protocol;
    this.trusted = trusted;
    this.#principal = principal;
    this.#href = url.href;
    const snapshot = restore?.snapshot;
    if (snapshot) {
      this.#refused = snapshot.refused ?? 0;
      this.#closingForGood = snapshot.closingForGood ?? false;
      this.#tokenExpired = snapshot.tokenExpired ?? false;
      this.#tokenExpiresAt = snapshot.tokenExpiresAt;
      if (snapshot.state === "registered" && restore.executor) {
        this.#state = "registered";
        this.#executor = restore.executor;
      } else this.#registerBy = snapshot.registerBy ?? host.clock.now() + host.registerTimeoutMs;
    } else {
      this.#tokenExpiresAt = expiryOf(principal);
      this.#registerBy = host.clock.now() + host.registerTimeoutMs;
    }
    // Fields first: the peer may dispatch frames the transport buffered while it is made.
    this.peer = new Peer(transport, {
      protocol,
      clock: host.clock,
      logger: host.logger,
      maxFrameBytes: host.maxFrameBytes,
      maxFrameDepth: host.maxFrameDepth,
      unsentBudget: host.unsentBudget,
      ...(host.requestTimeoutMs !== undefined ? { requestTimeoutMs: host.requestTimeoutMs } : {}),
      handlers: host.handlers(protocol),
      owner: this,
    });
    this.#arm();
    this.peer.closed.then(() => {
      if (this.#state === "unregistered") host.settled(this);
      this.#state = "closed";
      host.scheduler.clear(this);
      const executor = this.#executor;
      host.closed(this, executor, this.#closingForGood);
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
  get executor(): ExecutorEntry | undefined {
    return this.#executor;
  }

  /** Whether `executor.register` succeeded on it. */
  get registered(): boolean {
    return this.#state === "registered";
  }

  /** When the connection's token expires (ms since the epoch), if it does. */
  get tokenExpiresAt(): number | undefined {
    return this.#tokenExpiresAt;
  }

  /** The connection's state, to restore it from (see {@linkcode ConnectionSnapshot}). */
  snapshot(): ConnectionSnapshot {
    const executor = this.#executor;
    const registered = this.#state === "registered" && executor !== undefined;
    return {
      protocol: this.protocol,
      url: this.#href,
      principal: {
        ...this.#principal,
        ...(this.#principal.expiresAt !== undefined
          ? { expiresAt: expiryOf(this.#principal) }
          : {}),
      },
      trusted: this.trusted,
      state: registered ? "registered" : "unregistered",
      ...(registered ? { executorId: executor.id } : {}),
      ...(this.#registerBy !== undefined ? { registerBy: this.#registerBy } : {}),
      ...(this.#tokenExpiresAt !== undefined ? { tokenExpiresAt: this.#tokenExpiresAt } : {}),
      ...(this.#tokenExpired ? { tokenExpired: true } : {}),
      ...(this.#refused > 0 ? { refused: this.#refused } : {}),
      ...(this.#closingForGood ? { closingForGood: true } : {}),
      ...(registered && executor.lease?.expiresAt !== undefined
        ? { leaseExpiresAt: executor.lease.expiresAt }
        : {}),
    };
  }

  /** Binds the executor after a successful registration. */
  bind(executor: ExecutorEntry): void {
    this.#executor = executor;
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

  // ---- deadlines -----------------------------------------------------------------------------

  /** Schedules the earlier pending deadline. */
  #arm(): void {
    const scheduler = this.#host.scheduler;
    if (this.#state === "closed") {
      scheduler.clear(this);
      return;
    }
    const token = this.#tokenExpired ? undefined : this.#tokenExpiresAt;
    const register = this.#registerBy;
    const at = token === undefined
      ? register
      : register === undefined
      ? token
      : Math.min(token, register);
    if (at === undefined) scheduler.clear(this);
    else scheduler.set(this, at);
  }

  /** Called by the scheduler. */
  due(now: number): void {
    if (this.#state === "closed") return;
    const token = this.#tokenExpiresAt;
    if (!this.#tokenExpired && token !== undefined && token <= now) {
      this.#tokenExpired = true;
      this.#host.logger.info("executor token expired: closing", {
        executor_id: this.#executor?.id,
      });
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

  // ---- what the executor sends (called from the harness's handler table) ---------------------

  /** Register-first admission: refuses what comes before a successful `executor.register`. */
  admit(method: string): ProtocolError | undefined {
    if (this.#state === "registered") {
      return method === "executor.register"
        ? new ConflictError("already registered", { reason: "already_registered" })
        : undefined;
    }
    if (method === "executor.register") return undefined;
    return new ForbiddenError("not registered", { reason: "not_registered" });
  }

  /**
   * A refusal its peer made (answered or dropped: `not_registered`, an unknown method, a frame
   * that is not JSON-RPC, a register refused as invalid). Before the connection registers, each
   * counts: beyond `maxUnregisteredRequests` it is closed with 1008, where frames that earn only
   * a refusal could otherwise keep the harness busy until the register deadline. A register
   * refused for the harness's own state (-32004, -32009) is not held against it: the executor
   * may try again.
   */
  refused(code: number): void {
    if (this.#state !== "unregistered") return;
    if (code === ErrorCode.UNAVAILABLE || code === ErrorCode.RESOURCE_EXHAUSTED) return;
    if (++this.#refused === this.#host.maxUnregisteredRequests + 1) {
      // Repeated frames before executor.register: a policy violation, not a slow start. Closed
      // once the refusal is on its way.
      queueMicrotask(() =>
        this.peer.close(CloseCode.POLICY_VIOLATION, "requests before executor.register")
      );
    }
    this.#host.changed?.(this);
  }

  /** The bound executor (admission lets only registered connections through). */
  bound(): ExecutorEntry {
    const executor = this.#executor;
    // A replaced connection has no executor.
    if (!executor) throw new ForbiddenError("not registered", { reason: "not_registered" });
    return executor;
  }

  /**
   * `executor.register`. Its deadline does not run while the harness records it (a store slow to
   * answer must not close the connection as never registered: the executor takes 1008 as
   * final); refused, the connection has the deadline it had.
   */
  register(
    params: ExecutorRegisterParams,
    reply: ReplyHooks,
  ): MaybePromise<ExecutorRegisterResult> {
    const registerBy = this.#registerBy;
    this.#registerBy = undefined;
    this.#arm();
    const refused = (error: unknown): never => {
      if (this.#state === "unregistered" && registerBy !== undefined) {
        this.#registerBy = registerBy;
        this.#arm();
      }
      throw error;
    };
    const registered = (result: ExecutorRegisterResult) => {
      // Closed meanwhile: it was settled then, and stays closed.
      if (this.#state === "closed") return result;
      this.#state = "registered";
      this.#host.settled(this);
      this.#arm();
      this.#host.changed?.(this);
      return result;
    };
    let answer: MaybePromise<ExecutorRegisterResult>;
    try {
      answer = this.#host.register(this, params, reply);
    } catch (error) {
      return refused(error);
    }
    return isPromiseLike(answer) ? answer.then(registered, refused) : registered(answer);
  }

  /** `executor.close`: the executor stops for good; its connection's end ends it. */
  closingForGood(): void {
    this.#host.logger.info("executor closing for good", { executor_id: this.#executor?.id });
    this.#closingForGood = true;
    this.#host.changed?.(this);
  }

  /** `executor.token.refresh`: moves the token deadline to the new token's expiry. */
  async refresh(token: string): Promise<{ expires_at: string }> {
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
    if (expiresAt === undefined || expiresAt <= this.#host.clock.now()) {
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
    this.#host.changed?.(this);
    return { expires_at: new Date(expiresAt).toISOString() };
  }
}
