/**
 * Who may use an inspector: a request carries its token in `Authorization: Bearer <token>`, or
 * in the cookie a browser received from a one-time login URL (`/login?code=…`, which then
 * redirects to the page, so neither the token nor a usable code stays in the address bar, the
 * history or a log). Tokens and codes are compared through their SHA-256 digests, in time that
 * does not depend on where they differ (nor on their lengths).
 *
 * Portable: web-standard APIs only (`crypto.subtle`, `crypto.getRandomValues`).
 */
import { LocalError } from "../../protocol/errors.ts";
import { randomHex } from "../../protocol/ids.ts";

/** The cookie a login URL sets. */
export const INSPECTOR_COOKIE = "bma_inspector";

/** The shortest token an inspector takes: 16 characters. */
export const MIN_INSPECTOR_TOKEN_LENGTH = 16;

/** How many login codes wait for their use at once; a newer one makes the oldest unusable. */
const MAX_PENDING_CODES = 16;

/** The token given to an inspector is too short to protect it. */
export class InspectorTokenError extends LocalError {
  /** Says how long a token must be. */
  constructor() {
    super(`an inspector token needs at least ${MIN_INSPECTOR_TOKEN_LENGTH} characters`);
    this.name = "InspectorTokenError";
  }
}

/** A new random token: 32 random bytes in hex. */
export function randomInspectorToken(): string {
  return randomHex(32);
}

const encoder = new TextEncoder();

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/** Whether two digests are equal, looking at every byte whatever the first difference. */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  let difference = a.length ^ b.length;
  for (let i = 0; i < a.length && i < b.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}

/**
 * Whether `presented` equals `expected`, in time independent of their contents: both are
 * hashed first, so neither a common prefix nor a length shows in the timing.
 */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([digest(presented), digest(expected)]);
  return sameBytes(a, b);
}

/** The value of cookie `name` in a `Cookie` header, if present. */
export function cookieValue(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    if (part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** The token a request presents: its bearer token, else its inspector cookie. */
export function presentedToken(headers: Headers): string | undefined {
  const authorization = headers.get("authorization");
  if (authorization) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match ? match[1] : undefined;
  }
  const cookie = cookieValue(headers.get("cookie"), INSPECTOR_COOKIE);
  if (cookie === undefined) return undefined;
  try {
    return decodeURIComponent(cookie);
  } catch {
    return undefined;
  }
}

/** The inspector's token and its one-time login codes. */
export class InspectorAuth {
  readonly #token: string;
  readonly #tokenDigest: Promise<Uint8Array>;
  /** Digests (hex) of the codes not used yet, oldest first. */
  readonly #codes = new Set<string>();

  /** Guards `token` (at least {@linkcode MIN_INSPECTOR_TOKEN_LENGTH} characters). */
  constructor(token: string) {
    if (typeof token !== "string" || token.length < MIN_INSPECTOR_TOKEN_LENGTH) {
      throw new InspectorTokenError();
    }
    this.#token = token;
    this.#tokenDigest = digest(token);
  }

  /** The token, for the cookie a login sets (URI-encoded there; never logged). */
  get token(): string {
    return this.#token;
  }

  /** Whether the request presents the token (bearer header or cookie). */
  async admits(headers: Headers): Promise<boolean> {
    const presented = presentedToken(headers);
    if (presented === undefined) return false;
    const [a, b] = await Promise.all([digest(presented), this.#tokenDigest]);
    return sameBytes(a, b);
  }

  /** A new one-time login code (valid until used; at most 16 wait at once). */
  async issueCode(): Promise<string> {
    const code = randomHex(24);
    const key = hexOf(await digest(code));
    this.#codes.add(key);
    if (this.#codes.size > MAX_PENDING_CODES) {
      this.#codes.delete(this.#codes.values().next().value!);
    }
    return code;
  }

  /**
   * Uses a login code: true once for a code {@linkcode issueCode} made, false afterwards and for
   * any other string. Codes are looked up by their digest, so the lookup's timing says nothing
   * about the codes themselves.
   */
  async redeem(code: string): Promise<boolean> {
    const key = hexOf(await digest(code));
    return this.#codes.delete(key);
  }
}

function hexOf(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}
