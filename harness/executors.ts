/**
 * The executors a harness holds: registration (admission and identity), reconnects with
 * `resume` within the lease, heartbeats, capability updates, drain, and the end — lease
 * expired, closed for good, or the harness closed.
 *
 * Each executor is written to the store when it registers (and when its capabilities, drain or
 * connection change), so a harness started again on the store holds the same executors. A lease
 * runs on the harness's clock; across the harness's own downtime it does not: a harness that
 * recovers from its store gives every executor a full lease (two heartbeat intervals) from the
 * moment it recovers, so its downtime counts against no executor — unless it recovers leases
 * as stored ({@linkcode RecoveredLeases}), the policy of an edge harness that is made again on
 * every wake-up.
 */
import { aborted } from "../protocol/abort.ts";
import type { CallOptions, ReplyHooks } from "../protocol/peer.ts";
import { hasCapability } from "../protocol/capabilities.ts";
import type {
  Capabilities,
  ExecutorDrainParams,
  ExecutorDrainResult,
  ExecutorHeartbeatResult,
  ExecutorRegisterParams,
  ExecutorRegisterResult,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  NotificationMap,
  ProtocolVersion,
  RequestMap,
} from "../protocol/generated/contract.ts";
import {
  CapabilityMissingError,
  CloseCode,
  ForbiddenError,
  ProtocolMismatchError,
  UnavailableError,
} from "../protocol/generated/errors.ts";
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import { randomId } from "../protocol/ids.ts";
import { spanning, type Telemetry } from "../protocol/telemetry.ts";
import { traceContext } from "../protocol/trace-context.ts";
import type { ToolOutcomeUnknownReason } from "./errors.ts";
import type { TracedCallOptions } from "./handle-options.ts";
import type { ExecutorOps } from "./handle-services.ts";
import type { ExecutorEvent } from "./handles.ts";
import type { ExecutorGoneReason } from "./lifecycle.ts";
import type { Leases } from "./lease.ts";
import { then } from "./maybe.ts";
import type { HarnessObservation, Observers } from "./observe.ts";
import { type Principal, registrationClaim, samePrincipal } from "./principal.ts";
import {
  type ExecutorRecord,
  keys,
  type StoredPrincipal,
  type StoredRegistration,
} from "./records.ts";
import { notify, repeatable, repeatedAcrossReconnects, request } from "./send.ts";
import type { Sessions } from "./sessions.ts";
import {
  type EntryServices,
  ExecutorEntry,
  type ExecutorInit,
  type ExecutorLink,
} from "./state.ts";
import {
  type HarnessStore,
  isPromiseLike,
  type MaybePromise,
  type StoreOp,
} from "./store/store.ts";
import type { ToolCalls } from "./tool-calls.ts";
import { storeUnavailable } from "./tool-call-ledger.ts";
import { outgoing, traced } from "./tracing.ts";

/**
 * How a harness started on a store sets the leases of the executors it reads back:
 * - `fresh` (the default): a full lease from now for each, so the harness's downtime (a crash,
 *   a deploy) counts against no executor;
 * - `stored`: an executor that had no connection when its record was written (it disconnected)
 *   continues the lease it had, to its stored expiry; one that was connected gets a full lease
 *   from now, unless a connection restored from its snapshot in the same task moves it
 *   (`Harness.restore`). Either way the expiry is then in the store as a running lease, so a
 *   harness made again on the store before it passes (a Durable Object woken by its alarm, or
 *   by any event, after an eviction) continues it rather than renewing it again: an executor
 *   that never comes back expires however often the harness is made anew.
 */
export type RecoveredLeases = "fresh" | "stored";

/** A connection on which an executor registers (internal). */
export interface RegisteringConnection extends ExecutorLink {
  readonly protocol: ProtocolVersion;
  /** What `authenticate` returned (replaced by a refreshed token's). */
  readonly principal: Principal;
  /** No `authenticate` ran: what the executor registers as is believed. */
  readonly trusted: boolean;
  /** Binds the executor that registered on it. */
  bind(executor: ExecutorEntry): void;
  close(code: number, reason: string): unknown;
}

/** What a registration changes of its executor's entry (and record). */
type RegistrationChange = Pick<ExecutorEntry, "register" | "capabilities" | "epoch">;

/** What the executors need from the harness. */
export interface ExecutorsDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: HarnessStore | undefined;
  readonly leases: Leases;
  readonly observers: Observers;
  readonly sessions: Sessions;
  readonly calls: ToolCalls;
  readonly services: EntryServices;
  readonly heartbeatIntervalMs: number;
  readonly requestTimeoutMs: number | undefined;
  readonly fileServiceUrl: string | undefined;
  /** How the leases of executors read back from the store are set. */
  readonly recoveredLeases: RecoveredLeases;
  /** Reports an executor change to `onExecutor` listeners. */
  readonly emit: (event: ExecutorEvent) => void;
  /** Opens the client spans of traced requests (`turn.start`); absent without telemetry. */
  readonly telemetry?: Telemetry;
}

/** The executors of one harness. */
export class Executors implements ExecutorOps<ExecutorEntry> {
  /** The executors held (registered, lease not expired), in registration order. */
  readonly byId = new Map<string, ExecutorEntry>();
  readonly #deps: ExecutorsDeps;
  readonly #onLeaseExpired = (executor: ExecutorEntry) => this.#expire(executor);
  /** Executors whose stored record says they have no connection (`stored` leases only). */
  readonly #detachedInStore = new Set<string>();
  /**
   * Executors released whose record the store may still hold (its deletion failed, or a late
   * write put it back), each with a token of that release: deleted with the next executor
   * record written, so a harness started on the store does not take them, and the sessions the
   * store still says are theirs, as live.
   */
  readonly #unforgotten = new Map<string, object>();

  constructor(deps: ExecutorsDeps) {
    this.#deps = deps;
  }

  get fileServiceUrl(): string | undefined {
    return this.#deps.fileServiceUrl;
  }

  // ---- registration ------------------------------------------------------------------------------

  /**
   * `executor.register` on `connection`: checks the protocol, the claim against the principal and
   * the capabilities, chooses the executor id, binds the connection and reattaches the sessions
   * `resume` names (the others end). Throws the contract's error to refuse.
   */
  register(
    connection: RegisteringConnection,
    params: ExecutorRegisterParams,
    reply: ReplyHooks,
  ): MaybePromise<ExecutorRegisterResult> {
    if (params.protocol !== connection.protocol) {
      reply.afterReply(() => connection.close(CloseCode.PROTOCOL_MISMATCH, "protocol mismatch"));
      throw new ProtocolMismatchError("protocol mismatch", {
        reason: "protocol_mismatch",
        expected: connection.protocol,
        received: params.protocol,
      });
    }
    const principal = connection.principal;
    const claim = registrationClaim(principal, params, connection.trusted);
    if (claim.kind === "refused") throw new ForbiddenError(claim.why, { reason: "forbidden" });
    if (
      params.environment_id === "" && !hasCapability(params.capabilities, "process") &&
      !hasCapability(params.capabilities, "agent")
    ) {
      // No runtime is bound: the connection stays unregistered and may register again.
      throw new CapabilityMissingError("capability missing", {
        reason: "capability_missing",
        capability: "process",
      });
    }
    const id = claim.kind === "fixed"
      ? claim.executorId
      : this.#resumedId(principal, params) ?? randomId("exec_");
    let executor = this.byId.get(id);
    const known = executor !== undefined && !executor.gone;
    if (known && !samePrincipal(executor!.principal, principal)) {
      // The id is another credential's while the harness holds it: its connection stays.
      throw new ForbiddenError("the executor id belongs to another credential", {
        reason: "forbidden",
      });
    }
    const created = !executor || executor.gone !== undefined;
    if (created) {
      executor = this.#entry({
        id,
        principal,
        register: registration(params),
        capabilities: params.capabilities,
        epoch: 0,
        draining: false,
      });
      this.byId.set(id, executor);
    }
    const entry = executor!;
    const previous = entry.connection;
    const resumes = params.resume?.executor_id === id;
    // What this registration makes of the entry, applied once it is recorded: a known executor
    // keeps its registration, capabilities and epoch (and its connection works on with them)
    // if the store refuses the new ones or the new connection closes meanwhile.
    const next: RegistrationChange = {
      register: registration(params),
      capabilities: params.capabilities,
      epoch: resumes ? entry.epoch : entry.epoch + 1,
    };
    if (created) Object.assign(entry, next);
    // A register the store could not record is refused: an executor it made is not kept.
    const forget = (error: unknown): never => {
      if (created && this.byId.get(id) === entry) this.byId.delete(id);
      throw error;
    };
    // Recorded before the answer: a harness started again on the store knows the executor.
    let written: MaybePromise<void>;
    try {
      written = this.#write(entry, false, next);
    } catch (error) {
      return forget(error);
    }
    const attach = (): MaybePromise<ExecutorRegisterResult> => {
      // Released while its record was being written (its lease ran out while the store did not
      // answer): bound to that entry it would be connected but listed nowhere.
      if (entry.gone) return this.#registerAgain(connection, params, reply, entry);
      // Its connection closed meanwhile: bound, the executor would look connected until its
      // lease ran out. It stays as it was, and its record says so.
      if (connection.peer.isClosed) return this.#closedMeanwhile(entry, created);
      Object.assign(entry, next);
      connection.bind(entry);
      entry.connection = connection;
      connection.peer.capabilities = params.capabilities;
      if (previous && previous !== connection) {
        this.#deps.logger.info("executor replaced by a new registration", { executor_id: id });
        previous.replaced();
      }
      const resumed = this.#deps.sessions.lost(
        entry,
        new Set(resumes ? params.resume!.active_sessions : []),
      );
      const expiresAt = entry.lease!.renew();
      this.#deps.logger.info(known ? "executor reconnected" : "executor registered", {
        executor_id: id,
        protocol: connection.protocol,
        resumed_sessions: resumed.length,
      });
      // Once the executor has its register result: lossy output sent meanwhile is read back,
      // and calls that could not be sent, or whose ack was lost, go out again (it
      // deduplicates them by tool_call_id); then the listeners hear of it.
      reply.afterReply(() => {
        if (entry.connection !== connection) return;
        this.#deps.sessions.resumed(entry, resumed);
        this.#deps.calls.redispatch(entry, connection);
        entry.connectedAgain();
      });
      const event: ExecutorEvent = {
        type: known ? "reconnected" : "registered",
        executor: entry.handle,
      };
      reply.afterReply(() => this.#deps.emit(event));
      this.#observeArrival(entry, known, resumed, expiresAt);
      return {
        executor_id: id,
        protocol: connection.protocol,
        heartbeat_interval_ms: this.#deps.heartbeatIntervalMs,
        lease_expires_at: new Date(expiresAt).toISOString(),
        ...(params.resume ? { resumed_sessions: resumed } : {}),
      };
    };
    return isPromiseLike(written) ? Promise.resolve(written).then(attach, forget) : attach();
  }

  /**
   * The registration of `released` was recorded after the harness had released it: it is made
   * again, as if it had arrived now (a `resume` of the released executor gets a new id and no
   * session, as after any expired lease), unless the harness itself closed.
   */
  #registerAgain(
    connection: RegisteringConnection,
    params: ExecutorRegisterParams,
    reply: ReplyHooks,
    released: ExecutorEntry,
  ): MaybePromise<ExecutorRegisterResult> {
    if (released.gone === "harness_closed") {
      throw new UnavailableError("the harness is closed", { reason: "backend_unavailable" });
    }
    this.#deps.logger.info(
      "executor released while its registration was recorded: registering it again",
      { executor_id: released.id, reason: released.gone },
    );
    // Its record was written again after the release had it deleted: deleted with the next one.
    this.#unforgotten.set(released.id, {});
    return this.register(connection, params, reply);
  }

  /**
   * The connection of a registration closed while the store recorded it: an executor it made is
   * not kept, one it reconnected stays without a connection, and the store is told either.
   * Refused (the answer goes nowhere).
   */
  #closedMeanwhile(entry: ExecutorEntry, created: boolean): never {
    if (created) {
      if (this.byId.get(entry.id) === entry) {
        this.byId.delete(entry.id);
        this.#forgetInStore(entry.id);
      }
    } else {
      // The record holds what the registration would have made: written back as it stays.
      this.#safely(() => this.#write(entry));
    }
    throw new UnavailableError("the connection closed", { reason: "backend_unavailable" });
  }

  /**
   * The id a `resume` keeps: that of a live executor of the same environment registered by the
   * same principal; anyone else's resume gets a new id (see {@linkcode registrationClaim}).
   */
  #resumedId(principal: Principal, params: ExecutorRegisterParams): string | undefined {
    const resumeId = params.resume?.executor_id;
    if (!resumeId) return undefined;
    const previous = this.byId.get(resumeId);
    return previous && !previous.gone &&
        previous.register.environment_id === params.environment_id &&
        samePrincipal(previous.principal, principal)
      ? resumeId
      : undefined;
  }

  #entry(init: ExecutorInit): ExecutorEntry {
    const entry = new ExecutorEntry(init, this.#deps.services, this.#onLeaseExpired);
    entry.lease = this.#deps.leases.lease(entry);
    return entry;
  }

  // ---- what the executor sends -------------------------------------------------------------------

  /** `executor.heartbeat`: renews the lease. */
  heartbeat(executor: ExecutorEntry): ExecutorHeartbeatResult {
    const expiresAt = executor.lease!.renew();
    this.#observe((at) => ({ type: "executor.lease", at, executorId: executor.id, expiresAt }));
    return { drain: executor.draining, lease_expires_at: new Date(expiresAt).toISOString() };
  }

  /** `executor.capabilities.update`. */
  updateCapabilities(executor: ExecutorEntry, capabilities: Capabilities): void {
    executor.capabilities = capabilities;
    if (executor.connection) executor.connection.peer.capabilities = capabilities;
    this.#safely(() => this.#write(executor));
    this.#observe((at) => ({
      type: "executor.capabilities",
      at,
      executorId: executor.id,
      capabilities,
    }));
  }

  /**
   * The connection `link` of `executor` ended; `forGood` when the executor sent
   * `executor.close` first. It may come back within its lease.
   */
  detach(executor: ExecutorEntry, link: ExecutorLink, forGood: boolean): void {
    if (executor.connection !== link) return;
    executor.connection = undefined;
    const channels = executor.channels;
    executor.channels = undefined;
    for (const channel of [...channels?.values() ?? []]) {
      // The server may live on with the session, but messages in flight are lost: the MCP
      // client sees the channel end and opens a new one after the executor is back.
      channel.end("disconnected");
    }
    if (forGood) {
      this.release(executor, "closed");
      return;
    }
    // The lease runs on without heartbeats: what a store-backed edge harness needs to expire
    // it after an eviction.
    this.#safely(() => this.#write(executor, true));
    this.#observe((at) => ({
      type: "executor.disconnected",
      at,
      executorId: executor.id,
      leaseExpiresAt: executor.lease?.expiresAt,
    }));
    this.#deps.emit({ type: "disconnected", executor: executor.handle });
  }

  // ---- what the brain sends ----------------------------------------------------------------------

  request<M extends HarnessRequestMethod>(
    executor: ExecutorEntry,
    method: M,
    params: RequestMap[M]["params"],
    options: TracedCallOptions = {},
  ): Promise<RequestMap[M]["result"]> {
    let sent = params;
    let rest: CallOptions = options;
    if (options.trace !== undefined) {
      // Only a context the caller gave: a request of the harness's own carries none.
      const { trace, ...others } = options;
      sent = traced(params, traceContext(trace));
      rest = others;
    }
    const send = () => request(executor, method, sent, rest, this.#deps.requestTimeoutMs);
    return repeatable(method, sent)
      ? repeatedAcrossReconnects(executor, send, rest.signal)
      : send();
  }

  // Typed by the interface, its signature not written twice.
  readonly traced: ExecutorOps<ExecutorEntry>["traced"] = (
    executor,
    name,
    params,
    options,
    send,
  ) => {
    const telemetry = this.#deps.telemetry;
    if (options.trace === undefined && !telemetry) return send(params, options);
    const { trace, ...rest } = options;
    const attributes: Record<string, string> = { "bma.executor_id": executor.id };
    const ids = params as { session_id?: unknown; turn_id?: unknown };
    if (typeof ids.session_id === "string") attributes["bma.session_id"] = ids.session_id;
    if (typeof ids.turn_id === "string") attributes["bma.turn_id"] = ids.turn_id;
    const out = outgoing(telemetry, name, attributes, trace);
    return spanning(out.span, () => send(traced(params, out.trace), rest)) as ReturnType<
      typeof send
    >;
  };

  notify<M extends HarnessNotificationMethod>(
    executor: ExecutorEntry,
    method: M,
    params: NotificationMap[M],
  ): void {
    notify(executor, method, params);
  }

  drain(
    executor: ExecutorEntry,
    params: ExecutorDrainParams,
    options: CallOptions,
  ): Promise<ExecutorDrainResult> {
    // An already-aborted drain changes nothing (it marked the executor draining, untold).
    const refused = aborted(options.signal, "executor.drain");
    if (refused) return refused;
    if (!executor.draining) {
      executor.draining = true;
      this.#safely(() => this.#write(executor));
      this.#observe((at) => ({
        type: "executor.draining",
        at,
        executorId: executor.id,
      }));
    }
    return this.request(executor, "executor.drain", params, options);
  }

  async close(executor: ExecutorEntry, reason: string): Promise<void> {
    const connection = executor.connection;
    this.release(executor, "closed");
    if (connection) {
      try {
        connection.peer.notify("executor.close", { reason });
      } catch {
        // Already closed: nothing to tell.
      }
      await connection.peer.close(CloseCode.NORMAL, reason);
    }
  }

  // ---- the end -----------------------------------------------------------------------------------

  /**
   * Ends an executor for good: its sessions end and its pending tool calls fail with
   * `ToolOutcomeUnknownError`. When the harness closes (`harness_closed`) nothing of it is
   * written: a harness started again on the store holds it as before.
   */
  release(executor: ExecutorEntry, reason: ExecutorGoneReason): void {
    if (executor.gone) return;
    const record = reason !== "harness_closed";
    executor.gone = reason;
    executor.lease?.end();
    executor.connection = undefined;
    const toolReason: ToolOutcomeUnknownReason = reason === "closed" ? "executor_closed" : reason;
    const sessions = this.#deps.sessions;
    for (const session of [...executor.sessions?.values() ?? []]) {
      sessions.end(session, reason, toolReason, record ? "record" : "skip");
    }
    this.#deps.calls.failPending({ executorId: executor.id }, toolReason, record);
    const channels = executor.channels;
    executor.channels = undefined;
    for (const channel of [...channels?.values() ?? []]) channel.end(reason);
    if (this.byId.get(executor.id) === executor) this.byId.delete(executor.id);
    this.#detachedInStore.delete(executor.id);
    const store = this.#deps.store;
    if (store && record) this.#forgetInStore(executor.id);
    this.#deps.logger.info("executor gone", { executor_id: executor.id, reason });
    this.#observe((at) => ({
      type: "executor.gone",
      at,
      executorId: executor.id,
      reason,
    }));
    this.#deps.emit({ type: "gone", executor: executor.handle, reason });
    executor.settleClosed(reason);
  }

  #expire(executor: ExecutorEntry): void {
    this.#deps.logger.warn("executor lease expired", { executor_id: executor.id });
    const connection = executor.connection;
    this.release(executor, "lease_expired");
    connection?.peer.close(CloseCode.LEASE_EXPIRED, "lease expired");
  }

  // ---- the store ---------------------------------------------------------------------------------

  /**
   * Reads back the executors a previous run of the harness left in the store, each with a lease
   * set by the harness's {@linkcode RecoveredLeases} policy: they reconnect and resume within
   * it, or expire. A lease given from now lasts `graceMs` longer (the time executors take to
   * notice that the harness they were attached to is gone).
   */
  recover(graceMs = 0): MaybePromise<void> {
    const store = this.#deps.store;
    if (!store) return;
    return then(store.list<ExecutorRecord>(keys.executors), (rows) => {
      const stored = this.#deps.recoveredLeases === "stored";
      const renewed: ExecutorEntry[] = [];
      for (const [, record] of rows) {
        if (this.byId.has(record.id)) continue;
        const entry = this.#entry(record);
        this.byId.set(record.id, entry);
        if (stored && record.detached && record.leaseExpiresAt !== undefined) {
          entry.lease!.extend(record.leaseExpiresAt);
          this.#detachedInStore.add(record.id);
        } else {
          const expiry = entry.lease!.renew();
          if (graceMs > 0) entry.lease!.extend(expiry + graceMs);
          if (stored) renewed.push(entry);
        }
      }
      if (renewed.length === 0) return;
      // Recorded as running leases once this task is over: a connection restored in it (the
      // socket outlived the harness) keeps its executor's record as it is.
      queueMicrotask(() => {
        for (const entry of renewed) {
          if (entry.gone || entry.connection) continue;
          this.#detachedInStore.add(entry.id);
          this.#safely(() => this.#write(entry, true));
        }
      });
    });
  }

  /**
   * A connection of `executor` was restored from its snapshot (`Harness.restore`): a stored
   * record that says it has none is written again.
   */
  restored(executor: ExecutorEntry): void {
    if (this.#detachedInStore.has(executor.id)) this.#safely(() => this.#write(executor, false));
  }

  /**
   * Deletes a released executor's record and its sessions' index; when the store does not take
   * it (down, or refusing), the deletion goes with the next executor record written.
   */
  #forgetInStore(id: string): void {
    const token = {};
    this.#unforgotten.set(id, token);
    const done = () => {
      if (this.#unforgotten.get(id) === token) this.#unforgotten.delete(id);
    };
    this.#safely(() => then(this.#deps.store!.write(forgetOps(id)), done));
  }

  /**
   * Writes the executor's record; `detached` when no connection holds it (default: whether
   * none does now). A released executor's is not written (a late detach or drain would put it
   * back); the deletions the store has not taken go with it.
   */
  #write(
    executor: ExecutorEntry,
    detached: boolean = executor.connection === undefined,
    change?: RegistrationChange,
  ): MaybePromise<void> {
    const store = this.#deps.store;
    if (!store || executor.gone) return;
    if (detached) this.#detachedInStore.add(executor.id);
    else this.#detachedInStore.delete(executor.id);
    const record: ExecutorRecord = {
      id: executor.id,
      principal: storedPrincipal(executor.principal),
      register: change?.register ?? executor.register,
      capabilities: change?.capabilities ?? executor.capabilities,
      epoch: change?.epoch ?? executor.epoch,
      draining: executor.draining,
      ...(executor.lease?.expiresAt !== undefined
        ? { leaseExpiresAt: executor.lease.expiresAt }
        : {}),
      ...(detached ? { detached: true } : {}),
    };
    const put: StoreOp = { put: keys.executor(executor.id), value: record };
    // Most writes carry no deletion the store missed: one op, and nothing to settle after.
    const forgotten = this.#unforgotten.size === 0 ? undefined : [...this.#unforgotten];
    const batch: StoreOp[] = [];
    for (const [id] of forgotten ?? []) {
      // The same id registered anew: its record is put again, its old sessions' index goes.
      if (id === executor.id) batch.push({ deletePrefix: keys.executorSessions(id) });
      else batch.push(...forgetOps(id));
    }
    batch.push(put);
    const done = () => {
      for (const [id, token] of forgotten ?? []) {
        if (this.#unforgotten.get(id) === token) this.#unforgotten.delete(id);
      }
    };
    try {
      const written = store.write(batch);
      return isPromiseLike(written)
        ? Promise.resolve(written).then(done, () => Promise.reject(storeUnavailable("executor")))
        : done();
    } catch {
      throw storeUnavailable("executor");
    }
  }

  /** A store call whose failure is logged, not thrown (not an acknowledgement). */
  #safely(fn: () => MaybePromise<void>): void {
    const failed = (error: unknown) =>
      this.#deps.logger.warn("harness store write failed", { error: String(error) });
    try {
      const result = fn();
      if (isPromiseLike(result)) Promise.resolve(result).catch(failed);
    } catch (error) {
      failed(error);
    }
  }

  /** Tells the observers, when any listen: only then is the observation built. */
  #observe(observation: (at: number) => HarnessObservation): void {
    const observers = this.#deps.observers;
    if (observers.active) observers.emit(observation(this.#deps.clock.now()));
  }

  #observeArrival(
    executor: ExecutorEntry,
    known: boolean,
    resumed: readonly string[],
    expiresAt: number,
  ): void {
    this.#observe((at) => ({
      type: known ? "executor.reconnected" : "executor.registered",
      at,
      executorId: executor.id,
      protocol: executor.register.protocol,
      info: executor.register.executor,
      capabilities: executor.capabilities,
      resumedSessions: resumed,
      leaseExpiresAt: expiresAt,
    }));
  }
}

/** Deletes a released executor's record and its sessions' index. */
function forgetOps(id: string): StoreOp[] {
  return [{ delete: keys.executor(id) }, { deletePrefix: keys.executorSessions(id) }];
}

/** What `executor.register` said that the harness keeps. */
function registration(params: ExecutorRegisterParams): StoredRegistration {
  return {
    protocol: params.protocol,
    executor: params.executor,
    environment_id: params.environment_id,
    ...(params.machine_id !== undefined ? { machine_id: params.machine_id } : {}),
    ...(params.max_sessions !== undefined ? { max_sessions: params.max_sessions } : {}),
  };
}

/** A principal's identity, as stored. */
function storedPrincipal(principal: Principal): StoredPrincipal {
  return {
    ...(principal.scope !== undefined ? { scope: principal.scope } : {}),
    ...(principal.environmentId !== undefined ? { environmentId: principal.environmentId } : {}),
    ...(principal.machineId !== undefined ? { machineId: principal.machineId } : {}),
    ...(principal.credentialId !== undefined ? { credentialId: principal.credentialId } : {}),
    ...(principal.executorId !== undefined ? { executorId: principal.executorId } : {}),
  };
}
