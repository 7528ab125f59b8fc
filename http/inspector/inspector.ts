/**
 * The inspector: a web page and its API over a {@linkcode Harness}, as one web-standard handler
 * (`(request: Request) => Promise<Response>`) that any server can mount — `serveInspector` on
 * Node, Deno and Bun, `Deno.serve`, `Bun.serve`, a Worker.
 *
 * Every page and endpoint answers 401 unless the request carries the token (`Authorization:
 * Bearer <token>`, or the session cookie a one-time login URL sets): JSON to API clients, and to
 * a browser (`Accept: text/html`) a page saying how to get a new login link. Only the login URL
 * and the icon (`favicon.svg`, the same for everyone) answer without it. The page is a few kB of
 * JavaScript (bundled from the TypeScript of `browser/`) and CSS served from here, under a
 * content security policy that runs only them; it renders everything executors send as text
 * (never as HTML), and it follows the harness live over server-sent events. What it shows comes
 * from `harness.observe`; what it does goes through the harness's public API (`assignSession`,
 * `callTool`, `cancelTool`, `session.stop`, `executor.drain`, `startTurn`, `respondInteraction`).
 *
 * Portable: web-standard APIs only.
 */
import { serverSentEvent } from "../shared/server-sent-event.ts";
import { Hono } from "hono";
import type { Context } from "hono";
import { type Clock, systemClock } from "../../protocol/clock.ts";
import { toBase64 } from "../../protocol/base64.ts";
import { randomId } from "../../protocol/ids.ts";
import { type Logger, silentLogger } from "../../protocol/logger.ts";
import type { InteractionOutcome } from "../../protocol/generated/contract.ts";
import { SessionEndedError } from "../../harness/errors.ts";
import { boundedEventStream } from "./event-stream.ts";
import { UnsentBudget } from "../../transport/unsent-budget.ts";
import { machineRoutes } from "./machine.ts";
import type { Harness } from "../../harness/harness.ts";
import { InspectorAuth } from "./auth.ts";
import { errorView } from "./clip.ts";
import { InspectorModel } from "./model.ts";
import { DEFAULT_INSPECTOR_LIMITS, type InspectorBatch, type InspectorLimits } from "./views.ts";
import { FAVICON_SVG, INDEX_HTML } from "./page.ts";
import { APP_CSS } from "./page-style.ts";
import { APP_JS, DOM_JS } from "./generated/pages.ts";
import { LOGIN_HELP_CSS, loginHelpHtml } from "./login-help.ts";
import { normalizeBasePath } from "../shared/base-path.ts";
import { isCrossOrigin } from "../shared/host-origin.ts";
import { asset, json, optionalString, param, requiredString, SECURITY_HEADERS } from "./http.ts";
import { ApiError, requestObject, routeErrorAnswer } from "../shared/api-error.ts";

/** Options of {@linkcode inspector}. */
export interface InspectorOptions {
  /**
   * The secret every request must present (at least 16 characters; `randomInspectorToken()`
   * makes one). Keep it out of logs: hand browsers a {@linkcode Inspector.loginUrl} instead.
   */
  token: string;
  /** The harness's clock, when it was given one (times and leases are read on it). */
  clock?: Clock;
  /** Where failures of the page's actions are reported. Default: nowhere. */
  logger?: Logger;
  /** How much is kept (finished calls, events, ...); see {@linkcode InspectorLimits}. */
  limits?: Partial<InspectorLimits>;
  /** Largest request body accepted from the page (a tool's input). Default 1 MiB. */
  maxBodyBytes?: number;
  /**
   * Largest file the machine page uploads into a session. Default 8 MiB, what `serveInspector`
   * reads of a request (raise its `maxRequestBytes` with it).
   */
  maxUploadBytes?: number;
  /** How long a browser stays logged in after a login URL. Default 12 hours. */
  sessionTtlMs?: number;
  /** How long a login URL waits for its use. Default 10 minutes. */
  loginCodeTtlMs?: number;
  /**
   * Most bytes the live stream of a page holds that the page has not read (beyond one message):
   * past it the stream errors with {@linkcode StreamBacklogError}, what it held is discarded, and
   * the server drops the connection; the page reconnects and loads afresh. Default 1 MiB
   * ({@linkcode DEFAULT_MAX_STREAM_QUEUE_BYTES}).
   */
  maxStreamQueueBytes?: number;
  /**
   * Most bytes all the inspector's streams (live state and terminals) hold that their pages have
   * not read, together: past it the streams that hold the most are dropped as one over
   * `maxStreamQueueBytes` is. Default 64 MiB.
   */
  maxUnsentBytes?: number;
  /**
   * The path the inspector is mounted under, when a server of yours hands it the requests of
   * a prefix (`"/inspector"`). Default: the root.
   */
  basePath?: string;
  /**
   * A line (plain text) the page a browser without a session shows first, on how to get a new
   * login link here (`bma-harness --ui`: the command that prints one). That page (401, to a
   * browser's `Accept: text/html`) also names the other ways: {@linkcode Inspector.loginUrl},
   * `POST <basePath>/api/login-links` with the token, a logged-in page's "Login link" button.
   */
  loginHint?: string;
}

/** An inspector of one harness. */
export interface Inspector {
  /** Answers a request (the page, its assets, its API). */
  readonly fetch: (request: Request) => Promise<Response>;
  /**
   * A one-time URL that logs a browser in: it sets a session cookie (never the token) and
   * redirects to the page; used once, or after its lifetime, it is refused (401). `serverUrl` is where the server that mounts the
   * inspector listens (`http://127.0.0.1:7701`; `basePath` is added). Call it again for another
   * link whenever one is needed (a browser whose session ended, another browser); so does
   * `POST <basePath>/api/login-links` with the token (`{ "url": … }`).
   */
  loginUrl(serverUrl: string): Promise<string>;
  /** Stops watching the harness and ends the live streams of open pages. */
  close(): void;
  /** Closes it as `close` does: `await using ui = inspector(harness, …)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The default of {@linkcode InspectorOptions.maxStreamQueueBytes}: 1 MiB. */
export const DEFAULT_MAX_STREAM_QUEUE_BYTES = 1024 * 1024;

const OUTCOMES: readonly InteractionOutcome[] = ["approved", "denied", "answered"];

/**
 * An inspector of `harness`: mount `fetch` in a server bound to 127.0.0.1, and open the page
 * through {@linkcode Inspector.loginUrl}.
 *
 * ```ts
 * import { Harness, inspector, randomInspectorToken, serveInspector } from "bma-executor-sdk/harness/node";
 *
 * const harness = new Harness({ insecureNoAuth: true });
 * await harness.serve({ port: 7700 });
 * const ui = inspector(harness, { token: randomInspectorToken() });
 * const server = await serveInspector(ui, { port: 7701 });
 * console.log("inspector", await ui.loginUrl(server.url));
 * ```
 */
export function inspector(harness: Harness, options: InspectorOptions): Inspector {
  const clock = options.clock ?? systemClock;
  const auth = new InspectorAuth(options.token, {
    clock,
    ...(options.sessionTtlMs !== undefined ? { sessionTtlMs: options.sessionTtlMs } : {}),
    ...(options.loginCodeTtlMs !== undefined ? { loginCodeTtlMs: options.loginCodeTtlMs } : {}),
  });
  const logger = options.logger ?? silentLogger;
  const limits: InspectorLimits = { ...DEFAULT_INSPECTOR_LIMITS, ...options.limits };
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const maxStreamQueueBytes = options.maxStreamQueueBytes ?? DEFAULT_MAX_STREAM_QUEUE_BYTES;
  const unsent = new UnsentBudget(options.maxUnsentBytes ?? 64 * 1024 * 1024);
  const base = normalizeBasePath(options.basePath);
  const model = new InspectorModel(harness, limits, clock);
  const streams = new Set<() => void>();
  let closed = false;

  const app = new Hono();
  const loginPath = `${base}/login`;
  // Routes are registered with the base path written out: the page lives at `${base}/`.
  const at = (path: string) => `${base}${path}`;

  // The page a browser without a session gets (its inline style allowed by its hash).
  const help = (reason: "link" | "session") =>
    loginHelpHtml({
      base,
      reason,
      loginCodeTtlMs: auth.loginCodeTtlMs,
      sessionTtlMs: auth.sessionTtlMs,
      ...(options.loginHint ? { hint: options.loginHint } : {}),
    });
  const helpCsp = styleHash(LOGIN_HELP_CSS).then((hash) =>
    SECURITY_HEADERS["content-security-policy"].replace("style-src 'self'", `style-src '${hash}'`)
  );
  /** 401: a page saying how to get in for a browser, JSON for the rest. */
  async function refused(request: Request, reason: "link" | "session"): Promise<Response> {
    const accept = request.headers.get("accept") ?? "";
    if (request.method !== "GET" || !/\btext\/html\b/i.test(accept)) return refusedJson();
    return new Response(help(reason), {
      status: 401,
      headers: {
        ...SECURITY_HEADERS,
        "content-type": "text/html; charset=utf-8",
        "content-security-policy": await helpCsp,
        "www-authenticate": 'Bearer realm="bma-inspector"',
      },
    });
  }
  const favicons = new Set([at("/favicon.svg"), at("/favicon.ico")]);

  app.use("*", async (c, next) => {
    // The icon is the same for everyone (the page without a session shows it too).
    if ((c.req.method === "GET" || c.req.method === "HEAD") && favicons.has(c.req.path)) {
      return asset(FAVICON_SVG, "image/svg+xml");
    }
    // The one-time login is the only request that answers without the token.
    if (c.req.method === "GET" && c.req.path === loginPath) {
      const code = c.req.query("code");
      const session = code ? await auth.redeem(code) : undefined;
      if (!session) return refused(c.req.raw, "link");
      return new Response(null, {
        status: 303,
        headers: {
          location: `${base}/`,
          "set-cookie": `${auth.cookieName}=${session}; Path=${base || "/"}; Max-Age=${
            Math.floor(auth.sessionTtlMs / 1000)
          }; HttpOnly; SameSite=Strict`,
          ...SECURITY_HEADERS,
        },
      });
    }
    if (!(await auth.admits(c.req.raw.headers))) return refused(c.req.raw, "session");
    if (base !== "" && c.req.path === base) {
      // The page's links are relative to its own directory.
      return new Response(null, {
        status: 308,
        headers: { location: `${base}/`, ...SECURITY_HEADERS },
      });
    }
    if (c.req.method !== "GET" && c.req.method !== "HEAD") {
      // Cross-site writes: a browser sends JSON to another origin only after a preflight that
      // this handler never answers, and an Origin other than ours is refused outright.
      if (isCrossOrigin(c.req.raw)) {
        return json(403, { error: { code: "forbidden", message: "cross-origin request" } });
      }
      // A file's bytes go as they are; everything else is JSON. Either needs a preflight.
      const wanted = c.req.path.endsWith("/files/upload")
        ? "application/octet-stream"
        : "application/json";
      if (!(c.req.header("content-type") ?? "").startsWith(wanted)) {
        return json(415, {
          error: { code: "unsupported_media_type", message: `send ${wanted}` },
        });
      }
    }
    await next();
  });

  app.get(at("/"), () => asset(INDEX_HTML, "text/html; charset=utf-8"));
  app.get(at("/app.js"), () => asset(APP_JS, "text/javascript; charset=utf-8"));
  app.get(at("/app.css"), () => asset(APP_CSS, "text/css; charset=utf-8"));
  app.get(at("/dom.js"), () => asset(DOM_JS, "text/javascript; charset=utf-8"));

  app.get(at("/api/state"), () => json(200, model.snapshot()));

  app.get(at("/api/stream"), (c) => {
    if (closed) return json(503, { error: { code: "closed", message: "inspector closed" } });
    return eventStream(c.req.raw.signal);
  });

  app.post(at("/api/login-links"), async (c) => {
    const url = await loginUrlFor(new URL(c.req.url).origin);
    return json(201, { url });
  });

  app.post(at("/api/executors/:id/sessions"), async (c) => {
    const executor = executorOf(param(c, "id"));
    const body = await readBody(c);
    const requested = optionalString(body, "session_id");
    const sessionId = requested || randomId("ses_");
    const session = await executor.assignSession({
      session_id: sessionId,
      metadata: { source: "harness" },
    });
    session.ready().catch((error) => report(`session ${sessionId} not ready`, error));
    return json(201, { session_id: session.id });
  });

  app.post(at("/api/executors/:id/drain"), async (c) => {
    const executor = executorOf(param(c, "id"));
    await readBody(c);
    return json(200, await executor.drain());
  });

  app.post(at("/api/executors/:id/turns"), async (c) => {
    const executor = executorOf(param(c, "id"));
    const body = await readBody(c);
    const text = requiredString(body, "text");
    const sessionId = optionalString(body, "session_id") || randomId("ses_");
    const turnId = randomId("turn_");
    const result = await executor.startTurn({
      session_id: sessionId,
      turn_id: turnId,
      input: [{ type: "text", text }],
    });
    return json(201, { session_id: sessionId, turn_id: turnId, duplicate: result.duplicate });
  });

  app.post(at("/api/sessions/:id/calls"), async (c) => {
    const session = sessionOf(param(c, "id"));
    const body = await readBody(c);
    const tool = requiredString(body, "tool");
    const input = body.input ?? {};
    if (typeof input !== "object" || input === null || Array.isArray(input)) {
      throw new ApiError(400, "bad_request", "input must be an object");
    }
    const timeout = body.timeout_ms;
    if (timeout !== undefined && (!Number.isInteger(timeout) || (timeout as number) < 1)) {
      throw new ApiError(400, "bad_request", "timeout_ms must be a positive integer");
    }
    const id = randomId("call_");
    model.requested(id, session.id, session.executor.id, tool, input);
    const call = session.callTool({
      tool,
      input: input as Record<string, unknown>,
      tool_call_id: id,
      ...(timeout !== undefined ? { timeout_ms: timeout as number } : {}),
    });
    // A refusal before the call goes out (its input, an ended session) is the answer; a call
    // under way answers 202 and is followed on the page.
    const refusal = await Promise.race([
      call.then(() => undefined, (error) => ({ error })),
      nextTask(),
    ]);
    if (refusal && model.call(id)?.state === "requested") {
      model.refused(id, refusal.error);
      throw refusal.error;
    }
    // A later refusal (a store that answers asynchronously) shows in the call's row.
    call.catch((error) => model.refused(id, error));
    return json(202, { tool_call_id: id });
  });

  app.post(at("/api/sessions/:id/calls/:call/cancel"), async (c) => {
    const session = sessionOf(param(c, "id"));
    await readBody(c);
    const result = await session.cancelTool(param(c, "call"), "canceled from the inspector");
    return json(200, result);
  });

  app.post(at("/api/sessions/:id/stop"), async (c) => {
    const session = sessionOf(param(c, "id"));
    const body = await readBody(c);
    const reason = optionalString(body, "reason") || "stopped from the inspector";
    session.stop(reason).catch((error) => report(`stop of ${session.id} failed`, error));
    return json(202, { stopping: session.id });
  });

  app.post(at("/api/interactions/:id/respond"), async (c) => {
    const view = model.interaction(param(c, "id"));
    if (!view) throw new ApiError(404, "not_found", "no such interaction");
    const body = await readBody(c);
    const outcome = requiredString(body, "outcome") as InteractionOutcome;
    if (!OUTCOMES.includes(outcome)) {
      throw new ApiError(400, "bad_request", `outcome must be one of ${OUTCOMES.join(", ")}`);
    }
    const answer = optionalString(body, "answer");
    const message = optionalString(body, "message");
    const executor = executorOf(view.executorId);
    const interactionId = (view.interaction as { interaction_id?: unknown }).interaction_id;
    if (typeof interactionId !== "string") {
      throw new ApiError(409, "conflict", "the interaction has no executor id");
    }
    // Delivered (and resent) in the background; the page sees the interaction settle.
    executor.respondInteraction({
      session_id: view.sessionId,
      interaction_id: interactionId,
      outcome,
      ...(answer ? { answer } : {}),
      ...(message ? { message } : {}),
    }).then(
      (result) => {
        if (!result.accepted) model.notice(`answer to ${view.id} not accepted by the executor`);
      },
      (error) => report(`answer to ${view.id} not delivered`, error),
    );
    return json(202, { responding: view.id });
  });

  const terminals = machineRoutes(app, {
    at,
    sessionOf,
    readBody,
    logger,
    now: () => clock.now(),
    maxStreamQueueBytes,
    unsent,
    maxUploadBytes: options.maxUploadBytes ?? 8 * 1024 * 1024,
  });

  app.notFound(() => json(404, { error: { code: "not_found", message: "no such page" } }));

  app.onError(routeErrorAnswer(logger, "inspector", json));

  function report(what: string, error: unknown): void {
    const view = errorView(error);
    model.notice(`${what}: ${view.name}: ${view.message}`);
    logger.info("inspector action failed", { action: what, error: view.message });
  }

  function executorOf(id: string) {
    const executor = harness.executor(id);
    if (!executor) throw new ApiError(404, "not_found", "no such executor");
    return executor;
  }

  function sessionOf(id: string) {
    const session = harness.sessions.get(id) ?? harness.session(id);
    if (session) return session;
    const seen = model.session(id);
    if (seen?.state === "ended") {
      throw new SessionEndedError(id, seen.reason ?? "ended");
    }
    throw new ApiError(404, "not_found", "no such session");
  }

  function readBody(c: Context): Promise<Record<string, unknown>> {
    return requestObject(c.req.raw, maxBodyBytes);
  }

  /** Each batch is encoded once, however many pages follow (the model hands all the same one). */
  const encodedBatches = new WeakMap<InspectorBatch, Uint8Array>();
  function encodedBatch(batch: InspectorBatch): Uint8Array {
    let bytes = encodedBatches.get(batch);
    if (!bytes) {
      encodedBatches.set(
        batch,
        bytes = encoder.encode(serverSentEvent({ event: "update", data: batch })),
      );
    }
    return bytes;
  }

  function eventStream(signal: AbortSignal): Response {
    const { response } = boundedEventStream({
      signal,
      maxQueueBytes: maxStreamQueueBytes,
      budget: unsent,
      logger,
      headers: SECURITY_HEADERS,
    }, (sink) => {
      const subscription = model.subscribe((batch: InspectorBatch) =>
        sink.write(encodedBatch(batch))
      );
      const close = () => sink.end();
      streams.add(close);
      sink.write(encoder.encode(serverSentEvent({ event: "snapshot", data: model.snapshot() })));
      return () => {
        subscription.dispose();
        streams.delete(close);
      };
    });
    return response;
  }

  async function loginUrlFor(origin: string): Promise<string> {
    const code = await auth.issueCode();
    return `${origin}${loginPath}?code=${code}`;
  }

  function close(): void {
    if (closed) return;
    closed = true;
    model.close();
    terminals.close();
    for (const end of [...streams]) end();
  }

  return {
    fetch: async (request: Request) => {
      try {
        return await app.fetch(request);
      } catch (error) {
        logger.error("inspector request failed", { error: String(error) });
        return json(500, { error: { code: "internal_error", message: "internal error" } });
      }
    },
    loginUrl: (serverUrl: string) => loginUrlFor(new URL(serverUrl).origin),
    close,
    [Symbol.asyncDispose]: () => Promise.resolve(close()),
  };
}

const encoder = new TextEncoder();

function refusedJson(): Response {
  return new Response(
    JSON.stringify({ error: { code: "unauthorized", message: "token needed" } }),
    {
      status: 401,
      headers: {
        "content-type": "application/json",
        "www-authenticate": 'Bearer realm="bma-inspector"',
        ...SECURITY_HEADERS,
      },
    },
  );
}

/** A CSP source of `css`'s SHA-256 (`sha256-<base64>`). */
async function styleHash(css: string): Promise<string> {
  const bytes = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(css)));
  return `sha256-${toBase64(bytes)}`;
}

/** Resolves after the tasks queued now (a refusal of a call is made by then). */
function nextTask(): Promise<undefined> {
  return new Promise((resolve) => setTimeout(() => resolve(undefined), 0));
}
