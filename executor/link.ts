/**
 * The executor's link to its harness as the rest of the client sees it: the one registered
 * connection at a time, waiting for the next, and where the client is in its life. The
 * connection loop and the registration change it; tool calls, outboxes and the face only read
 * it or send through it, so none of them needs to know how connections come and go.
 */
import type {
  Capabilities,
  ExecutorNotificationMethod,
  ExecutorRegisterResult,
  NotificationMap,
} from "../protocol/generated/contract.ts";
import { ConnectionClosedError } from "../protocol/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import { type Disposable, Peer, type PeerOptions } from "../protocol/peer.ts";
import type { Transport } from "../transport/transport.ts";
import type { ClientState, Connection } from "./connection-loop.ts";
import type { ExecutorToken } from "./credentials.ts";
import { ClientStoppedError, NotConnectedError } from "./errors.ts";
import type { Lease } from "./lease.ts";
import type { ConnectionLink } from "../protocol/retry.ts";
import { type Deferred, deferred, describeError } from "./timing.ts";
import type { TokenRefresher } from "./token-refresher.ts";

/** One connection to the harness, from its peer's creation until it ends. */
export class ClientConnection implements Connection {
  readonly peer: Peer;
  readonly token: ExecutorToken;
  /** What `executor.register` answered; set once the harness has answered. */
  registration!: ExecutorRegisterResult;
  executorCloseReceived = false;
  /** The sessions offered for resumption in `executor.register` (none on the first one). */
  readonly resumeSent: string[] | undefined;
  /** The capabilities last advertised on this connection. */
  advertised: Capabilities;
  lease: Lease | undefined;
  refresher: TokenRefresher | undefined;

  /**
   * A peer on `transport` served by `options.handlers` (the client's one table), which gets
   * this connection as the owner of each message it serves.
   */
  constructor(
    transport: Transport,
    token: ExecutorToken,
    options: PeerOptions & { capabilities: Capabilities },
    resumeSent: string[] | undefined,
  ) {
    this.peer = new Peer(transport, { ...options, owner: this });
    this.token = token;
    this.resumeSent = resumeSent;
    this.advertised = options.capabilities;
  }

  /** Whether the connection is still open. */
  get open(): boolean {
    return !this.peer.isClosed;
  }
}

/** The registered connection, who waits for one, and the client's state. */
export class ClientLink implements ConnectionLink {
  readonly #logger: Logger;
  readonly #waiters = new Set<Deferred<Peer>>();
  readonly #stateHandlers = new Set<(state: ClientState) => void>();
  #current: ClientConnection | undefined;
  #state: ClientState = "idle";

  /** A link with no connection yet, in state `idle`. */
  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Where the client is: idle, connecting, connected, waiting (backoff), stopping, stopped. */
  get state(): ClientState {
    return this.#state;
  }

  /** Moves to `state`; `stopping` leads only to `stopped`, and `stopped` is final. */
  setState(state: ClientState): void {
    if (this.#state === state || this.#state === "stopped") return;
    if (this.#state === "stopping" && state !== "stopped") return;
    this.#state = state;
    for (const handler of [...this.#stateHandlers]) {
      try {
        handler(state);
      } catch (error) {
        this.#logger.warn("state handler failed", { error: describeError(error) });
      }
    }
  }

  /** Calls `handler` with every state change. */
  onStateChange(handler: (state: ClientState) => void): Disposable {
    this.#stateHandlers.add(handler);
    return { dispose: () => void this.#stateHandlers.delete(handler) };
  }

  /** The registered connection, even one that has just closed (until it is detached). */
  get current(): ClientConnection | undefined {
    return this.#current;
  }

  /** The registered connection while it is open. */
  get open(): ClientConnection | undefined {
    const connection = this.#current;
    return connection?.open ? connection : undefined;
  }

  /** The open connection's peer, if there is one. */
  connected(): Peer | undefined {
    return this.open?.peer;
  }

  /**
   * A stop's grace period is running: the client is stopping, yet the next connection is still
   * waited for, so that the results and events of work finishing meanwhile go out on it.
   */
  graceful = false;
  /** Who waits for the next connection to register (`nextConnection`). */
  readonly #nextWaiters = new Set<() => void>();

  /**
   * The open connection's peer, or the next one to register; rejects once the client is
   * stopping (past its grace period), or when `signal` aborts.
   */
  whenConnected(signal?: AbortSignal): Promise<Peer> {
    const peer = this.connected();
    if (peer) return Promise.resolve(peer);
    if (this.#state === "stopped" || (this.#state === "stopping" && !this.graceful)) {
      return Promise.reject(new ClientStoppedError());
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    const waiter = deferred<Peer>();
    this.#waiters.add(waiter);
    if (signal) {
      const onAbort = () => {
        this.#waiters.delete(waiter);
        waiter.reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      waiter.promise.then(
        () => signal.removeEventListener("abort", onAbort),
        () => signal.removeEventListener("abort", onAbort),
      );
    }
    return waiter.promise;
  }

  /** A connection registered: it is the link now, and whoever waits gets its peer. */
  attach(connection: ClientConnection): void {
    this.#current = connection;
    for (const waiter of this.#waiters) waiter.resolve(connection.peer);
    this.#waiters.clear();
    for (const wake of [...this.#nextWaiters]) wake();
  }

  /** Resolves when the next connection registers; never, once `signal` aborts. */
  nextConnection(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return;
      const wake = () => {
        this.#nextWaiters.delete(wake);
        signal.removeEventListener("abort", forget);
        resolve();
      };
      const forget = () => void this.#nextWaiters.delete(wake);
      this.#nextWaiters.add(wake);
      signal.addEventListener("abort", forget, { once: true });
    });
  }

  /** The connection ended (or the client let go of it). */
  detach(connection: ClientConnection): void {
    if (this.#current === connection) this.#current = undefined;
  }

  /** Fails whoever waits for a connection (the client stops). */
  refuseWaiting(error: unknown): void {
    for (const waiter of this.#waiters) waiter.reject(error);
    this.#waiters.clear();
  }

  /**
   * Sends a notification on the open connection; throws {@linkcode NotConnectedError} without
   * one. False when a lossy one was dropped (the link is congested).
   */
  notify<M extends ExecutorNotificationMethod>(method: M, params: NotificationMap[M]): boolean {
    const connection = this.open;
    if (!connection) throw new NotConnectedError(method);
    try {
      return connection.peer.notify(method, params);
    } catch (error) {
      if (error instanceof ConnectionClosedError) throw new NotConnectedError(method);
      throw error;
    }
  }

  /** Whether the open connection holds more unsent than its peer allows; false without one. */
  get congested(): boolean {
    return this.open?.peer.congested ?? false;
  }
}
