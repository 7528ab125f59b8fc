/**
 * The health routes a supervisor and a load balancer probe: `GET /healthz` answers 200 while the
 * process serves HTTP at all (restart it when this fails), `GET /readyz` 200 only while the
 * harness holds its store and takes executors, 503 while it starts, stands by, drains, is fenced
 * or closed (send executors elsewhere). The body names the state either way.
 *
 * Portable: a hono app over anything that tells its readiness.
 *
 * @module
 */
import { Hono } from "hono";
import type { HarnessReadiness } from "../../harness/readiness.ts";

/** What the health routes read: the harness's readiness now. */
export interface ReadinessSource {
  /** `serving` answers 200; anything else 503 (`Harness.readiness`). */
  readonly readiness: HarnessReadiness;
}

/** The path a liveness probe asks. */
export const HEALTHZ_PATH = "/healthz";
/** The path a readiness probe asks. */
export const READYZ_PATH = "/readyz";

const headers = { "content-type": "application/json", "cache-control": "no-store" };

/** `GET /healthz` and `GET /readyz` over `harness` (mount it before the harness's own routes). */
export function healthRoutes(harness: ReadinessSource): Hono {
  const app = new Hono();
  app.get(HEALTHZ_PATH, () => new Response('{"status":"ok"}', { status: 200, headers }));
  app.get(READYZ_PATH, () => {
    const status = harness.readiness;
    return new Response(JSON.stringify({ status }), {
      status: status === "serving" ? 200 : 503,
      headers,
    });
  });
  return app;
}
