/**
 * The HTTP API for brains outside the harness's process: list executors, assign sessions, call
 * tools and wait for their results, read durable events (long poll or server-sent events),
 * cancel, stop, drain, close — a hono app over any {@linkcode Harness}, so the same API serves
 * a harness on Node, Deno and Bun and one inside a Durable Object.
 *
 * It owns no state and no rule: every route is a call of the harness's public API
 * (`harness.executors`, `assignSession`, `harness.session(id)`, `callTool`, `events({ from })`,
 * `stop`, ...), so what that API keeps across reconnects and restarts, the HTTP API keeps too: a
 * tool call repeated with its `tool_call_id` answers the stored result, and events are read from
 * an explicit position. Bodies are checked with the contract's schemas of the request they
 * become, before anything is sent. A request's W3C `traceparent` and `tracestate` headers go
 * with the call it makes (`session.assign`, `tool.call`, `turn.start`).
 *
 * Portable: web-standard APIs and hono only.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import * as z from "zod";
import { type Clock, systemClock } from "../../protocol/clock.ts";
import { sleep } from "../../protocol/retry.ts";
import { randomId } from "../../protocol/ids.ts";
import { UnsentBudget } from "../../transport/unsent-budget.ts";
import type { TraceContext } from "../../protocol/trace-context.ts";
import { type Logger, silentLogger } from "../../protocol/logger.ts";
import {
  ExecutorCloseParamsSchema,
  ExecutorDrainParamsSchema,
  InteractionResponseParamsSchema,
  SessionAssignParamsSchema,
  SessionCloseParamsSchema,
  SessionStopParamsSchema,
  ToolCallParamsSchema,
  ToolCancelParamsSchema,
  TurnCancelParamsSchema,
  TurnInputParamsSchema,
  TurnStartParamsSchema,
} from "../../protocol/generated/contract.ts";
import {
  HarnessClosedError,
  SessionEndedError,
  ToolOutcomeUnknownError,
} from "../../harness/errors.ts";
import type { ExecutorHandle, Session } from "../../harness/handles.ts";
import type { Harness } from "../../harness/harness.ts";
import type { SessionEventRecord, ToolCallResult } from "../../harness/records.ts";
import { normalizeBasePath } from "../shared/base-path.ts";
import { admits, type Authorize } from "../shared/bearer.ts";
import { eventStream } from "./event-stream.ts";
import { type BrainToolCallView, endedWithHarness, executorView, sessionView } from "./views.ts";
import { within } from "./within.ts";
import {
  ApiError,
  apiErrorAnswer,
  errorAnswer,
  invalidParamsData,
  requestObject,
  routeErrorAnswer,
  unauthorizedAnswer,
} from "../shared/api-error.ts";
import { jsonAnswer as json } from "../shared/json-answer.ts";

/** Options of {@linkcode brainApi}. */
export interface BrainApiOptions {
  /**
   * Decides on every request before anything else (false, or a throw: 401). The API drives
   * real machines, so there is no default; `bearerAuthorize(token)` checks a bearer token.
   */
  authorize: Authorize;
  /**
   * The path the routes live under (`"/v1/harness"`; hono patterns such as
   * `"/v1/harness/:scope/:owner"` work too). Default: the root.
   */
  basePath?: string;
  /** Largest request body in bytes (beyond it: 413). Default 1 MiB. */
  maxBodyBytes?: number;
  /** Longest `wait_ms` of a long poll. Default 60 s. */
  maxWaitMs?: number;
  /**
   * Longest life of an event stream (`text/event-stream`): it then ends with `event: end` (also
   * for a client that is behind) and its connection closes; the client reconnects. Default 5 min.
   */
  maxStreamMs?: number;
  /**
   * Most bytes all its event streams hold that their clients have not read, together (each holds
   * at most 64 KiB and one event): past it the streams that hold the most are dropped. Default
   * 64 MiB.
   */
  maxUnsentBytes?: number;
  /** The harness's clock, when it was given one (event streams' lifetimes and pings). */
  clock?: Clock;
  /** Where failures the API could not attribute to the request go. Default: nowhere. */
  logger?: Logger;
}

/**
 * The W3C trace context of a request's `traceparent` and `tracestate` headers, as call options
 * (`{ trace }`); none without a `traceparent` (an invalid one is ignored further on).
 */
function traceOf(headers: Headers): { trace?: TraceContext } {
  const traceparent = headers.get("traceparent");
  if (traceparent === null) return {};
  const tracestate = headers.get("tracestate");
  return { trace: tracestate === null ? { traceparent } : { traceparent, tracestate } };
}

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
const DEFAULT_MAX_WAIT_MS = 60_000;
const DEFAULT_MAX_STREAM_MS = 5 * 60_000;
const DEFAULT_EVENT_LIMIT = 100;
const MAX_EVENT_LIMIT = 1_000;

const count = z.string().regex(/^\d{1,15}$/, "a non-negative integer").transform(Number);
const WaitQuery = z.object({ wait_ms: count.optional() });
const SessionQuery = WaitQuery.extend({ until: z.enum(["ready", "ended"]).optional() });
const EventsQuery = WaitQuery.extend({
  from: count.optional(),
  limit: count.pipe(z.number().min(1).max(MAX_EVENT_LIMIT)).optional(),
});
/** What `POST /sessions` takes beyond `session.assign`'s params. */
const AssignTarget = z.looseObject({ executor_id: z.string().min(1).optional() });
/** What `POST /sessions/{id}/tool-calls` takes: `tool.call`'s params but the path's session. */
const ToolCallBody = z.looseObject({ session_id: z.never().optional() });

/**
 * The brain API of `harness` as a hono app: hand it requests with `app.fetch` (`Deno.serve`,
 * `Bun.serve`, a Durable Object's `fetch`, `serveInspector(app.fetch)` on Node).
 *
 * ```ts
 * import { brainApi, bearerAuthorize, Harness, serveInspector } from "bma-executor-sdk/harness/node";
 *
 * const harness = new Harness({ insecureNoAuth: true });
 * await harness.serve({ port: 7700 });
 * const token = crypto.randomUUID(); // the brain's secret: from your environment
 * const api = brainApi(harness, { authorize: bearerAuthorize(token), basePath: "/v1/harness" });
 * // On 127.0.0.1; a brain calls http://127.0.0.1:7702/v1/harness/executors with the token.
 * await serveInspector((request) => Promise.resolve(api.fetch(request)), { port: 7702 });
 * ```
 *
 * Routes (under `basePath`): `GET /executors`, `GET /executors/{id}`,
 * `POST /executors/{id}/drain`, `POST /executors/{id}/close`, `POST /sessions`, `GET /sessions`,
 * `GET /sessions/{id}`, `POST /sessions/{id}/tool-calls`,
 * `POST /sessions/{id}/tool-calls/{call}/cancel`, `GET /sessions/{id}/events`,
 * `POST /sessions/{id}/stop`; agent turns: `POST /executors/{id}/turns`,
 * `POST /sessions/{id}/turns/{turn}/input`, `POST /sessions/{id}/turns/cancel`,
 * `POST /sessions/{id}/interactions/{interaction}/response`, `POST /sessions/{id}/close`; and
 * by id (`Harness.toolCall`): `GET /tool-calls/{id}`, `POST /tool-calls/{id}/cancel`; the
 * artifacts results point at: `GET /artifacts/{id}` (the bytes), `DELETE /artifacts/{id}`. Errors
 * answer `{"error": {code, message, data?}}`.
 */
export function brainApi(harness: Harness, options: BrainApiOptions): Hono {
  const logger = options.logger ?? silentLogger;
  const maxWaitMs = options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  const maxStreamMs = options.maxStreamMs ?? DEFAULT_MAX_STREAM_MS;
  const clock = options.clock ?? systemClock;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const unsent = new UnsentBudget(options.maxUnsentBytes ?? 64 * 1024 * 1024);
  const base = normalizeBasePath(options.basePath);
  const at = (path: string) => `${base}${path}`;
  const app = new Hono();

  app.use("*", async (c, next) => {
    if (!(await admits(options.authorize, c.req.raw, logger, "brain API"))) {
      return unauthorizedAnswer(c.req.raw, "bma-brain");
    }
    const elsewhere = await notHeldHere(harness, clock, c.req.raw.signal);
    if (elsewhere) return elsewhere;
    await next();
  });

  // ---- executors -------------------------------------------------------------------------------

  app.get(at("/executors"), () => json(200, { executors: harness.executors.map(executorView) }));

  app.get(at("/executors/:id"), (c) => json(200, executorView(executorOf(c))));

  app.post(at("/executors/:id/drain"), async (c) => {
    const executor = executorOf(c);
    const params = checked(ExecutorDrainParamsSchema, await requestObject(c.req.raw, maxBodyBytes));
    return json(200, await executor.drain(params, { signal: c.req.raw.signal }));
  });

  app.post(at("/executors/:id/close"), async (c) => {
    const executor = executorOf(c);
    const params = checked(ExecutorCloseParamsSchema, await requestObject(c.req.raw, maxBodyBytes));
    await executor.close(params.reason);
    return json(200, { executor_id: executor.id, closed: true });
  });

  // ---- sessions --------------------------------------------------------------------------------

  app.post(at("/sessions"), async (c) => {
    const input = await requestObject(c.req.raw, maxBodyBytes);
    const { executor_id: executorId, ...rest } = checked(AssignTarget, input);
    const params = checked(SessionAssignParamsSchema, rest);
    const executor = executorId !== undefined ? executorById(executorId) : available();
    const session = await executor.assignSession(params, {
      signal: c.req.raw.signal,
      ...traceOf(c.req.raw.headers),
    });
    return json(201, await sessionView(session));
  });

  app.get(at("/sessions"), async () => {
    const sessions = await Promise.all([...harness.sessions.values()].map(sessionView));
    return json(200, { sessions });
  });

  app.get(at("/sessions/:id"), async (c) => {
    const session = await sessionOf(c);
    const query = checked(SessionQuery, c.req.query());
    const target = query.until === "ready"
      ? session.ready()
      : query.until === "ended"
      ? session.ended
      : undefined;
    // A session that ends before it is ready has reached what `until=ready` waits for.
    const done = target === undefined ||
      (await within(target.catch(() => {}), waitOf(query), c.req.raw.signal)).done;
    if (await endedWithHarness(session)) throw new HarnessClosedError();
    return json(done ? 200 : 202, await sessionView(session));
  });

  app.post(at("/sessions/:id/tool-calls"), async (c) => {
    const session = await sessionOf(c);
    const query = checked(WaitQuery, c.req.query());
    const input = checked(ToolCallBody, await requestObject(c.req.raw, maxBodyBytes));
    const params = checked(ToolCallParamsSchema, {
      ...input,
      session_id: session.id,
      tool_call_id: input.tool_call_id ?? randomId("call_"),
    });
    // The call is the harness's, not this request's: a brain that stops waiting (or goes
    // away) leaves it running, and reads it again by repeating the request with its id.
    let recorded!: () => void;
    const stored = new Promise<void>((resolve) => (recorded = resolve));
    const call = session.callTool({
      tool: params.tool,
      input: params.input,
      tool_call_id: params.tool_call_id,
      ...(params.timeout_ms !== undefined ? { timeout_ms: params.timeout_ms } : {}),
    }, { ...traceOf(c.req.raw.headers), onRecorded: recorded });
    return await callAnswer(params.tool_call_id, session.id, call, query, c.req.raw.signal, {
      stored,
    });
  });

  app.post(at("/sessions/:id/tool-calls/:call/cancel"), async (c) => {
    const { session, params } = await sessionRequest(c, ToolCancelParamsSchema, {
      tool_call_id: param(c, "call"),
    });
    return json(200, await session.cancelTool(params.tool_call_id, params.reason));
  });

  app.get(at("/sessions/:id/events"), async (c) => {
    const session = await sessionOf(c);
    const query = checked(EventsQuery, c.req.query());
    if ((c.req.header("accept") ?? "").includes("text/event-stream")) {
      const lastId = c.req.header("last-event-id");
      if (lastId !== undefined && !/^\d{1,15}$/.test(lastId)) {
        // Never a replay from the start of what the client has read already.
        throw new ApiError(
          400,
          "invalid_params",
          "Last-Event-ID is not an event id",
          invalidParamsData([{
            path: ["Last-Event-ID"],
            message: "a non-negative integer",
            code: "custom",
          }]),
        );
      }
      const from = lastId !== undefined ? Number(lastId) : query.from ?? 0;
      await refusePastTheEnd(session, from);
      return eventStream(session, from, {
        signal: c.req.raw.signal,
        clock,
        logger,
        maxStreamMs,
        budget: unsent,
      });
    }
    await refusePastTheEnd(session, query.from ?? 0);
    return eventPage(session, query, c.req.raw.signal);
  });

  /**
   * A position past the last record of a session that has ended is no position: nothing will
   * come there (a live session's log may still grow to it: its readers wait).
   */
  async function refusePastTheEnd(session: Session, from: number): Promise<void> {
    if (session.state !== "ended" || await endedWithHarness(session)) return;
    const last = session.droppedEvents + session.eventRecords.length;
    if (from <= last) return;
    throw new ApiError(
      400,
      "invalid_params",
      `the session ended after record ${last}: there is no record ${from}`,
      invalidParamsData([{ path: ["from"], message: `at most ${last}`, code: "too_big" }]),
    );
  }

  app.post(at("/sessions/:id/stop"), async (c) => {
    const { session, params } = await sessionRequest(c, SessionStopParamsSchema);
    const query = checked(WaitQuery, c.req.query());
    const stopping = session.stop(
      params.reason,
      params.grace_ms !== undefined ? { graceMs: params.grace_ms } : {},
    );
    // A stop the executor refuses within the wait is the answer; a later failure is logged
    // (the session then ends on the harness's own deadline).
    stopping.catch((error) =>
      logger.info("brain API stop failed", { session_id: session.id, error: String(error) })
    );
    const waited = await within(stopping, waitOf(query), c.req.raw.signal, true);
    if (waited.error !== undefined) throw waited.error;
    return json(waited.done ? 200 : 202, await sessionView(session));
  });

  // ---- agent turns (a harness with the agent capability; else 501) -----------------------------

  app.post(at("/executors/:id/turns"), async (c) => {
    const executor = executorOf(c);
    const input = await requestObject(c.req.raw, maxBodyBytes);
    const params = checked(TurnStartParamsSchema, {
      ...input,
      turn_id: input.turn_id ?? randomId("turn_"),
    });
    const result = await executor.startTurn(params, {
      signal: c.req.raw.signal,
      ...traceOf(c.req.raw.headers),
    });
    return json(201, { session_id: params.session_id, ...result });
  });

  /**
   * The agent routes of a session that has ended: its executor may be gone for good, and a 503
   * would have the brain repeat for ever what no executor will take (409 `session_ended`).
   */
  async function refuseEnded(session: Session): Promise<void> {
    if (session.state !== "ended") return;
    const end = await Promise.race([session.ended, undefined]);
    throw new SessionEndedError(session.id, end?.reason ?? "ended");
  }

  app.post(at("/sessions/:id/turns/:turn/input"), async (c) => {
    const session = await sessionOf(c);
    await refuseEnded(session);
    const input = await requestObject(c.req.raw, maxBodyBytes);
    const params = checked(TurnInputParamsSchema, {
      ...input,
      session_id: session.id,
      turn_id: param(c, "turn"),
      input_id: input.input_id ?? randomId("input_"),
    });
    const ack = await session.executor.sendTurnInput(params, { signal: c.req.raw.signal });
    return json(200, { input_id: params.input_id, ...ack });
  });

  app.post(at("/sessions/:id/turns/cancel"), async (c) => {
    const { session, params } = await sessionRequest(c, TurnCancelParamsSchema);
    await refuseEnded(session);
    return json(200, await session.executor.cancelTurn(params, { signal: c.req.raw.signal }));
  });

  app.post(at("/sessions/:id/interactions/:interaction/response"), async (c) => {
    const { session, params } = await sessionRequest(c, InteractionResponseParamsSchema, {
      interaction_id: param(c, "interaction"),
    });
    await refuseEnded(session);
    return json(200, await session.executor.respondInteraction(params));
  });

  app.post(at("/sessions/:id/close"), async (c) => {
    const { session, params } = await sessionRequest(c, SessionCloseParamsSchema);
    // Closing a session that has ended closes nothing, whether or not its executor is there.
    if (session.state === "ended") return json(200, { closed: false });
    return json(
      200,
      await session.executor.closeAgentSession(session.id, {
        ...(params.reason !== undefined ? { reason: params.reason } : {}),
      }),
    );
  });

  // ---- tool calls by id, whatever their session -------------------------------------------------

  const find = async (c: Context) => {
    const status = await harness.toolCall(param(c, "id"));
    if (!status) throw new ApiError(404, "not_found", "no such tool call");
    return status;
  };
  app.get(at("/tool-calls/:id"), async (c) => {
    const status = await find(c);
    const query = checked(WaitQuery, c.req.query());
    return await callAnswer(
      status.tool_call_id,
      status.session_id,
      status.outcome,
      query,
      c.req.raw.signal,
      { state: status.state },
    );
  });
  app.post(at("/tool-calls/:id/cancel"), async (c) => {
    const status = await find(c);
    const session = await harness.findSession(status.session_id);
    if (!session) throw new ApiError(404, "not_found", "the call's session is not known");
    const params = checked(ToolCancelParamsSchema, {
      ...await requestObject(c.req.raw, maxBodyBytes),
      session_id: status.session_id,
      tool_call_id: status.tool_call_id,
    });
    return json(200, await session.cancelTool(params.tool_call_id, params.reason));
  });

  // ---- artifacts (what large tool output uploaded, that results point at) ----------------------

  app.get(at("/artifacts/:id"), async (c) => {
    const artifact = await harness.artifacts.get(param(c, "id"));
    if (!artifact) throw new ApiError(404, "not_found", "no such artifact");
    return new Response(artifact.bytes as Uint8Array<ArrayBuffer>, {
      status: 200,
      headers: {
        "content-type": artifact.mime_type ?? "application/octet-stream",
        // Bytes an executor chose: downloaded, never rendered by a browser that reaches this.
        "content-disposition": "attachment",
        "x-content-type-options": "nosniff",
        ...(artifact.name !== undefined
          ? { "x-artifact-name": encodeURIComponent(artifact.name) }
          : {}),
      },
    });
  });

  app.delete(at("/artifacts/:id"), async (c) => {
    const store = harness.artifacts;
    if (typeof store.delete !== "function") {
      throw new ApiError(501, "not_supported", "the harness's artifact store cannot delete");
    }
    if (!(await store.delete(param(c, "id")))) {
      throw new ApiError(404, "not_found", "no such artifact");
    }
    return json(200, { deleted: true });
  });

  app.notFound(() => json(404, { error: { code: "not_found", message: "no such endpoint" } }));

  app.onError(routeErrorAnswer(logger, "brain API", json));

  // ---- helpers (closures over the harness) -----------------------------------------------------

  /**
   * The session of the path and the params of its request: the body with the path's session (and
   * `fromPath`'s members), checked with `schema`.
   */
  async function sessionRequest<T>(
    c: Context,
    schema: z.ZodType<T>,
    fromPath: Record<string, string> = {},
  ): Promise<{ session: Session; params: T }> {
    const session = await sessionOf(c);
    const body = await requestObject(c.req.raw, maxBodyBytes);
    return { session, params: checked(schema, { ...body, session_id: session.id, ...fromPath }) };
  }

  function waitOf(query: { wait_ms?: number }): number {
    return Math.min(query.wait_ms ?? 0, maxWaitMs);
  }

  function executorById(id: string): ExecutorHandle {
    const executor = harness.executor(id);
    if (!executor) throw new ApiError(404, "not_found", "no such executor");
    return executor;
  }

  function executorOf(c: Context): ExecutorHandle {
    return executorById(param(c, "id"));
  }

  /** The first connected executor that is not draining. */
  function available(): ExecutorHandle {
    const executor = harness.executors.find((e) => e.connected && !e.draining && !e.gone);
    if (!executor) {
      throw new ApiError(503, "executor_unavailable", "no connected executor takes sessions");
    }
    return executor;
  }

  /** The path's session: live, or ended and remembered (a store that answers later too). */
  async function sessionOf(c: Context): Promise<Session> {
    const session = await harness.findSession(param(c, "id"));
    if (!session) throw new ApiError(404, "not_found", "no such session");
    return session;
  }

  /**
   * The answer about a call: 200 with its result once settled within the wait, else 202 with
   * `state`; a new call's 202 only once `stored` (the call is recorded: whatever the harness
   * acknowledges is in its store before the acknowledgement leaves).
   */
  async function callAnswer(
    toolCallId: string,
    sessionId: string,
    call: Promise<ToolCallResult>,
    query: { wait_ms?: number },
    signal: AbortSignal,
    { state = "pending", stored }: { state?: string; stored?: Promise<void> } = {},
  ): Promise<Response> {
    call.catch(() => {});
    // Waits at least one task, so a call refused before it is sent (its input, an ended
    // session, a capability the executor lacks) answers with the refusal.
    const waited = await within(call, waitOf(query), signal, true);
    const view: BrainToolCallView = { tool_call_id: toolCallId, session_id: sessionId, state };
    if (waited.done) {
      return json(200, { ...view, state: "settled", result: waited.value });
    }
    if (waited.error instanceof ToolOutcomeUnknownError) {
      // This harness is going away (a drain, or fenced): the call is in its store, and the
      // harness that holds the store next answers it. Not final: the brain repeats the request
      // (errorAnswer's 503 harness_closed).
      if (waited.error.reason === "harness_closed") throw waited.error;
      return json(200, { ...view, state: "settled", error: errorAnswer(waited.error).error });
    }
    if (waited.error !== undefined) throw waited.error;
    if (stored) {
      const settled = await Promise.race([
        stored.then(() => false),
        call.then(() => true, () => true),
      ]);
      // Settled (or refused) before it was recorded: answered as it ended.
      if (settled) return await callAnswer(toolCallId, sessionId, call, {}, signal, { state });
    }
    return json(202, view);
  }

  async function eventPage(
    session: Session,
    query: z.infer<typeof EventsQuery>,
    requestSignal: AbortSignal,
  ): Promise<Response> {
    const from = query.from ?? 0;
    const limit = query.limit ?? DEFAULT_EVENT_LIMIT;
    const reading = new AbortController();
    const stop = () => reading.abort();
    requestSignal.addEventListener("abort", stop, { once: true });
    const iterator = session.events({ from, signal: reading.signal });
    const events: SessionEventRecord[] = [];
    let ended = false;
    try {
      // The first record may have to be waited for (or read back from the store); the ones
      // behind it are in the session's log already.
      const first = await within(iterator.next(), waitOf(query), requestSignal);
      if (first.done) {
        if (first.value.done) ended = true;
        else {
          events.push(first.value.value);
          // The kept records are consecutive by index: the ones after the first start here.
          const kept = session.eventRecords;
          const start = kept.length ? first.value.value.index - kept[0].index + 1 : 0;
          for (let i = Math.max(start, 0); i < kept.length && events.length < limit; i++) {
            events.push(kept[i]);
          }
        }
      }
    } finally {
      requestSignal.removeEventListener("abort", stop);
      reading.abort();
      void iterator.return(undefined);
    }
    const next = events.length ? events[events.length - 1].index : from;
    // Records between `from` and the first given are no longer kept (the log's bounds).
    const skipped = events.length ? events[0].index - from - 1 : 0;
    if (await endedWithHarness(session)) {
      // Not ended: the next harness goes on with it. What was read is given, without an end.
      if (events.length === 0) throw new HarnessClosedError();
      return json(200, { events, next, ended: false, ...(skipped > 0 ? { skipped } : {}) });
    }
    if (!ended && session.state === "ended") {
      ended = next >= session.droppedEvents + session.eventRecords.length;
    }
    // A long poll that found nothing answers 202, as the other long polls do: ask again.
    return json(events.length === 0 && !ended ? 202 : 200, {
      events,
      next,
      ended,
      ...(skipped > 0 ? { skipped } : {}),
    });
  }

  return app;
}

// ---- module helpers ------------------------------------------------------------------------------

/** How often a request to a harness that is starting looks whether it still is. */
const STARTING_LOOK_MS = 50;

/**
 * The answer of a harness that does not hold its sessions, or no longer: only the holder of the
 * store knows them (a standby, or one that closes or was fenced, would answer from what it read
 * back, as if they had ended). It sends the brain on with 503 and `retry-after: 1`, as it sends
 * executors on, so a load balancer retries at the holder: `unavailable` from a standby,
 * `harness_closed` from one going away. A harness still reading its store back is waited for,
 * looked at again every {@linkcode STARTING_LOOK_MS}: its claim may find a live holder instead (a
 * standby, whose `ready` settles only once it takes over). One whose store fails still holds it
 * and answers, refusing what it cannot record.
 */
async function notHeldHere(
  harness: Harness,
  clock: Clock,
  signal: AbortSignal,
): Promise<Response | undefined> {
  while (harness.readiness === "starting" && !signal.aborted) {
    const looked = new AbortController();
    await Promise.race([
      harness.ready.catch(() => {}),
      sleep(clock, STARTING_LOOK_MS, looked.signal).catch(() => {}),
    ]);
    looked.abort();
  }
  const readiness = harness.readiness;
  if (readiness === "serving" || readiness === "store_failing") return undefined;
  const code = readiness === "standby" ? "unavailable" : "harness_closed";
  return apiErrorAnswer(new ApiError(503, code, `this harness is ${readiness}`), {
    "retry-after": "1",
  });
}

/** Parses `value` with a contract schema; a refusal is a 400 with the schema's issues. */
function checked<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new ApiError(
    400,
    "invalid_params",
    "the request does not match its schema",
    invalidParamsData(result.error.issues),
  );
}

/** A path parameter (paths are written out under the base path, so hono cannot type them). */
function param(c: Context, name: string): string {
  const value = c.req.param(name);
  if (value === undefined || value === "") {
    throw new ApiError(404, "not_found", `no ${name} in the path`);
  }
  return value;
}
