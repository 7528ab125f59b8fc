/**
 * The executor's connections, one after another: runs the connection loop, registers each
 * connection it opens (a peer served by the core's one handler table, then
 * `executor.register`, with `resume` after the first), and runs what lives as long as a
 * registered connection — its lease and its token refresher — while the link holds it.
 */
import {
  type ExecutorRegisterParams,
  PROTOCOLS,
  type ProtocolVersion,
} from "../protocol/generated/contract.ts";
import { CloseCode, ProtocolMismatchError } from "../protocol/generated/errors.ts";
import type { CloseInfo, Dialer, Transport } from "../transport/transport.ts";
import { type ClientState, type ConnectionHost, ConnectionLoop } from "./connection-loop.ts";
import type { Credentials, ExecutorToken } from "./credentials.ts";
import type { ExecutorCore } from "./core.ts";
import { displayUrl } from "./errors.ts";
import { Lease } from "./lease.ts";
import { ClientConnection } from "./link.ts";
import { sleep } from "./timing.ts";
import { TokenRefresher } from "./token-refresher.ts";

/** Registers the connections of one client and keeps each alive while it lasts. */
export class Connector implements ConnectionHost<ClientConnection> {
  readonly #core: ExecutorCore;
  #loop: ConnectionLoop<ClientConnection> | undefined;

  /** A connector for `core`'s connections; nothing connects before {@linkcode run}. */
  constructor(core: ExecutorCore) {
    this.#core = core;
  }

  /** A connection loop over `credentials` and `dial`, to be started. */
  run(credentials: Credentials, dial: Dialer): ConnectionLoop<ClientConnection> {
    const core = this.#core;
    this.#loop = new ConnectionLoop<ClientConnection>({
      clock: core.clock,
      logger: core.logger,
      random: core.random,
      backoff: core.options.reconnect ?? {},
      credentials,
      dial,
      maxFrameBytes: core.maxFrameBytes,
      connectTimeoutMs: core.options.connectTimeoutMs,
      host: this,
    });
    return this.#loop;
  }

  /** Why the latest connection attempt failed, while none has succeeded since. */
  get lastFailure(): unknown {
    return this.#loop?.lastFailure;
  }

  /** Stops the loop: no more attempts; the current connection is left to {@linkcode close}. */
  halt(): void {
    this.#loop?.halt();
  }

  /** Builds the connection's peer on the core's table and registers; resolves once registered. */
  async register(
    transport: Transport,
    token: ExecutorToken,
    signal: AbortSignal,
  ): Promise<ClientConnection> {
    const protocol = transport.protocol as ProtocolVersion;
    if (!PROTOCOLS.includes(protocol)) {
      throw new ProtocolMismatchError("the harness negotiated no protocol of the contract", {
        reason: "protocol_mismatch",
        expected: PROTOCOLS.join(", "),
        received: transport.protocol,
      });
    }
    const core = this.#core;
    const capabilities = core.capabilities();
    const resumeSessions = core.executorId !== undefined ? core.sessions.ids() : undefined;
    const connection = new ClientConnection(transport, token, {
      clock: core.clock,
      logger: core.logger,
      maxFrameBytes: core.maxFrameBytes,
      maxSendBytes: core.maxSendBytes,
      requestTimeoutMs: core.requestTimeoutMs,
      capabilities,
      handlers: core.handlers,
    }, resumeSessions);
    const params: ExecutorRegisterParams = {
      protocol,
      environment_id: core.credentials.environmentId,
      executor: core.options.executor,
      capabilities,
    };
    if (core.credentials.machineId) params.machine_id = core.credentials.machineId;
    if (core.options.maxSessions !== undefined) params.max_sessions = core.options.maxSessions;
    if (resumeSessions) {
      params.resume = { executor_id: core.executorId!, active_sessions: resumeSessions };
    }
    const registration = await connection.peer.call("executor.register", params, { signal });
    if (registration.protocol !== protocol) {
      // Seed 000: the protocol MUST equal the negotiated subprotocol; a harness that says
      // another speaks what this side cannot know, so the connection is not used.
      const error = new ProtocolMismatchError("the harness registered another protocol", {
        reason: "protocol_mismatch",
        expected: protocol,
        received: String(registration.protocol),
      });
      connection.peer.close(CloseCode.PROTOCOL_MISMATCH, "protocol mismatch");
      throw error;
    }
    connection.registration = registration;
    return connection;
  }

  /** A connection registered: its lease and refresher start, and the link holds it. */
  connected(connection: ClientConnection): void {
    const core = this.#core;
    const { registration, peer } = connection;
    const previousId = core.executorId;
    core.executorId = registration.executor_id;
    core.tokens.token = connection.token;
    core.link.attach(connection);
    // A new id after a reconnect: the harness did not resume this executor (it restarted without
    // its store, or let the lease lapse), so it is a new registration, not the old one resumed.
    const anew = previousId !== undefined && previousId !== registration.executor_id;
    // The calls remembered belong to dealings that ended: a harness that started again without
    // its store numbers its calls afresh, and remembered ids would be answered as duplicates.
    if (anew) core.calls.forgetFinished();
    const what = previousId === undefined
      ? "registered"
      : anew
      ? "registered anew: the harness did not resume the executor"
      : "re-registered";
    core.logger.info(what, {
      url: displayUrl(connection.token.url),
      executor_id: registration.executor_id,
      ...(anew ? { previous_executor_id: previousId } : {}),
      protocol: registration.protocol,
      heartbeat_interval_ms: registration.heartbeat_interval_ms,
    });
    connection.lease = new Lease({
      peer,
      clock: core.clock,
      logger: core.logger,
      intervalMs: registration.heartbeat_interval_ms,
      sessions: core.sessions,
      onDrain: () => core.startDrain({ source: "heartbeat" }),
      onDead: () => this.#loop?.abandon(connection, "heartbeats unanswered"),
    });
    connection.lease.start();
    const expiresAt = connection.token.expiresAt;
    if (core.credentials.refreshable && expiresAt !== undefined) {
      connection.refresher = new TokenRefresher({
        peer,
        clock: core.clock,
        logger: core.logger,
        credentials: core.credentials,
        expiresAt,
        leadMs: core.options.tokenRefreshLeadMs ?? 60_000,
        retry: core.retry,
        random: core.random,
        tokens: core.tokens,
      });
      connection.refresher.start();
    }
    this.#dropUnresumed(connection);
    // Capabilities changed while registering are published now.
    core.capabilitiesChanged();
    core.events.attach(peer);
  }

  /** The registered connection ended. */
  disconnected(connection: ClientConnection, info: CloseInfo): void {
    const core = this.#core;
    connection.lease?.stop();
    connection.refresher?.stop();
    core.events.detach(connection.peer);
    core.link.detach(connection);
    // The harness refused a frame of ours as too large: the next connections send none as large
    // (a tool result that large is then reported as `result_too_large`, not sent again for ever).
    if (info.code === CloseCode.MESSAGE_TOO_BIG && !connection.peer.refusedLargeFrame) {
      core.harnessRefusedFrame(connection.peer.longestSentFrame);
    }
    // The connection loop says what follows (reconnecting, or stopping): one line, not two.
    core.logger.debug("disconnected", { code: info.code });
  }

  /** The loop moved to another state. */
  state(state: ClientState): void {
    this.#core.link.setState(state);
  }

  /**
   * Says goodbye on a connection still open (`executor.close` with `reason`) and closes it with
   * 1000, waiting at most 2 s: a dead link may never complete the close handshake.
   */
  async close(connection: ClientConnection, reason: string): Promise<void> {
    const peer = connection.peer;
    if (peer.isClosed) return;
    try {
      peer.notify("executor.close", { reason });
    } catch {
      // The connection closed meanwhile.
    }
    const giveUp = new AbortController();
    await Promise.race([
      peer.close(1000, "executor stopped"),
      sleep(this.#core.clock, 2_000, giveUp.signal).catch(() => {}),
    ]);
    giveUp.abort();
  }

  /** Sessions the harness did not reattach after a reconnect are gone: clean them up. */
  #dropUnresumed(connection: ClientConnection): void {
    const sent = connection.resumeSent;
    const resumed = connection.registration.resumed_sessions;
    if (!sent || !Array.isArray(resumed)) return;
    const core = this.#core;
    const kept = new Set(resumed);
    for (const id of sent) {
      const session = core.sessions.get(id);
      if (!session || kept.has(id)) continue;
      core.logger.warn("session not resumed by the harness: cleaning up", { session_id: id });
      void core.endSession(session, "not_resumed", false);
    }
  }
}
