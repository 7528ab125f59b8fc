/**
 * What the inspector's routes share: the security headers of every answer, JSON and asset
 * answers, and reading a request's members (a refusal is the HTTP faces' one `ApiError`).
 *
 * Portable: web-standard APIs only.
 */
import type { Context } from "hono";
import { ApiError } from "../shared/api-error.ts";

/** The headers of every answer: the page runs only its own scripts, in no frame. */
export const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

/** A path parameter of the route (its paths are written out, so hono cannot type them). */
export function param(c: Context, name: string): string {
  const value = c.req.param(name);
  if (value === undefined) throw new ApiError(404, "not_found", `no ${name} in the path`);
  return value;
}

/** A JSON answer. */
export function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...SECURITY_HEADERS },
  });
}

/** An answer of one of the page's own files. */
export function asset(text: string, type: string): Response {
  return new Response(text, {
    status: 200,
    headers: { "content-type": type, ...SECURITY_HEADERS },
  });
}

/** A member that must be a non-empty string. */
export function requiredString(body: Record<string, unknown>, key: string): string {
  const value = body[key];
  if (typeof value !== "string" || value === "") {
    throw new ApiError(400, "bad_request", `${key} must be a non-empty string`);
  }
  return value;
}

/** A member that may be a string. */
export function optionalString(body: Record<string, unknown>, key: string): string | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new ApiError(400, "bad_request", `${key} must be a string`);
  return value;
}
