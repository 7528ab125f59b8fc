/**
 * `GET /metrics` on the harness's HTTP side: the harness's metrics as OpenMetrics text, for a
 * scraper. Opt-in (`metricsEndpoint`), and every scrape is authorized first, as the other
 * operator routes are (the brain API, the inspector): the numbers say how busy the harness is
 * and how many executors it holds, which is not for anyone who can reach its port. A refusal
 * is the faces' one 401, which quotes nothing the request presented.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */
import type { Logger } from "../../protocol/logger.ts";
import { admits, type Authorize } from "../shared/bearer.ts";
import { unauthorizedAnswer } from "../shared/api-error.ts";

/** Options of the harness's metrics endpoint (`HarnessOptions.metricsEndpoint`). */
export interface MetricsEndpointOptions {
  /**
   * Decides on every scrape (false, or a throw: 401). There is no default:
   * `bearerAuthorize(token)` checks a bearer token (what Prometheus's `authorization` scrape
   * setting sends); `() => true` serves anyone who can reach the port, for a network you
   * trust completely.
   */
  authorize: Authorize;
  /**
   * Labels put on every sample (`{ harness: "eu-1" }`); names are checked when the harness is
   * made (`MetricsLabelError`).
   */
  labels?: Readonly<Record<string, string>>;
}

/** The path the metrics are served at. */
export const METRICS_PATH = "/metrics";

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
  if (!(await admits(route.authorize, request, logger, "metrics"))) {
    return unauthorizedAnswer(request, "bma-metrics");
  }
  return new Response(route.text(), {
    status: 200,
    headers: { "content-type": route.contentType, "cache-control": "no-store" },
  });
}
