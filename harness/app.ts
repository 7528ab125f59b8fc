/**
 * The harness's HTTP side as a hono app (http.md): the self-hosted token endpoints, artifact
 * uploads, the WebSocket connect endpoint and, when asked for, `GET /metrics`. Web-standard
 * `Request` in, `Response` out, so it mounts in any server.
 */
import { describeError } from "../protocol/errors.ts";
import { Hono } from "hono";
import { type ArtifactStore, ArtifactStoreFullError } from "./artifacts.ts";
import { type Authenticate, bearerToken, type Principal } from "./principal.ts";
import type { TokenIssuer } from "../http/token-endpoint/token-issuer.ts";
import { type MetricsRoute, serveMetrics } from "../http/metrics/endpoint.ts";
import type { WebSocketLike } from "../transport/websocket.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Clock } from "../protocol/clock.ts";
import { LogThrottle } from "../protocol/log-throttle.ts";
import { type HarnessReadiness, standsAside } from "./readiness.ts";
import { jsonAnswer as json } from "../http/shared/json-answer.ts";
import { bearer } from "../http/shared/bearer.ts";
import { browserRefusal } from "../http/shared/host-origin.ts";
import { JsonBodyError, readBoundedBytes, readJsonObject } from "../http/shared/json-body.ts";

/**
 * Upgrades a request to a WebSocket on runtimes whose servers do it natively (Deno's
 * `Deno.upgradeWebSocket`, a Workers `WebSocketPair`): returns the server socket and the
 * 101 response, which must carry `sec-websocket-protocol: <protocol>`.
 */
export type WebSocketUpgrader = (
  request: Request,
  protocol: string,
) => { socket: WebSocketLike; response: Response };

/** Options of {@linkcode Harness.fetch}. */
export interface FetchOptions {
  /** How to upgrade a connect request on this runtime; without it a connect request gets 426. */
  upgrade?: WebSocketUpgrader;
}

/** The paths that accept a WebSocket upgrade. */
export const CONNECT_PATHS: readonly string[] = ["/", "/v1/executors/connect"];

/** What the app needs from the harness (internal). */
export interface HarnessAppDeps {
  readonly tokens: TokenIssuer | undefined;
  readonly authenticate: Authenticate | undefined;
  readonly artifacts: ArtifactStore;
  readonly maxArtifactBytes: number;
  readonly logger: Logger;
  /** The harness's clock (how often a refusal is logged). */
  readonly clock: Clock;
  /** The harness's readiness now: one that stands aside answers executors' requests 503. */
  readiness(): HarnessReadiness;
  /** Handles a WebSocket connect request. */
  connect(request: Request, options: FetchOptions): Promise<Response>;
  /** `GET <path>` answers the metrics (opt-in: none, no route). */
  readonly metrics?: MetricsRoute & { readonly path: string };
}

type Env = { Bindings: FetchOptions };

/** How many uploads of the largest size a harness holds at once (more wait: 503). */
const UPLOADS_AT_ONCE = 4;

/** What an upload counts against the bound: the length it declares, else the largest. */
function uploadCost(request: Request, maxBytes: number): number {
  const declared = Number(request.headers.get("content-length") ?? Number.NaN);
  return Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, maxBytes) : maxBytes;
}

/** Largest token-exchange body read: `{}`, or the legacy alias's `{"environment_id": "..."}`. */
const MAX_TOKEN_BODY_BYTES = 4 * 1024;

/**
 * The JSON object of a token exchange's body (`{}` for an empty one), read at most
 * {@linkcode MAX_TOKEN_BODY_BYTES}, or the answer refusing it: 400 `bad_request` for anything but
 * an object (http.md), 413 `too_large` past the bound, 408 for a body that stopped arriving.
 */
async function tokenRequestBody(request: Request): Promise<Record<string, unknown> | Response> {
  try {
    return await readJsonObject(request, MAX_TOKEN_BODY_BYTES);
  } catch (error) {
    if (!(error instanceof JsonBodyError)) throw error;
    return bodyRefusal(error);
  }
}

/**
 * The answer refusing a request a browser sent for a web page ({@linkcode browserRefusal}):
 * 403 `forbidden_origin`, or 421 `misdirected_request`; `undefined` for any other request.
 */
export function browserAnswer(request: Request, unauthenticated: boolean): Response | undefined {
  const refused = browserRefusal(request, unauthenticated);
  if (!refused) return undefined;
  const [status, message] = refused;
  return json(status, {
    error: status === 403 ? "forbidden_origin" : "misdirected_request",
    message,
  });
}

/** The answer to a body refused while it was read, in the `{"error": "..."}` shape of http.md. */
function bodyRefusal(error: JsonBodyError): Response {
  const code = error.status === 413
    ? "too_large"
    : error.status === 408
    ? "request_timeout"
    : error.status === 415
    ? "unsupported_media_type"
    : "bad_request";
  return json(error.status, { error: code });
}

/** Builds the harness's hono app. */
export function createHarnessApp(deps: HarnessAppDeps): Hono<Env> {
  const app = new Hono<Env>();
  // No face here is served to browsers: a web page's request is refused before any route.
  app.use(async (c, next) => {
    const refused = browserAnswer(c.req.raw, deps.authenticate === undefined);
    if (refused) return refused;
    await next();
  });

  /**
   * 503 from a harness that stands aside (a standby, a fenced one), as its connect requests get:
   * a token signed with its secret, or an artifact in its store, is no use to the executors of
   * the harness that holds the store (their secrets may differ during a rotation).
   */
  const asideAnswer = (): Response | undefined => {
    const readiness = deps.readiness();
    if (!standsAside(readiness)) return undefined;
    return json(503, { error: readiness }, { "retry-after": "1" });
  };

  const refusedExchanges = new LogThrottle(deps.clock);
  const exchange = async (
    scope: "environment" | "machine",
    owner: string,
    request: Request,
    body?: Record<string, unknown>,
  ): Promise<Response> => {
    if (!deps.tokens) return json(404, { error: "not_found" });
    const aside = asideAnswer();
    if (aside) return aside;
    // Only the header: token exchange takes no query token; a malformed header ("") presents none.
    const secret = bearer(request.headers) || undefined;
    if (!secret || !owner) return json(401, { error: "invalid_credential" });
    const issued = await deps.tokens.exchange(scope, owner, secret, new URL(request.url));
    // Fenced while it looked the credential up: the token is the new holder's to give.
    const asideNow = asideAnswer();
    if (asideNow) return asideNow;
    if (!issued) {
      const fields = refusedExchanges.pass({ scope, owner });
      if (fields) deps.logger.info("token exchange refused", fields);
      return json(401, { error: "invalid_credential" });
    }
    // The body (`{}`) is read only once the credential proved good (nothing is kept of it).
    if (body === undefined) {
      const read = await tokenRequestBody(request);
      if (read instanceof Response) return read;
    }
    return json(200, issued);
  };

  app.post(
    "/v1/machines/:machine_id/token",
    (c) => exchange("machine", c.req.param("machine_id"), c.req.raw),
  );
  app.post(
    "/v1/environments/:environment_id/token",
    (c) => exchange("environment", c.req.param("environment_id"), c.req.raw),
  );
  app.post("/v1/executors/token", async (c) => {
    if (!deps.tokens) return json(404, { error: "not_found" });
    const aside = asideAnswer();
    if (aside) return aside;
    // The environment is named in the body: read (bounded) once a credential is presented.
    if (!bearer(c.req.raw.headers)) return json(401, { error: "invalid_credential" });
    const body = await tokenRequestBody(c.req.raw);
    if (body instanceof Response) return body;
    const environmentId = body.environment_id;
    if (typeof environmentId !== "string" || environmentId === "") {
      return json(400, { error: "bad_request" });
    }
    return exchange("environment", environmentId, c.req.raw, body);
  });

  const upload = async (request: Request, environmentId: string | undefined) => {
    const aside = asideAnswer();
    if (aside) return aside;
    let principal: Principal = {};
    if (deps.authenticate) {
      const url = new URL(request.url);
      try {
        principal = await deps.authenticate({
          kind: "artifact",
          token: bearerToken(request.headers, url),
          url,
          headers: request.headers,
          protocols: [],
        });
      } catch {
        return json(401, { error: "unauthorized" });
      }
    }
    if (
      environmentId !== undefined && principal.environmentId !== undefined &&
      principal.environmentId !== environmentId
    ) {
      return json(403, { error: "forbidden" });
    }
    // Each upload is held whole while it is stored: what they hold at once is bounded, and one
    // past the bound is sent on (503, retry-after: 1; the executor tries again after its backoff).
    const cost = uploadCost(request, deps.maxArtifactBytes);
    if (uploading > 0 && uploading + cost > UPLOADS_AT_ONCE * deps.maxArtifactBytes) {
      return json(503, { error: "busy" }, { "retry-after": "1" });
    }
    uploading += cost;
    try {
      return await store(request, environmentId, principal);
    } finally {
      uploading -= cost;
    }
  };

  /** The bytes uploads are reading or storing now (each counted as it declared, else the bound). */
  let uploading = 0;

  const store = async (
    request: Request,
    environmentId: string | undefined,
    principal: Principal,
  ) => {
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      // Sent or chunked alike, reading stops at the bound.
      bytes = await readBoundedBytes(request, deps.maxArtifactBytes);
    } catch (error) {
      if (!(error instanceof JsonBodyError)) throw error;
      return bodyRefusal(error);
    }
    // Fenced while the body arrived (a large one takes a while): not this store's to keep.
    const asideNow = asideAnswer();
    if (asideNow) return asideNow;
    let name: string | undefined;
    const rawName = request.headers.get("x-artifact-name");
    if (rawName !== null) {
      try {
        name = decodeURIComponent(rawName);
      } catch {
        return json(400, { error: "bad_request" });
      }
    }
    const mimeType = request.headers.get("content-type") ?? undefined;
    try {
      const artifact = await deps.artifacts.put({
        bytes,
        ...(name !== undefined ? { name } : {}),
        ...(mimeType !== undefined ? { mimeType } : {}),
        ...(environmentId !== undefined
          ? { environmentId }
          : principal.environmentId !== undefined
          ? { environmentId: principal.environmentId }
          : {}),
      });
      return json(201, artifact);
    } catch (error) {
      if (!(error instanceof ArtifactStoreFullError)) throw error;
      deps.logger.warn("artifact refused: the store is full", { size: bytes.byteLength });
      return json(507, { error: "insufficient_storage" });
    }
  };

  app.post(
    "/v1/environments/:environment_id/artifacts",
    (c) => upload(c.req.raw, c.req.param("environment_id")),
  );
  app.post("/v1/executors/artifacts", (c) => upload(c.req.raw, undefined));

  const metrics = deps.metrics;
  if (metrics) app.get(metrics.path, (c) => serveMetrics(c.req.raw, metrics, deps.logger));

  for (const path of CONNECT_PATHS) {
    app.get(path, (c) => deps.connect(c.req.raw, c.env ?? {}));
  }

  app.notFound(() => json(404, { error: "not_found" }));
  app.onError((error) => {
    deps.logger.error("HTTP handler failed", { error: describeError(error) });
    return json(500, { error: "internal_error" });
  });
  return app;
}
