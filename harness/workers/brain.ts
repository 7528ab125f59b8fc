/**
 * The brain API of one harness object (internal; documented in `harness/workers/README.md`):
 * list executors, assign sessions, call tools and wait for their results, read durable events,
 * cancel, stop, drain. The Worker has authenticated the caller already. Every change goes
 * through `core.serial`; waiting (long polls, replies) happens outside it, so a waiting brain
 * never holds up an executor's frames.
 */
import { LocalError, ProtocolError } from "../../protocol/errors.ts";
import { hasCapability } from "../../protocol/capabilities.ts";
import {
  type Capabilities,
  type ExecutorInfo,
  METHOD_SPECS,
  type ProtocolVersion,
  type SessionAssignParams,
  type SessionMetadata,
  type ToolCallParams,
  type ToolProgressParams,
} from "../../protocol/generated/contract.ts";
import { randomId } from "../token-endpoint.ts";
import type { ToolCallResult, ToolCallState } from "../tool-call-ledger.ts";
import {
  type EdgeCore,
  ExecutorNotConnectedError,
  type Reply,
  ReplyTimeoutError,
  type SentRequest,
} from "./core.ts";
import {
  type CallFailure,
  type CallRecord,
  type ExecutorFeedEvent,
  type ExecutorRecord,
  key,
  type SessionRecord,
  type StoredSessionState,
} from "./store.ts";

/** An executor as the brain API shows it. */
export interface ExecutorView {
  /** Its id. */
  executor_id: string;
  /** Whether a registered connection is open now (it may reconnect within its lease). */
  connected: boolean;
  /** Whether it is draining (new sessions are refused). */
  draining: boolean;
  /** The negotiated subprotocol. */
  protocol: ProtocolVersion;
  /** `""` for a machine-scoped executor. */
  environment_id: string;
  /** The machine of a machine-scoped executor. */
  machine_id?: string;
  /** What it registered as. */
  executor: ExecutorInfo;
  /** What it advertised. */
  capabilities: Capabilities;
  /** Most sessions it holds at once, when it said. */
  max_sessions?: number;
  /** When its lease expires without a heartbeat. */
  lease_expires_at: string;
  /** When it first registered. */
  registered_at: string;
  /** The open connection's id (a new one after each reconnect). */
  connection_id?: string;
  /** When the open connection's token expires (it closes with 4001 then, unless refreshed). */
  token_expires_at?: string;
  /** Its live sessions. */
  sessions: string[];
}

/** A session as the brain API shows it. */
export interface SessionView {
  /** Its id. */
  session_id: string;
  /** The executor it runs on. */
  executor_id: string;
  /** Where the session is. */
  state: StoredSessionState;
  /** The metadata it was assigned with. */
  metadata: SessionMetadata;
  /** The tools the executor offers in it. */
  tools?: string[];
  /** Why it ended, once it has. */
  end_reason?: string;
  /** The executor's refusal of `session.assign`. */
  error?: CallFailure;
  /** The last `session.status` the executor reported. */
  reported_status?: { status: string; detail?: string };
  /** How many durable events were accepted. */
  events: number;
  /** When it was assigned. */
  created_at: string;
  /** When it ended. */
  ended_at?: string;
}

/** A tool call as the brain API shows it. */
export interface ToolCallView {
  /** Its id. */
  tool_call_id: string;
  /** Its session. */
  session_id: string;
  /** The executor it went to. */
  executor_id: string;
  /** The tool called. */
  tool: string;
  /** Where the call is: queued, dispatching, dispatched or settled. */
  state: ToolCallState;
  /** The outcome, once `tool.result` arrived. */
  result?: ToolCallResult;
  /** Why the call failed without a result (refused, or its outcome is unknown). */
  error?: CallFailure;
  /** The latest `tool.progress` notifications (lossy, at most 32). */
  progress: ToolProgressParams[];
  /** When it was made. */
  created_at: string;
  /** When it settled. */
  settled_at?: string;
}

/** The body of every error answer of the brain API. */
export interface BrainErrorBody {
  /** What went wrong. */
  error: CallFailure;
}

class HttpError extends Error {
  readonly status: number;
  readonly body: CallFailure;
  constructor(status: number, code: number | string, message: string, data?: unknown) {
    super(message);
    this.status = status;
    this.body = data === undefined ? { code, message } : { code, message, data };
  }
}

const DEFAULT_GRACE_MS = 5_000;

/** Serves one brain API request; `path` is what follows `/v1/harness/<route>`. */
export async function serveBrain(
  core: EdgeCore,
  request: Request,
  path: string,
): Promise<Response> {
  try {
    return await route(core, request, path);
  } catch (error) {
    if (error instanceof HttpError) return json(error.status, { error: error.body });
    core.logger.error("brain API request failed", { error: String(error) });
    return json(500, { error: { code: "internal_error", message: "internal error" } });
  }
}

async function route(core: EdgeCore, request: Request, path: string): Promise<Response> {
  const url = new URL(request.url);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const method = request.method;
  const api = new BrainApi(core, url);
  const [a, b, c] = parts;
  if (parts.length === 1 && a === "status" && method === "GET") return api.status();
  if (a === "executors") {
    if (parts.length === 1 && method === "GET") return api.listExecutors();
    if (parts.length === 2 && method === "GET") return api.getExecutor(b);
    if (parts.length === 3 && c === "drain" && method === "POST") {
      return api.drain(b, await body(request));
    }
    if (parts.length === 3 && c === "close" && method === "POST") {
      return api.close(b, await body(request));
    }
  }
  if (parts.length === 1 && a === "executor-events" && method === "GET") {
    return api.executorEvents();
  }
  if (a === "sessions") {
    if (parts.length === 1 && method === "POST") return api.assign(await body(request));
    if (parts.length === 2 && method === "GET") return api.getSession(b);
    if (parts.length === 3 && c === "tool-calls" && method === "POST") {
      return api.callTool(b, await body(request));
    }
    if (parts.length === 3 && c === "events" && method === "GET") return api.events(b);
    if (parts.length === 3 && c === "stop" && method === "POST") {
      return api.stop(b, await body(request));
    }
  }
  if (a === "tool-calls") {
    if (parts.length === 2 && method === "GET") return api.getCall(b);
    if (parts.length === 3 && c === "cancel" && method === "POST") {
      return api.cancel(b, await body(request));
    }
  }
  throw new HttpError(404, "not_found", "no such endpoint");
}

class BrainApi {
  readonly #core: EdgeCore;
  readonly #url: URL;

  constructor(core: EdgeCore, url: URL) {
    this.#core = core;
    this.#url = url;
  }

  get #storage() {
    return this.#core.storage;
  }

  status(): Response {
    return json(200, {
      instance: this.#core.instance,
      started_at: new Date(this.#core.startedAt).toISOString(),
    });
  }

  async listExecutors(): Promise<Response> {
    const records = await this.#storage.list<ExecutorRecord>({ prefix: "x:" });
    const views = await Promise.all([...records.values()].map((r) => this.#executorView(r)));
    return json(200, { executors: views });
  }

  async getExecutor(id: string): Promise<Response> {
    return json(200, await this.#executorView(await this.#executor(id)));
  }

  async executorEvents(): Promise<Response> {
    const from = Math.max(0, Math.floor(Number(this.#url.searchParams.get("from") ?? 0)) || 0);
    const limit = this.#limit();
    await this.#poll(
      async () => (await this.#storage.get<number>(key.executorEventNext)) ?? 1,
      (next) => next > from + 1,
    );
    const page = await this.#storage.list<ExecutorFeedEvent>({
      prefix: "v:",
      start: key.executorEvent(from + 1),
      limit,
    });
    const events = [...page.values()];
    return json(200, { events, next: events.length ? events[events.length - 1].index : from });
  }

  async drain(id: string, input: Record<string, unknown>): Promise<Response> {
    const params = {
      ...(typeof input.reason === "string" ? { reason: input.reason } : {}),
      ...(typeof input.deadline_ms === "number" ? { deadline_ms: input.deadline_ms } : {}),
    };
    const sent = await this.#core.serial(async () => {
      const record = await this.#executor(id);
      // Later heartbeats answer drain: true as well, also after a reconnect.
      record.draining = true;
      await this.#storage.put(key.executor(id), record);
      this.#core.changed();
      return await this.#send(() => this.#core.request(record, "executor.drain", params, id));
    });
    return json(200, await this.#result("executor.drain", sent));
  }

  async close(id: string, input: Record<string, unknown>): Promise<Response> {
    const reason = typeof input.reason === "string" ? input.reason : "closed";
    await this.#core.serial(async () => {
      const record = await this.#executor(id);
      const ws = record.connection ? this.#core.socket(record.connection) : undefined;
      if (ws) {
        const frame = JSON.stringify({
          jsonrpc: "2.0",
          method: "executor.close",
          params: { reason },
        });
        ws.send(frame);
      }
      await this.#core.release(record, "closed", 1000);
    });
    return json(200, { executor_id: id, closed: true });
  }

  async assign(input: Record<string, unknown>): Promise<Response> {
    const sessionId = input.session_id;
    if (typeof sessionId !== "string" || sessionId === "") {
      throw new HttpError(400, "invalid_params", "session_id is required");
    }
    const metadata =
      (typeof input.metadata === "object" && input.metadata !== null
        ? input.metadata
        : {}) as SessionMetadata;
    const params: SessionAssignParams = {
      session_id: sessionId,
      ...(typeof input.environment_id === "string" ? { environment_id: input.environment_id } : {}),
      // A long-lived session unless the brain says otherwise (any other source is one-shot).
      metadata: { source: "harness", ...metadata },
      ...(Array.isArray(input.tools) ? { tools: input.tools as string[] } : {}),
    };
    const checked = METHOD_SPECS.get("session.assign")!.params.safeParse(params);
    if (!checked.success) {
      throw new HttpError(400, "invalid_params", "invalid session.assign params", {
        issues: checked.error.issues.map((i) => ({ path: i.path.map(String), message: i.message })),
      });
    }
    const sent = await this.#core.serial(async () => {
      const record = await this.#pickExecutor(input.executor_id);
      if (!record.connection || !this.#core.socket(record.connection)) {
        throw new HttpError(503, "executor_unavailable", `executor ${record.id} is not connected`);
      }
      if (record.draining) {
        throw new HttpError(409, "session_refused", "the executor is draining", {
          reason: "draining",
        });
      }
      const existing = await this.#storage.get<SessionRecord>(key.session(sessionId));
      if (existing && existing.state !== "ended" && existing.executorId !== record.id) {
        throw new HttpError(409, "session_refused", "the session exists on another executor", {
          reason: "session_exists",
        });
      }
      if (existing?.state === "ended") await this.#core.purgeSession(sessionId);
      if (!existing || existing.state === "ended") {
        const session: SessionRecord = {
          id: sessionId,
          executorId: record.id,
          metadata: params.metadata!,
          ...(params.tools ? { tools: params.tools } : {}),
          state: "assigning",
          events: 0,
          ackedSequence: 0,
          createdAt: Date.now(),
        };
        // Stored before the request: session.ready may arrive right behind the ack.
        await this.#storage.put({
          [key.session(sessionId)]: session,
          [key.executorSession(record.id, sessionId)]: 1,
        });
        await this.#core.deadlines.clear(`purge:${sessionId}`);
      }
      // A repeat for a session the executor holds is sent again (retry after a reconnect).
      return await this.#send(
        () => this.#core.request(record, "session.assign", params, sessionId),
        async () => {
          if (!existing || existing.state === "ended") {
            await this.#core.endSession(sessionId, "refused", "session_ended");
          }
        },
      );
    });
    const reply = await this.#core.awaitReply("session.assign", sent);
    if (!reply.ok) throw failure(reply.error);
    return json(201, sessionView(await this.#session(sessionId)));
  }

  async getSession(id: string): Promise<Response> {
    const until = this.#url.searchParams.get("until");
    const reached = (s: SessionRecord) =>
      until === "ended"
        ? s.state === "ended"
        : until === "ready"
        ? s.state === "ready" || s.state === "stopping" || s.state === "ended"
        : true;
    const { value, done } = await this.#poll(() => this.#session(id), reached);
    return json(done ? 200 : 202, sessionView(value));
  }

  async callTool(sessionId: string, input: Record<string, unknown>): Promise<Response> {
    if (typeof input.tool !== "string" || input.tool === "") {
      throw new HttpError(400, "invalid_params", "tool is required");
    }
    const callId = typeof input.tool_call_id === "string" && input.tool_call_id !== ""
      ? input.tool_call_id
      : randomId("call_");
    const params: ToolCallParams = {
      session_id: sessionId,
      tool_call_id: callId,
      tool: input.tool,
      input: (input.input ?? {}) as Record<string, unknown>,
      ...(typeof input.timeout_ms === "number" ? { timeout_ms: input.timeout_ms } : {}),
    };
    await this.#core.serial(async () => {
      const session = await this.#session(sessionId);
      const existing = await this.#storage.get<CallRecord>(key.call(callId));
      if (existing) {
        // Idempotent by tool_call_id: a repeat returns the same call, the tool runs once.
        if (existing.params.session_id !== sessionId) {
          throw new HttpError(409, "conflict", "tool_call_id is in use by another session");
        }
        return;
      }
      if (session.state === "ended") {
        throw new HttpError(409, "session_ended", `session ${sessionId} has ended`, {
          reason: session.endReason,
        });
      }
      const executor = await this.#storage.get<ExecutorRecord>(key.executor(session.executorId));
      // A peer never receives a method for a capability it did not advertise: tool:<name>.
      if (!executor || !hasCapability(executor.capabilities, `tool:${params.tool}`)) {
        throw new HttpError(
          409,
          "capability_not_advertised",
          `the executor does not serve ${params.tool}`,
          {
            capability: `tool:${params.tool}`,
          },
        );
      }
      const checked = METHOD_SPECS.get("tool.call")!.params.safeParse(params);
      if (!checked.success) {
        throw new HttpError(400, "invalid_params", "invalid tool.call params", {
          issues: checked.error.issues.map((i) => ({
            path: i.path.map(String),
            message: i.message,
          })),
        });
      }
      const call: CallRecord = {
        params,
        executorId: executor.id,
        state: "queued",
        progress: [],
        createdAt: Date.now(),
      };
      await this.#storage.put({
        [key.call(callId)]: call,
        [key.pending(executor.id, callId)]: sessionId,
        [key.sessionCall(sessionId, callId)]: 1,
      });
      await this.#core.dispatch(call);
    });
    return await this.#callResponse(callId, undefined);
  }

  async getCall(id: string): Promise<Response> {
    const from = this.#url.searchParams.get("progress_from");
    return await this.#callResponse(id, from === null ? undefined : Number(from));
  }

  async #callResponse(id: string, progressFrom: number | undefined): Promise<Response> {
    const { value } = await this.#poll(
      () => this.#call(id),
      (c) =>
        c.state === "settled" ||
        (progressFrom !== undefined && Number.isFinite(progressFrom) &&
          c.progress.length > progressFrom),
    );
    return json(value.state === "settled" ? 200 : 202, callView(value));
  }

  async cancel(id: string, input: Record<string, unknown>): Promise<Response> {
    const sent = await this.#core.serial(async () => {
      const call = await this.#call(id);
      if (call.state === "settled") return undefined;
      const executor = await this.#executor(call.executorId);
      const params = {
        tool_call_id: id,
        session_id: call.params.session_id,
        ...(typeof input.reason === "string" ? { reason: input.reason } : {}),
      };
      return await this.#send(() => this.#core.request(executor, "tool.cancel", params, id));
    });
    if (!sent) return json(200, { canceled: false });
    return json(200, await this.#result("tool.cancel", sent));
  }

  async events(sessionId: string): Promise<Response> {
    const from = Math.max(0, Math.floor(Number(this.#url.searchParams.get("from") ?? 0)) || 0);
    const limit = this.#limit();
    const { value: session } = await this.#poll(
      () => this.#session(sessionId),
      (s) => s.events > from || s.state === "ended",
    );
    const records = await this.#storage.list({
      prefix: key.events(sessionId),
      start: key.event(sessionId, from + 1),
      limit,
    });
    const events = [...records.values()];
    const next = from + events.length;
    return json(200, { events, next, ended: session.state === "ended" && next >= session.events });
  }

  async stop(sessionId: string, input: Record<string, unknown>): Promise<Response> {
    const reason = typeof input.reason === "string" ? input.reason : undefined;
    const graceMs = typeof input.grace_ms === "number" ? input.grace_ms : undefined;
    const sent = await this.#core.serial(async () => {
      const session = await this.#session(sessionId);
      if (session.state === "ended") return undefined;
      const executor = await this.#executor(session.executorId);
      const params = {
        session_id: sessionId,
        ...(reason !== undefined ? { reason } : {}),
        ...(graceMs !== undefined ? { grace_ms: graceMs } : {}),
      };
      return await this.#send(() =>
        this.#core.request(executor, "session.stop", params, sessionId)
      );
    });
    if (sent) {
      await this.#result("session.stop", sent);
      // Every wait ends: an executor that never reports session.ended does not hold the session.
      await this.#core.serial(async () => {
        const session = await this.#session(sessionId);
        if (session.state !== "stopping") return;
        const waitMs = (graceMs ?? DEFAULT_GRACE_MS) + this.#core.settings.stopSlackMs;
        await this.#core.deadlines.set(`stop:${sessionId}`, Date.now() + waitMs);
      });
    }
    const { value, done } = await this.#poll(
      () => this.#session(sessionId),
      (s) => s.state === "ended",
    );
    return json(done ? 200 : 202, sessionView(value));
  }

  // ---- helpers -------------------------------------------------------------------------------

  /** `?limit=`: 1 to 1000, default 100. */
  #limit(): number {
    const asked = Math.floor(Number(this.#url.searchParams.get("limit") ?? 100));
    return Math.min(1000, Math.max(1, Number.isFinite(asked) ? asked : 100));
  }

  async #executor(id: string): Promise<ExecutorRecord> {
    const record = await this.#storage.get<ExecutorRecord>(key.executor(id));
    if (!record) throw new HttpError(404, "not_found", `unknown executor ${id}`);
    return record;
  }

  async #pickExecutor(id: unknown): Promise<ExecutorRecord> {
    if (typeof id === "string" && id !== "") return await this.#executor(id);
    const records = await this.#storage.list<ExecutorRecord>({ prefix: "x:" });
    for (const record of records.values()) {
      if (record.connection && !record.draining && this.#core.socket(record.connection)) {
        return record;
      }
    }
    throw new HttpError(503, "executor_unavailable", "no connected executor");
  }

  async #session(id: string): Promise<SessionRecord> {
    const session = await this.#storage.get<SessionRecord>(key.session(id));
    if (!session) throw new HttpError(404, "not_found", `unknown session ${id}`);
    return session;
  }

  async #call(id: string): Promise<CallRecord> {
    const call = await this.#storage.get<CallRecord>(key.call(id));
    if (!call) throw new HttpError(404, "not_found", `unknown tool call ${id}`);
    return call;
  }

  /** Sends a request; a local refusal becomes an HTTP error (after `undo`). */
  async #send(send: () => Promise<SentRequest>, undo?: () => Promise<void>): Promise<SentRequest> {
    try {
      return await send();
    } catch (error) {
      await undo?.();
      throw failure(error);
    }
  }

  async #result(method: string, sent: SentRequest): Promise<unknown> {
    const reply: Reply = await this.#core.awaitReply(method, sent);
    if (!reply.ok) throw failure(reply.error);
    return reply.result;
  }

  /** Reads until `done` holds or `wait_ms` (capped) has passed; wakes on every change. */
  async #poll<T>(
    read: () => Promise<T>,
    done: (value: T) => boolean,
  ): Promise<{ value: T; done: boolean }> {
    const asked = Number(this.#url.searchParams.get("wait_ms") ?? 0);
    const waitMs = Number.isFinite(asked)
      ? Math.min(Math.max(0, asked), this.#core.settings.maxWaitMs)
      : 0;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const value = await read();
      if (done(value)) return { value, done: true };
      const left = deadline - Date.now();
      if (left <= 0) return { value, done: false };
      await this.#core.waitChange(left);
    }
  }

  async #executorView(record: ExecutorRecord): Promise<ExecutorView> {
    const ws = record.connection ? this.#core.socket(record.connection) : undefined;
    const att = ws ? this.#core.attachment(ws) : undefined;
    const prefix = key.executorSessions(record.id);
    const sessions = [...(await this.#storage.list({ prefix })).keys()].map((k) =>
      k.slice(prefix.length)
    );
    return {
      executor_id: record.id,
      connected: att !== undefined,
      draining: record.draining,
      protocol: record.protocol,
      environment_id: record.environmentId,
      ...(record.machineId !== undefined ? { machine_id: record.machineId } : {}),
      executor: record.info,
      capabilities: record.capabilities,
      ...(record.maxSessions !== undefined ? { max_sessions: record.maxSessions } : {}),
      lease_expires_at: new Date(record.leaseExpiresAt).toISOString(),
      registered_at: new Date(record.registeredAt).toISOString(),
      ...(att ? { connection_id: att.id } : {}),
      ...(att?.principal.expiresAt !== undefined
        ? { token_expires_at: new Date(att.principal.expiresAt).toISOString() }
        : {}),
      sessions,
    };
  }
}

function sessionView(session: SessionRecord): SessionView {
  return {
    session_id: session.id,
    executor_id: session.executorId,
    state: session.state,
    metadata: session.metadata,
    ...(session.tools ? { tools: session.tools } : {}),
    ...(session.endReason !== undefined ? { end_reason: session.endReason } : {}),
    ...(session.refusal ? { error: session.refusal } : {}),
    ...(session.reported ? { reported_status: session.reported } : {}),
    events: session.events,
    created_at: new Date(session.createdAt).toISOString(),
    ...(session.endedAt !== undefined ? { ended_at: new Date(session.endedAt).toISOString() } : {}),
  };
}

function callView(call: CallRecord): ToolCallView {
  return {
    tool_call_id: call.params.tool_call_id,
    session_id: call.params.session_id,
    executor_id: call.executorId,
    tool: call.params.tool,
    state: call.state,
    ...(call.result ? { result: call.result } : {}),
    ...(call.error ? { error: call.error } : {}),
    progress: call.progress,
    created_at: new Date(call.createdAt).toISOString(),
    ...(call.settledAt !== undefined ? { settled_at: new Date(call.settledAt).toISOString() } : {}),
  };
}

/** An error of a request to the executor, as an HTTP answer. */
function failure(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof ProtocolError) {
    // The executor refused: its JSON-RPC error, unchanged.
    return new HttpError(409, error.code, error.message, error.data);
  }
  if (error instanceof ExecutorNotConnectedError) {
    return new HttpError(503, "executor_unavailable", error.message);
  }
  if (error instanceof ReplyTimeoutError) return new HttpError(504, "timeout", error.message);
  if (error instanceof LocalError) return new HttpError(409, "refused", error.message);
  return new HttpError(500, "internal_error", "internal error");
}

async function body(request: Request): Promise<Record<string, unknown>> {
  const text = await request.text();
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpError(400, "bad_request", "the body is not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HttpError(400, "bad_request", "the body must be a JSON object");
  }
  return value as Record<string, unknown>;
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}
