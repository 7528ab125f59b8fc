/**
 * The state machine of the edge harness over Durable Object storage (internal): executors,
 * sessions, tool calls and the requests the harness sends, each change written to storage
 * before anything depends on it. The object ({@linkcode HarnessObject}), the executor
 * connections and the brain API all act through one {@linkcode EdgeCore} per object instance;
 * the instance may be evicted between any two events, so it keeps no state of its own beyond
 * wake-ups for long polls in flight.
 */
import { LocalError, ProtocolError } from "../../protocol/errors.ts";
import { hasCapability } from "../../protocol/capabilities.ts";
import {
  type HarnessRequestMethod,
  METHOD_SPECS,
  type RequestMap,
} from "../../protocol/generated/contract.ts";
import { CloseCode, protocolErrorFromWire } from "../../protocol/generated/errors.ts";
import { exceedsBytes, isErrorObject } from "../../protocol/jsonrpc.ts";
import type { Logger } from "../../protocol/logger.ts";
import { ToolOutcomeUnknownError, type ToolOutcomeUnknownReason } from "../errors.ts";
import type { Authenticate } from "../principal.ts";
import { randomId } from "../../protocol/ids.ts";
import type { HarnessSettings } from "./config.ts";
import {
  type CallFailure,
  type CallRecord,
  type ConnectionAttachment,
  Deadlines,
  deleteKeys,
  deletePrefixes,
  EXECUTOR_EVENTS_KEPT,
  type ExecutorFeedEvent,
  type ExecutorFeedEventType,
  type ExecutorRecord,
  key,
  type OutgoingRecord,
  type SessionRecord,
  suffix,
} from "./store.ts";
import type { DurableObjectStateLike, WorkersWebSocket } from "./types.ts";

/** Why an executor is gone. */
export type ReleaseReason = "lease_expired" | "closed";

/** The executor could not be reached: not connected, or gone. */
export class ExecutorNotConnectedError extends LocalError {
  readonly executorId: string;
  constructor(executorId: string) {
    super(`executor ${executorId} is not connected`);
    this.name = "ExecutorNotConnectedError";
    this.executorId = executorId;
  }
}

/** The executor did not answer a request within the harness's request timeout. */
export class ReplyTimeoutError extends LocalError {
  readonly method: string;
  constructor(method: string) {
    super(`${method} got no answer in time`);
    this.name = "ReplyTimeoutError";
    this.method = method;
  }
}

/** What a sent request's response turned out to be. */
export type Reply = { ok: true; result: unknown } | { ok: false; error: Error };

interface ReplyWaiter {
  resolve(reply: Reply): void;
}

/** A sent request and its answer, for the brain API waiting on it. */
export interface SentRequest {
  readonly rpcId: string;
  readonly reply: Promise<Reply>;
}

const MAX_PROGRESS = 32;

/** The state machine of one harness object. */
export class EdgeCore {
  readonly state: DurableObjectStateLike;
  readonly settings: HarnessSettings;
  readonly logger: Logger;
  readonly authenticate: Authenticate | undefined;
  readonly deadlines: Deadlines;
  /** A random id of this in-memory instance: a new one after every eviction. */
  readonly instance: string = randomId("inst_");
  readonly startedAt: number = Date.now();

  #queue: Promise<unknown> = Promise.resolve();
  // Wake-ups for requests in flight only: a long poll or an awaited reply keeps the object
  // alive, so nothing here needs to outlive an eviction.
  readonly #replies = new Map<string, ReplyWaiter>();
  #changeWaiters = new Set<() => void>();

  constructor(
    state: DurableObjectStateLike,
    settings: HarnessSettings,
    logger: Logger,
    authenticate: Authenticate | undefined,
  ) {
    this.state = state;
    this.settings = settings;
    this.logger = logger;
    this.authenticate = authenticate;
    this.deadlines = new Deadlines(state.storage);
  }

  get storage(): DurableObjectStateLike["storage"] {
    return this.state.storage;
  }

  /**
   * Runs `fn` after every earlier task: frames, closes, alarms and brain mutations apply one at
   * a time and in arrival order, also across the awaits on storage inside them.
   */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /** Wakes every long poll: something they may be waiting for changed. */
  changed(): void {
    const waiters = this.#changeWaiters;
    this.#changeWaiters = new Set();
    for (const wake of waiters) wake();
  }

  /** Resolves at the next change, or after `ms`. */
  waitChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(0, ms));
      const waiters = this.#changeWaiters;
      function done() {
        clearTimeout(timer);
        waiters.delete(done);
        resolve();
      }
      waiters.add(done);
    });
  }

  // ---- sockets -------------------------------------------------------------------------------

  /** The attachment of a socket, if it is one of ours. */
  attachment(ws: WorkersWebSocket): ConnectionAttachment | undefined {
    const value = ws.deserializeAttachment() as ConnectionAttachment | null;
    return value && typeof value === "object" && typeof value.id === "string" ? value : undefined;
  }

  /** The open socket of a connection. */
  socket(connectionId: string): WorkersWebSocket | undefined {
    for (const ws of this.state.getWebSockets(connectionId)) {
      const att = this.attachment(ws);
      if (att?.id === connectionId && att.state !== "closed" && ws.readyState < 2) return ws;
    }
    return undefined;
  }

  /**
   * Closes a connection from this side: marks it closed, applies what its end means, then closes
   * the socket. Idempotent.
   */
  async closeConnection(
    ws: WorkersWebSocket,
    att: ConnectionAttachment,
    code: number,
    reason: string,
  ): Promise<void> {
    if (att.state !== "closed") {
      att.state = "closed";
      ws.serializeAttachment(att);
      await this.detach(att);
    }
    if (ws.readyState < 2) {
      try {
        ws.close(code, reason);
      } catch (error) {
        this.logger.debug("close failed", { error: String(error) });
      }
    }
  }

  /** A connection ended (either side): what it was doing moves on without it. */
  async detach(att: ConnectionAttachment): Promise<void> {
    await this.deadlines.clear(`token:${att.id}`);
    await this.deadlines.clear(`register:${att.id}`);
    const prefix = key.outgoingOf(att.id);
    const outgoing = await this.storage.list<OutgoingRecord>({ prefix });
    if (outgoing.size) await deleteKeys(this.storage, [...outgoing.keys()]);
    for (const [fullKey, out] of outgoing) {
      await this.#outgoingLost(att.id, out);
      this.#resolveReply(att.id, suffix(fullKey, prefix), {
        ok: false,
        error: new ExecutorNotConnectedError(att.executorId ?? "unknown"),
      });
    }
    const executorId = att.executorId;
    if (!executorId) return;
    const record = await this.storage.get<ExecutorRecord>(key.executor(executorId));
    if (!record || record.connection !== att.id) return;
    delete record.connection;
    if (att.forGood) {
      await this.release(record, "closed");
      return;
    }
    await this.storage.put(key.executor(executorId), record);
    this.logger.info("executor disconnected", { executor_id: executorId });
    await this.recordEvent("disconnected", record);
  }

  /** Appends to the executor feed (keeping the newest entries) and wakes long polls. */
  async recordEvent(
    type: ExecutorFeedEventType,
    record: ExecutorRecord,
    reason?: string,
  ): Promise<void> {
    const index = (await this.storage.get<number>(key.executorEventNext)) ?? 1;
    const event: ExecutorFeedEvent = {
      index,
      type,
      executor_id: record.id,
      name: record.info.name,
      ...(reason !== undefined ? { reason } : {}),
      at: new Date().toISOString(),
    };
    await this.storage.put({
      [key.executorEvent(index)]: event,
      [key.executorEventNext]: index + 1,
    });
    if (index > EXECUTOR_EVENTS_KEPT) {
      await this.storage.delete(key.executorEvent(index - EXECUTOR_EVENTS_KEPT));
    }
    this.changed();
  }

  // ---- requests to the executor --------------------------------------------------------------

  /**
   * Sends a harness request on the executor's connection and records it, so its response is
   * applied even by a later instance. Throws {@linkcode ExecutorNotConnectedError}, or the
   * protocol core's local errors for a method the executor cannot receive.
   */
  async request<M extends HarnessRequestMethod>(
    executor: ExecutorRecord,
    method: M,
    params: RequestMap[M]["params"],
    ref: string,
  ): Promise<SentRequest> {
    const connectionId = executor.connection;
    const ws = connectionId ? this.socket(connectionId) : undefined;
    if (!connectionId || !ws) throw new ExecutorNotConnectedError(executor.id);
    const spec = METHOD_SPECS.get(method)!;
    if (spec.since !== "bma.executor.v1" && executor.protocol === "bma.executor.v1") {
      throw new LocalError(`${method} is not available on ${executor.protocol}`);
    }
    if (spec.capability && !hasCapability(executor.capabilities, spec.capability)) {
      throw new LocalError(`${method} needs capability "${spec.capability}"`);
    }
    if (!spec.params.safeParse(params).success) {
      throw new LocalError(`params of ${method} do not match the contract`);
    }
    const rpcId = randomId("h_");
    const frame = JSON.stringify({ jsonrpc: "2.0", id: rpcId, method, params });
    if (exceedsBytes(frame, this.settings.maxFrameBytes)) {
      throw new LocalError(`${method} is over the frame size limit`);
    }
    const out: OutgoingRecord = { method, ref };
    await this.storage.put(key.outgoing(connectionId, rpcId), out);
    const reply = new Promise<Reply>((resolve) => {
      this.#replies.set(`${connectionId}:${rpcId}`, { resolve });
    });
    ws.send(frame);
    return { rpcId, reply };
  }

  /** Waits for a reply, at most the request timeout. */
  async awaitReply(method: string, sent: SentRequest): Promise<Reply> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<Reply>((resolve) => {
      timer = setTimeout(
        () => resolve({ ok: false, error: new ReplyTimeoutError(method) }),
        this.settings.requestTimeoutMs,
      );
    });
    try {
      return await Promise.race([sent.reply, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Applies a response of the executor to a request this harness sent. */
  async onResponse(att: ConnectionAttachment, message: Record<string, unknown>): Promise<void> {
    const id = message.id;
    if (typeof id !== "string") {
      this.logger.warn("response to an unknown request id ignored", { id: String(id) });
      return;
    }
    const storageKey = key.outgoing(att.id, id);
    const out = await this.storage.get<OutgoingRecord>(storageKey);
    if (!out) {
      this.logger.warn("response to an unknown request id ignored", { id });
      return;
    }
    await this.storage.delete(storageKey);
    let reply: Reply;
    if ("error" in message) {
      reply = isErrorObject(message.error) && !("result" in message)
        ? { ok: false, error: protocolErrorFromWire(message.error) }
        : { ok: false, error: new ProtocolError(-32603, "malformed error response") };
    } else {
      const checked = METHOD_SPECS.get(out.method)?.result?.safeParse(message.result);
      reply = checked?.success ? { ok: true, result: checked.data } : {
        ok: false,
        error: new LocalError(`result of ${out.method} does not match the contract`),
      };
    }
    await this.#applyReply(att.id, out, reply);
    this.#resolveReply(att.id, id, reply);
    this.changed();
  }

  #resolveReply(connectionId: string, rpcId: string, reply: Reply): void {
    const waiter = this.#replies.get(`${connectionId}:${rpcId}`);
    if (!waiter) return;
    this.#replies.delete(`${connectionId}:${rpcId}`);
    waiter.resolve(reply);
  }

  async #applyReply(connectionId: string, out: OutgoingRecord, reply: Reply): Promise<void> {
    if (out.method === "tool.call") {
      const call = await this.storage.get<CallRecord>(key.call(out.ref));
      if (!call || call.state === "settled" || call.dispatchedOn !== connectionId) return;
      if (reply.ok) {
        if (call.state === "dispatching") {
          call.state = "dispatched";
          await this.storage.put(key.call(out.ref), call);
        }
        return;
      }
      // A protocol error means the executor refused the call: it never ran.
      const failure: CallFailure = reply.error instanceof ProtocolError
        ? reply.error.toJSON()
        : unknownOutcome(call, "dispatch_failed");
      await this.failCall(call, failure);
      return;
    }
    if (out.method === "session.assign") {
      const session = await this.storage.get<SessionRecord>(key.session(out.ref));
      if (!session || session.state === "ended") return;
      if (reply.ok) {
        if (session.state === "assigning") {
          session.state = "assigned";
          await this.storage.put(key.session(out.ref), session);
        }
        return;
      }
      session.refusal = reply.error instanceof ProtocolError
        ? reply.error.toJSON()
        : { code: -32603, message: reply.error.message };
      await this.storage.put(key.session(out.ref), session);
      await this.endSession(out.ref, "refused", "session_ended");
      return;
    }
    if (out.method === "session.stop" && reply.ok) {
      const session = await this.storage.get<SessionRecord>(key.session(out.ref));
      if (!session || session.state === "ended") return;
      const result = reply.result as RequestMap["session.stop"]["result"];
      if (!result.stopping) {
        // The executor no longer holds it: no session.ended will come.
        await this.endSession(out.ref, "stopped", "session_ended");
        return;
      }
      session.state = "stopping";
      await this.storage.put(key.session(out.ref), session);
    }
  }

  /** A request's connection ended before its response. */
  async #outgoingLost(connectionId: string, out: OutgoingRecord): Promise<void> {
    if (out.method === "tool.call") {
      const call = await this.storage.get<CallRecord>(key.call(out.ref));
      // Sent again when the executor is back within its lease; it deduplicates by tool_call_id.
      if (call && call.state === "dispatching" && call.dispatchedOn === connectionId) {
        call.state = "queued";
        delete call.dispatchedOn;
        await this.storage.put(key.call(out.ref), call);
      }
      return;
    }
    if (out.method === "session.assign") {
      const session = await this.storage.get<SessionRecord>(key.session(out.ref));
      if (session && session.state === "assigning") {
        session.refusal = { code: -32603, message: "the executor disconnected before answering" };
        await this.storage.put(key.session(out.ref), session);
        await this.endSession(out.ref, "refused", "session_ended");
      }
    }
  }

  // ---- tool calls ----------------------------------------------------------------------------

  /** Sends `tool.call` for a call now, or leaves it queued until the executor is connected. */
  async dispatch(call: CallRecord): Promise<void> {
    if (call.state === "settled") return;
    const executor = await this.storage.get<ExecutorRecord>(key.executor(call.executorId));
    const connectionId = executor?.connection;
    if (!executor || !connectionId || !this.socket(connectionId)) {
      if (call.state !== "queued") {
        call.state = "queued";
        delete call.dispatchedOn;
        await this.storage.put(key.call(call.params.tool_call_id), call);
      }
      return;
    }
    call.state = "dispatching";
    call.dispatchedOn = connectionId;
    await this.storage.put(key.call(call.params.tool_call_id), call);
    try {
      await this.request(executor, "tool.call", call.params, call.params.tool_call_id);
    } catch (error) {
      await this.failCall(call, {
        code: "dispatch_failed",
        message: error instanceof Error ? error.message : String(error),
      });
    }
  }

  /** Sends every call of the executor that is not on `connectionId` yet. */
  async redispatch(executorId: string, connectionId: string): Promise<void> {
    const pending = await this.storage.list<string>({ prefix: key.pendingOf(executorId) });
    for (const fullKey of pending.keys()) {
      const callId = suffix(fullKey, key.pendingOf(executorId));
      const call = await this.storage.get<CallRecord>(key.call(callId));
      if (!call || call.state === "settled") continue;
      const unsent = call.state === "queued" ||
        (call.state === "dispatching" && call.dispatchedOn !== connectionId);
      if (unsent) await this.dispatch(call);
    }
  }

  /** Settles a call with a failure. */
  async failCall(call: CallRecord, failure: CallFailure): Promise<void> {
    if (call.state === "settled") return;
    call.state = "settled";
    call.error = failure;
    call.settledAt = Date.now();
    delete call.dispatchedOn;
    await this.storage.put(key.call(call.params.tool_call_id), call);
    await this.storage.delete(key.pending(call.executorId, call.params.tool_call_id));
    this.changed();
  }

  // ---- sessions and executors ----------------------------------------------------------------

  /**
   * Ends a session: its unsettled calls fail with `tool_outcome_unknown` (`toolReason`), and it
   * is purged after the retention period.
   */
  async endSession(
    sessionId: string,
    reason: string,
    toolReason: ToolOutcomeUnknownReason,
  ): Promise<void> {
    const session = await this.storage.get<SessionRecord>(key.session(sessionId));
    if (!session || session.state === "ended") return;
    session.state = "ended";
    session.endReason = reason;
    session.endedAt = Date.now();
    await this.storage.put(key.session(sessionId), session);
    await this.storage.delete(key.executorSession(session.executorId, sessionId));
    await this.deadlines.clear(`stop:${sessionId}`);
    const prefix = key.pendingOf(session.executorId);
    const pending = await this.storage.list<string>({ prefix });
    for (const [fullKey, callSession] of pending) {
      if (callSession !== sessionId) continue;
      const call = await this.storage.get<CallRecord>(key.call(suffix(fullKey, prefix)));
      if (call) await this.failCall(call, unknownOutcome(call, toolReason));
    }
    await this.deadlines.set(`purge:${sessionId}`, Date.now() + this.settings.retentionMs);
    this.logger.info("session ended", { session_id: sessionId, reason });
    this.changed();
  }

  /** Forgets an ended session, its events and its calls. */
  async purgeSession(sessionId: string): Promise<void> {
    const session = await this.storage.get<SessionRecord>(key.session(sessionId));
    if (!session || session.state !== "ended") return;
    const calls = await this.storage.list({ prefix: key.sessionCalls(sessionId) });
    await deleteKeys(
      this.storage,
      [...calls.keys()].map((k) => key.call(suffix(k, key.sessionCalls(sessionId)))),
    );
    await deletePrefixes(this.storage, [
      key.sessionCalls(sessionId),
      key.events(sessionId),
      `er:${sessionId}:`,
      `ee:${sessionId}:`,
    ]);
    await this.storage.delete(key.session(sessionId));
  }

  /**
   * The executor is gone for good: its sessions end, its unsettled calls fail with
   * `tool_outcome_unknown`, and its connection (if any) closes with `closeCode`.
   */
  async release(record: ExecutorRecord, reason: ReleaseReason, closeCode?: number): Promise<void> {
    const toolReason: ToolOutcomeUnknownReason = reason === "closed" ? "executor_closed" : reason;
    await this.storage.delete(key.executor(record.id));
    await this.deadlines.clear(`lease:${record.id}`);
    const sessions = await this.storage.list({ prefix: key.executorSessions(record.id) });
    for (const fullKey of sessions.keys()) {
      await this.endSession(suffix(fullKey, key.executorSessions(record.id)), reason, toolReason);
    }
    const prefix = key.pendingOf(record.id);
    const pending = await this.storage.list<string>({ prefix });
    for (const fullKey of pending.keys()) {
      const call = await this.storage.get<CallRecord>(key.call(suffix(fullKey, prefix)));
      if (call) await this.failCall(call, unknownOutcome(call, toolReason));
      else await this.storage.delete(fullKey);
    }
    this.logger.info("executor gone", { executor_id: record.id, reason });
    await this.recordEvent("gone", record, reason);
    const connectionId = record.connection;
    const ws = connectionId ? this.socket(connectionId) : undefined;
    if (ws && closeCode !== undefined) {
      const att = this.attachment(ws)!;
      await this.closeConnection(ws, att, closeCode, reason.replace("_", " "));
    }
  }

  /** Runs the deadlines that are due; returns nothing, re-arms the alarm. */
  async runDeadlines(now: number): Promise<void> {
    for (const name of await this.deadlines.takeDue(now)) {
      const at = name.indexOf(":");
      const kind = name.slice(0, at);
      const ref = name.slice(at + 1);
      try {
        await this.#deadline(kind, ref, now);
      } catch (error) {
        this.logger.error("deadline failed", { deadline: kind, error: String(error) });
      }
    }
    await this.deadlines.rearm();
  }

  async #deadline(kind: string, ref: string, now: number): Promise<void> {
    if (kind === "lease") {
      const record = await this.storage.get<ExecutorRecord>(key.executor(ref));
      if (!record) return;
      // Heartbeats only move the lease in its record; the deadline catches up when it fires.
      if (record.leaseExpiresAt > now) {
        await this.deadlines.set(`lease:${ref}`, record.leaseExpiresAt);
        return;
      }
      this.logger.warn("executor lease expired", { executor_id: ref });
      await this.release(record, "lease_expired", CloseCode.LEASE_EXPIRED);
      return;
    }
    if (kind === "token" || kind === "register") {
      const ws = this.socket(ref);
      if (!ws) return;
      const att = this.attachment(ws)!;
      if (kind === "register") {
        if (att.state === "unregistered") {
          await this.closeConnection(
            ws,
            att,
            CloseCode.POLICY_VIOLATION,
            "executor.register not received",
          );
        }
        return;
      }
      const expiresAt = att.principal.expiresAt;
      if (expiresAt !== undefined && expiresAt > now) {
        await this.deadlines.set(`token:${ref}`, expiresAt);
        return;
      }
      this.logger.info("executor token expired: closing", { executor_id: att.executorId });
      await this.closeConnection(ws, att, CloseCode.TOKEN_EXPIRED, "token expired");
      return;
    }
    if (kind === "stop") {
      const session = await this.storage.get<SessionRecord>(key.session(ref));
      if (session?.state === "stopping") {
        this.logger.warn("session.ended did not arrive: ending the session", { session_id: ref });
        await this.endSession(ref, "stop_timeout", "session_ended");
      }
      return;
    }
    if (kind === "purge") await this.purgeSession(ref);
  }
}

/** The failure of a call whose outcome can no longer be known. */
export function unknownOutcome(call: CallRecord, reason: ToolOutcomeUnknownReason): CallFailure {
  const error = new ToolOutcomeUnknownError(
    call.params.tool_call_id,
    call.params.session_id,
    reason,
  );
  return { code: "tool_outcome_unknown", message: error.message, data: { reason } };
}

/** Adds a progress notification to a call, keeping the newest few (progress is lossy anyway). */
export function pushProgress(call: CallRecord, progress: CallRecord["progress"][number]): void {
  call.progress.push(progress);
  if (call.progress.length > MAX_PROGRESS) {
    call.progress.splice(0, call.progress.length - MAX_PROGRESS);
  }
}
