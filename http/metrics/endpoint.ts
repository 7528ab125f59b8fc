/**
 * `GET /metrics` on the harness's HTTP side: the harness's metrics as OpenMetrics text, for a
 * scraper. Opt-in (`metricsEndpoint`), and every scrape is authorized first, as the other
 * operator routes are (the brain API, the inspector): the numbers say how busy the harness is
 * and how many executors it holds, which is not for anyone who can reach its port. A refusal
 * is a bare 401 that quotes nothing the request presented.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */
import { LocalError } from "../../protocol/errors.ts";
import type { Logger } from "../../protocol/logger.ts";
import { bearer, tokensEqual } from "../shared/bearer.ts";

/** Options of the harness's metrics endpoint (`HarnessOptions.metricsEndpoint`). */
export interface MetricsEndpointOptions {
  /**
   * Decides on every scrape (false, or a throw: 401). There is no default:
   * {@linkcode metricsBearer} checks a bearer token (what Prometheus's `authorization` scrape
   * setting sends); `() => true` serves anyone who can reach the port, for a network you
   * trust completely.
   */
  authorize(request: Request): boolean | Promise<boolean>;
  /**
   * Labels put on every sample (`{ harness: "eu-1" }`); names are checked when the harness is
   * made (`MetricsLabelError`).
   */
  labels?: Readonly<Record<string, string>>;
}

/** The path the metrics are served at. */
export const METRICS_PATH = "/metrics";

/** The shortest token {@linkcode metricsBearer} takes: 16 characters. */
export const MIN_METRICS_TOKEN_LENGTH = 16;

/** The token given to {@linkcode metricsBearer} is too short to protect the endpoint. */
export class MetricsTokenError extends LocalError {
  /** Says how long a token must be. */
  constructor() {
    super(`a metrics token needs at least ${MIN_METRICS_TOKEN_LENGTH} characters`);
    this.name = "MetricsTokenError";
  }
}

/**
 * An `authorize` that admits scrapes carrying `Authorization: Bearer <token>`, compared in time
 * that does not depend on where a presented token differs. Throws {@linkcode MetricsTokenError}
 * for a token shorter than 16 characters.
 */
export function metricsBearer(token: string): (request: Request) => Promise<boolean> {
  if (typeof token !== "string" || token.length < MIN_METRICS_TOKEN_LENGTH) {
    throw new MetricsTokenError();
  }
  return async (request) => {
    const presented = bearer(request.headers);
    // Neither a missing header (null) nor a malformed one ("") is compared.
    return presented !== null && presented !== "" && await tokensEqual(presented, token);
  };
}

/** What the route needs (internal): the check, and the text of the metrics now. */
export interface MetricsRoute {
  readonly authorize: MetricsEndpointOptions["authorize"];
  /** The OpenMetrics text of the metrics now. */
  text(): string;
  /** Its content type. */
  readonly contentType: string;
}

/** Answers one scrape: the text when `authorize` admits it, else 401. */
export async function serveMetrics(
  request: Request,
  route: MetricsRoute,
  logger: Logger,
): Promise<Response> {
  let admitted = false;
  try {
    admitted = (await route.authorize(request)) === true;
  } catch (error) {
    // Only the error's class: its message may quote what the request presented.
    logger.warn("metrics authorize failed", {
      error: error instanceof Error ? error.name : typeof error,
    });
  }
  if (!admitted) {
    return new Response(JSON.stringify({ error: "unauthorized" }), {
      status: 401,
      headers: { "content-type": "application/json", "www-authenticate": "Bearer" },
    });
  }
  return new Response(route.text(), {
    status: 200,
    headers: { "content-type": route.contentType, "cache-control": "no-store" },
  });
}
