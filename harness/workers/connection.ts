/**
 * One frame from an executor, served against storage (internal). A fresh {@linkcode Peer} reads
 * each request or notification, so validation, admission and error answers are exactly the
 * portable core's; responses to the harness's own requests are matched against the requests
 * recorded in storage, since the instance that sent them may have been evicted since.
 */
import { Peer } from "../../protocol/peer.ts";
import type { Transport } from "../../transport/transport.ts";
import type { JsonRpcId } from "../../protocol/jsonrpc.ts";
import {
  DEFAULT_MAX_DEPTH,
  exceedsBytes,
  exceedsDepth,
  withoutDeepValues,
} from "../../protocol/jsonrpc.ts";
import {
  AgentEventSchema,
  type ExecutorRegisterParams,
  type ExecutorRegisterResult,
  type SessionEventParams,
  type SessionEventResult,
  type ToolResultParams,
} from "../../protocol/generated/contract.ts";
import {
  CapabilityMissingError,
  CloseCode,
  ConflictError,
  ErrorCode,
  ForbiddenError,
  InvalidParamsError,
  NotFoundError,
  ProtocolMismatchError,
} from "../../protocol/generated/errors.ts";
import { hasCapability } from "../../protocol/capabilities.ts";
import type { Principal } from "../principal.ts";
import { randomId } from "../token-endpoint.ts";
import type { ToolCallResult } from "../tool-call-ledger.ts";
import { type EdgeCore, pushProgress } from "./core.ts";
import {
  type CallRecord,
  type ConnectionAttachment,
  type ExecutorRecord,
  key,
  type SessionRecord,
  type StoredPrincipal,
  storePrincipal,
  suffix,
} from "./store.ts";
import type { WorkersWebSocket } from "./types.ts";

/** Requests refused before `executor.register` that close the connection with 1008. */
const MAX_UNREGISTERED_REQUESTS = 16;
const MESSAGE_TOO_BIG = 1009;

type After = () => Promise<void> | void;

/** Serves one frame that arrived on `ws`. Call it inside `core.serial`. */
export async function serveFrame(
  core: EdgeCore,
  ws: WorkersWebSocket,
  att: ConnectionAttachment,
  frame: string,
): Promise<void> {
  if (att.state === "closed") return;
  if (exceedsBytes(frame, core.settings.maxFrameBytes)) {
    core.logger.warn("frame over the size limit: closing", { limit: core.settings.maxFrameBytes });
    await core.closeConnection(ws, att, MESSAGE_TOO_BIG, "frame too large");
    return;
  }
  let message: unknown;
  const tooDeep = exceedsDepth(frame, DEFAULT_MAX_DEPTH);
  try {
    // A frame nested too deep is not parsed whole: its envelope says what it is, and the peer
    // below refuses a request with -32600 too_deep, as every peer does.
    message = JSON.parse(tooDeep ? withoutDeepValues(frame, DEFAULT_MAX_DEPTH) : frame);
  } catch {
    message = undefined; // the peer below answers -32700
  }
  if (isResponse(message)) {
    await core.onResponse(
      att,
      tooDeep
        ? {
          id: message.id,
          error: {
            code: ErrorCode.INVALID_REQUEST,
            message: "response nested too deep",
            data: { reason: "too_deep", max_depth: DEFAULT_MAX_DEPTH },
          },
        }
        : message,
    );
    return;
  }
  const expectsAnswer = typeof message === "object" && message !== null &&
    !Array.isArray(message) && "id" in message && "method" in message;

  let answered!: () => void;
  const answer = new Promise<void>((resolve) => (answered = resolve));
  let receive: ((frame: string) => void) | undefined;
  let closeWith: { code: number; reason: string } | undefined;
  const transport: Transport = {
    protocol: att.protocol,
    send(text) {
      if (ws.readyState === 1) ws.send(text);
      answered();
    },
    listen(receiver) {
      receive = receiver;
    },
    close(code = 1000, reason = "") {
      closeWith ??= { code, reason };
    },
    // The peer lives for one frame; the connection's end is handled by webSocketClose.
    closed: new Promise(() => {}),
  };
  const peer = new Peer(transport, {
    protocol: att.protocol,
    logger: core.logger,
    maxFrameBytes: core.settings.maxFrameBytes,
  });
  const handling: Promise<unknown>[] = [];
  const after: After[] = [];
  const conn = new FrameContext(core, ws, att, after);
  conn.serve(peer, handling);
  if (att.executorId) {
    const record = await core.storage.get<ExecutorRecord>(key.executor(att.executorId));
    peer.capabilities = record?.capabilities;
  }
  receive!(frame);
  await Promise.allSettled(handling);
  if (expectsAnswer) await answer;
  if (closeWith) {
    await core.closeConnection(ws, att, closeWith.code, closeWith.reason);
    return;
  }
  // The handlers may have changed the attachment (registered, refreshed token, executor.close).
  if (stillOpen(att)) ws.serializeAttachment(att);
  for (const fn of after) await fn();
}

function stillOpen(att: ConnectionAttachment): boolean {
  return att.state !== "closed";
}

function isResponse(message: unknown): message is Record<string, unknown> {
  if (typeof message !== "object" || message === null || Array.isArray(message)) return false;
  return !("method" in message) && ("result" in message || "error" in message);
}

/** The handlers of one frame. */
class FrameContext {
  readonly #core: EdgeCore;
  readonly #ws: WorkersWebSocket;
  readonly #att: ConnectionAttachment;
  readonly #after: After[];

  constructor(core: EdgeCore, ws: WorkersWebSocket, att: ConnectionAttachment, after: After[]) {
    this.#core = core;
    this.#ws = ws;
    this.#att = att;
    this.#after = after;
  }

  get #storage() {
    return this.#core.storage;
  }

  serve(peer: Peer, handling: Promise<unknown>[]): void {
    const att = this.#att;
    // Every handler's promise is collected, so the frame's event lasts until its work is done.
    const track = <T>(work: () => Promise<T>): Promise<T> => {
      const run = work();
      handling.push(run.catch(() => {}));
      return run;
    };

    peer.admit = (method, kind) => {
      if (att.state === "registered") {
        return method === "executor.register"
          ? new ConflictError("already registered", { reason: "already_registered" })
          : undefined;
      }
      if (method === "executor.register") return undefined;
      if (kind === "request" && ++att.refused > MAX_UNREGISTERED_REQUESTS) {
        // Repeated frames before executor.register: a policy violation, not a slow start.
        this.#after.push(() =>
          this.#core.closeConnection(
            this.#ws,
            att,
            CloseCode.POLICY_VIOLATION,
            "requests before executor.register",
          )
        );
      }
      return new ForbiddenError("not registered", { reason: "not_registered" });
    };

    peer.onRequest("executor.register", (params) => track(() => this.#register(params)));
    peer.onRequest("executor.heartbeat", () =>
      track(async () => {
        const record = await this.#executor();
        record.leaseExpiresAt = Date.now() + 2 * this.#core.settings.heartbeatIntervalMs;
        await this.#storage.put(key.executor(record.id), record);
        return {
          drain: record.draining,
          lease_expires_at: new Date(record.leaseExpiresAt).toISOString(),
        };
      }));
    const authenticate = this.#core.authenticate;
    if (authenticate) {
      peer.onRequest("executor.token.refresh", ({ token }) =>
        track(async () => {
          let next: Principal;
          try {
            next = await authenticate({
              kind: "refresh",
              token,
              // The connect URL is not kept (it may carry the token in its query).
              url: new URL("https://harness.invalid/v1/executors/connect"),
              headers: new Headers({ authorization: `Bearer ${token}` }),
              protocols: [],
            });
          } catch {
            throw new ForbiddenError("token invalid", { reason: "token_invalid" });
          }
          const stored = storePrincipal(next);
          const expiresAt = stored.expiresAt;
          if (expiresAt === undefined || expiresAt <= Date.now()) {
            throw new ForbiddenError("token invalid", { reason: "token_invalid" });
          }
          if (!sameIdentity(att.principal, stored)) {
            throw new ForbiddenError("token mismatch", { reason: "token_mismatch" });
          }
          att.principal = stored;
          await this.#core.deadlines.set(`token:${att.id}`, expiresAt);
          return { expires_at: new Date(expiresAt).toISOString() };
        }));
    }
    peer.onRequest("session.ready", ({ session_id }) =>
      track(async () => {
        const session = await this.#session(session_id);
        if (session.state === "ready" || session.state === "stopping") {
          return { ok: true, duplicate: true };
        }
        session.state = "ready";
        await this.#storage.put(key.session(session_id), session);
        this.#core.changed();
        return { ok: true };
      }));
    peer.onRequest(
      "session.event",
      (params, context) => track(() => this.#appendEvent(params, context.id)),
    );
    peer.onRequest("session.ended", ({ session_id, reason }) =>
      track(async () => {
        const record = await this.#executor();
        const session = await this.#storage.get<SessionRecord>(key.session(session_id));
        // A repeat, or a session the harness no longer knows, ends the executor's retry loop.
        if (!session || session.executorId !== record.id || session.state === "ended") {
          return { ok: true, duplicate: true };
        }
        await this.#core.endSession(session_id, reason ?? "ended", "session_ended");
        return { ok: true };
      }));
    peer.onRequest("tool.result", (params) => track(() => this.#toolResult(params)));
    peer.onNotification("executor.capabilities.update", ({ capabilities }) =>
      track(async () => {
        const record = await this.#executor();
        record.capabilities = capabilities;
        await this.#storage.put(key.executor(record.id), record);
        this.#core.changed();
      }));
    peer.onNotification("executor.close", ({ reason }) =>
      track(() => {
        this.#core.logger.info("executor closing for good", {
          executor_id: att.executorId,
          reason,
        });
        att.forGood = true;
        return Promise.resolve();
      }));
    peer.onNotification("session.status", (params) =>
      track(async () => {
        const record = await this.#executor();
        const session = await this.#storage.get<SessionRecord>(key.session(params.session_id));
        if (!session || session.executorId !== record.id || session.state === "ended") return;
        session.reported = {
          status: params.status,
          ...(params.detail !== undefined ? { detail: params.detail } : {}),
        };
        await this.#storage.put(key.session(params.session_id), session);
        this.#core.changed();
      }));
    peer.onNotification("tool.progress", (params) =>
      track(async () => {
        const record = await this.#executor();
        const call = await this.#storage.get<CallRecord>(key.call(params.tool_call_id));
        if (!call || call.executorId !== record.id || call.state === "settled") return;
        if (call.params.session_id !== params.session_id) return;
        pushProgress(call, params);
        await this.#storage.put(key.call(params.tool_call_id), call);
        this.#core.changed();
      }));
  }

  /** The executor bound to this connection (admission lets only registered ones through). */
  async #executor(): Promise<ExecutorRecord> {
    const id = this.#att.executorId;
    const record = id ? await this.#storage.get<ExecutorRecord>(key.executor(id)) : undefined;
    if (!record || record.connection !== this.#att.id) {
      throw new ForbiddenError("not registered", { reason: "not_registered" });
    }
    return record;
  }

  /** A live session of this connection's executor. */
  async #session(sessionId: string): Promise<SessionRecord> {
    const record = await this.#executor();
    const session = await this.#storage.get<SessionRecord>(key.session(sessionId));
    if (!session || session.executorId !== record.id || session.state === "ended") {
      throw new NotFoundError("unknown session", { reason: "unknown_session" });
    }
    return session;
  }

  async #register(params: ExecutorRegisterParams): Promise<ExecutorRegisterResult> {
    const core = this.#core;
    const att = this.#att;
    if (params.protocol !== att.protocol) {
      this.#after.push(() =>
        core.closeConnection(this.#ws, att, CloseCode.PROTOCOL_MISMATCH, "protocol mismatch")
      );
      throw new ProtocolMismatchError("protocol mismatch", {
        reason: "protocol_mismatch",
        expected: att.protocol,
        received: params.protocol,
      });
    }
    const principal = att.principal;
    const machineScoped = params.environment_id === "";
    if (principal.scope === "environment" && params.environment_id !== principal.environmentId) {
      throw new ForbiddenError("environment does not match the token", { reason: "forbidden" });
    }
    if (
      principal.scope === "machine" &&
      (!machineScoped ||
        (params.machine_id !== undefined && params.machine_id !== principal.machineId))
    ) {
      throw new ForbiddenError("machine does not match the token", { reason: "forbidden" });
    }
    if (
      machineScoped && !hasCapability(params.capabilities, "process") &&
      !hasCapability(params.capabilities, "agent")
    ) {
      // No runtime is bound: the connection stays unregistered and may register again.
      throw new CapabilityMissingError("capability missing", {
        reason: "capability_missing",
        capability: "process",
      });
    }
    const id = await this.#executorId(principal, params);
    const storageKey = key.executor(id);
    let existing = await core.storage.get<ExecutorRecord>(storageKey);
    if (existing?.connection && existing.connection !== att.id) {
      // One executor, one connection: the newer registration wins, the older one stops (4004).
      core.logger.info("executor replaced by a new registration", { executor_id: id });
      const old = core.socket(existing.connection);
      const oldAtt = old ? core.attachment(old) : undefined;
      if (old && oldAtt) {
        await core.closeConnection(
          old,
          oldAtt,
          CloseCode.REPLACED,
          "replaced by a new registration",
        );
      } else {
        await core.detach({
          id: existing.connection,
          protocol: existing.protocol,
          principal: existing.principal,
          state: "closed",
          executorId: id,
          refused: 0,
        });
      }
      existing = await core.storage.get<ExecutorRecord>(storageKey);
    }
    const now = Date.now();
    const record: ExecutorRecord = {
      id,
      principal,
      protocol: att.protocol,
      info: params.executor,
      capabilities: params.capabilities,
      environmentId: params.environment_id,
      ...(params.machine_id ?? principal.machineId
        ? { machineId: params.machine_id ?? principal.machineId }
        : {}),
      ...(params.max_sessions !== undefined ? { maxSessions: params.max_sessions } : {}),
      connection: att.id,
      draining: existing?.draining ?? false,
      leaseExpiresAt: now + 2 * core.settings.heartbeatIntervalMs,
      registeredAt: existing?.registeredAt ?? now,
    };
    await core.storage.put(storageKey, record);
    att.state = "registered";
    att.executorId = id;
    this.#ws.serializeAttachment(att);
    await core.deadlines.clear(`register:${att.id}`);
    await core.deadlines.set(`lease:${id}`, record.leaseExpiresAt);

    const wanted = params.resume?.executor_id === id
      ? new Set(params.resume.active_sessions)
      : new Set<string>();
    const resumed: string[] = [];
    const prefix = key.executorSessions(id);
    for (const fullKey of (await core.storage.list({ prefix })).keys()) {
      const sessionId = suffix(fullKey, prefix);
      if (wanted.has(sessionId)) resumed.push(sessionId);
      else await core.endSession(sessionId, "lost", "session_lost");
    }
    core.logger.info(existing ? "executor reconnected" : "executor registered", {
      executor_id: id,
      protocol: att.protocol,
      resumed_sessions: resumed.length,
    });
    // Calls that could not be sent, or whose ack was lost, go out again once the executor has
    // its register result; it deduplicates them by tool_call_id.
    this.#after.push(() => core.redispatch(id, att.id));
    await core.recordEvent(existing ? "reconnected" : "registered", record);
    return {
      executor_id: id,
      protocol: att.protocol,
      heartbeat_interval_ms: core.settings.heartbeatIntervalMs,
      lease_expires_at: new Date(record.leaseExpiresAt).toISOString(),
      ...(params.resume ? { resumed_sessions: resumed } : {}),
    };
  }

  /**
   * A machine credential's executor is always `exec_<machine_id>`; otherwise a resume keeps the
   * id of a live executor of the same environment and credential, and a new one is generated.
   */
  async #executorId(principal: StoredPrincipal, params: ExecutorRegisterParams): Promise<string> {
    if (principal.executorId) return principal.executorId;
    const machineId = principal.machineId ?? params.machine_id;
    if (params.environment_id === "" && machineId) return `exec_${machineId}`;
    const resumeId = params.resume?.executor_id;
    if (resumeId) {
      const previous = await this.#storage.get<ExecutorRecord>(key.executor(resumeId));
      if (
        previous && previous.environmentId === params.environment_id &&
        previous.principal.credentialId === principal.credentialId
      ) {
        return resumeId;
      }
    }
    return randomId("exec_");
  }

  async #toolResult(params: ToolResultParams): Promise<{ ok: true; duplicate?: boolean }> {
    const record = await this.#executor();
    const call = await this.#storage.get<CallRecord>(key.call(params.tool_call_id));
    // An executor can only complete its own calls.
    if (!call || call.executorId !== record.id || call.params.session_id !== params.session_id) {
      throw new NotFoundError("unknown tool call", { reason: "unknown_tool_call" });
    }
    if (call.state === "settled") return { ok: true, duplicate: true };
    const result: ToolCallResult = {
      tool_call_id: params.tool_call_id,
      session_id: params.session_id,
      outcome: params.outcome,
      content: params.content ?? [],
      is_error: params.is_error ?? false,
      ...(params.error ? { error: params.error } : {}),
      artifacts: params.artifacts ?? [],
      ...(params.structured_content ? { structured_content: params.structured_content } : {}),
    };
    call.state = "settled";
    call.result = result;
    call.settledAt = Date.now();
    delete call.dispatchedOn;
    await this.#storage.put(key.call(params.tool_call_id), call);
    await this.#storage.delete(key.pending(record.id, params.tool_call_id));
    this.#core.changed();
    return { ok: true };
  }

  /**
   * A durable event: deduplicated by JSON-RPC id (and, for agent events, by event id and
   * sequence), stored before it is acknowledged.
   */
  async #appendEvent(params: SessionEventParams, rpcId: JsonRpcId): Promise<SessionEventResult> {
    const session = await this.#session(params.session_id);
    const sid = session.id;
    const rpcKey = `${typeof rpcId}:${rpcId}`;
    const duplicate = (): SessionEventResult =>
      session.ackedSequence > 0
        ? { acked_sequence: session.ackedSequence, duplicate: true }
        : { duplicate: true };
    if (await this.#storage.get(key.eventRpc(sid, rpcKey))) return duplicate();
    const agent = params.event_id !== undefined || params.sequence !== undefined ||
      params.turn_id !== undefined;
    if (agent) {
      if (
        params.event_id !== undefined && await this.#storage.get(key.eventId(sid, params.event_id))
      ) {
        await this.#storage.put(key.eventRpc(sid, rpcKey), 1);
        return duplicate();
      }
      if (params.sequence !== undefined) {
        if (params.sequence <= session.ackedSequence) {
          await this.#storage.put(key.eventRpc(sid, rpcKey), 1);
          return duplicate();
        }
        if (params.sequence > session.ackedSequence + 1) {
          throw new ConflictError("sequence gap", {
            reason: "sequence_gap",
            expected_sequence: session.ackedSequence + 1,
          });
        }
      }
      const checked = AgentEventSchema.safeParse(params.event);
      if (!checked.success) {
        throw new InvalidParamsError("invalid params: event is not an AgentEvent", {
          field: "/event",
          issues: checked.error.issues.map((i) => ({
            path: ["event", ...i.path.map(String)],
            message: i.message,
            code: i.code,
          })),
        });
      }
    }
    const index = session.events + 1;
    const entries: Record<string, unknown> = {
      [key.event(sid, index)]: {
        index,
        session_id: sid,
        event: params.event,
        ...(params.turn_id !== undefined ? { turn_id: params.turn_id } : {}),
        ...(params.event_id !== undefined ? { event_id: params.event_id } : {}),
        ...(params.sequence !== undefined ? { sequence: params.sequence } : {}),
        received_at: Date.now(),
      },
      [key.eventRpc(sid, rpcKey)]: index,
    };
    if (params.event_id !== undefined) entries[key.eventId(sid, params.event_id)] = index;
    session.events = index;
    if (params.sequence !== undefined) session.ackedSequence = params.sequence;
    entries[key.session(sid)] = session;
    // One put: the event, its dedup keys and the session's counters commit together.
    await this.#storage.put(entries);
    this.#core.changed();
    return session.ackedSequence > 0 ? { acked_sequence: session.ackedSequence } : {};
  }
}

/** Whether a refreshed token names the same executor, scope and credential. */
function sameIdentity(a: StoredPrincipal, b: StoredPrincipal): boolean {
  return a.scope === b.scope && a.environmentId === b.environmentId &&
    a.machineId === b.machineId && a.credentialId === b.credentialId &&
    a.executorId === b.executorId;
}
