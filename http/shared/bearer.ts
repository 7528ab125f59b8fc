/**
 * Bearer credentials on the harness's HTTP faces — the brain API, the metrics endpoint, the
 * inspector and the token endpoint: the one rule a token an operator configures must meet
 * ({@linkcode MIN_TOKEN_LENGTH}), the one `authorize` that checks it ({@linkcode bearerAuthorize}),
 * the token an `Authorization: Bearer <token>` header presents, and comparisons of secrets in time
 * that does not depend on their contents. Secrets are compared through their SHA-256 digests, so
 * neither a common prefix nor a length shows in the timing.
 *
 * Portable: web-standard APIs only (`crypto.subtle`).
 *
 * @module
 */
import { LocalError } from "../../protocol/errors.ts";
import type { Logger } from "../../protocol/logger.ts";

const encoder = new TextEncoder();

/** The SHA-256 digest of `text` (UTF-8). */
export async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/** Whether two digests are equal, looking at every byte whatever the first difference. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  let difference = a.length ^ b.length;
  for (let i = 0; i < a.length && i < b.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}

/**
 * Whether `presented` equals `expected`, in time independent of their contents: both are
 * hashed first, so neither a common prefix nor a length shows in the timing.
 */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(presented), sha256(expected)]);
  return sameBytes(a, b);
}

/** The bearer token of an `Authorization` header; null when there is none, "" when malformed. */
export function bearer(headers: Headers): string | null {
  const authorization = headers.get("authorization");
  if (!authorization) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return match ? match[1] : "";
}

/** The shortest token a face takes (the brain API, the metrics endpoint, the inspector): 16 characters. */
export const MIN_TOKEN_LENGTH = 16;

/** A token given to a face is too short to protect it (under {@linkcode MIN_TOKEN_LENGTH}). */
export class TokenTooShortError extends LocalError {
  /** Says how long a token must be. */
  constructor() {
    super(`a token needs at least ${MIN_TOKEN_LENGTH} characters`);
    this.name = "TokenTooShortError";
  }
}

/** Throws {@linkcode TokenTooShortError} unless `token` is a string of the length the rule asks. */
export function requireTokenLength(token: string): void {
  if (typeof token !== "string" || token.length < MIN_TOKEN_LENGTH) throw new TokenTooShortError();
}

/** Decides on a request (false, or a throw: 401): the `authorize` option of every face. */
export type Authorize = (request: Request) => boolean | Promise<boolean>;

/**
 * An `authorize` that admits requests carrying `Authorization: Bearer <token>`, compared in time
 * that does not depend on where a presented token differs: for the brain API (`brainApi`'s
 * `authorize`), the metrics endpoint (`metricsEndpoint.authorize`; what Prometheus's
 * `authorization` scrape setting sends). Throws {@linkcode TokenTooShortError} for a token
 * shorter than {@linkcode MIN_TOKEN_LENGTH}.
 */
export function bearerAuthorize(token: string): (request: Request) => Promise<boolean> {
  requireTokenLength(token);
  return async (request) => {
    const presented = bearer(request.headers);
    // Neither a missing header (null) nor a malformed one ("") is compared.
    return presented !== null && presented !== "" && await tokensEqual(presented, token);
  };
}

/**
 * Whether `authorize` admits `request`: a throw counts as a refusal and is logged by its class
 * only (its message may quote what the request presented).
 */
export async function admits(
  authorize: Authorize,
  request: Request,
  logger: Logger,
  face: string,
): Promise<boolean> {
  try {
    return (await authorize(request)) === true;
  } catch (error) {
    logger.warn(`${face} authorize failed`, {
      error: error instanceof Error ? error.name : typeof error,
    });
    return false;
  }
}
