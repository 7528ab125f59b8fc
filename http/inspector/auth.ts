/**
 * Who may use an inspector: a request carries its token in `Authorization: Bearer <token>`, or
 * the session cookie a browser received from a one-time login URL (`/login?code=…`, which then
 * redirects to the page, so neither a usable code nor the token stays in the address bar, the
 * history, a log or the browser's cookie jar). A code works once and only for
 * {@linkcode DEFAULT_LOGIN_CODE_TTL_MS}; a session lasts {@linkcode DEFAULT_SESSION_TTL_MS}
 * (its cookie too, so it survives a browser restart) and exists in this inspector's memory only.
 * Each inspector names its cookie apart (`bma_inspector_<id>`): two on one host do not log each
 * other out. Tokens, codes and session ids are compared through their SHA-256 digests, in time
 * that does not depend on where they differ (nor on their lengths).
 *
 * Portable: web-standard APIs only (`crypto.subtle`, `crypto.getRandomValues`).
 */
import { type Clock, systemClock } from "../../protocol/clock.ts";
import { hex, randomHex } from "../../protocol/ids.ts";
import { bearer, requireTokenLength, sameBytes, sha256 } from "../shared/bearer.ts";

// The comparison of tokens lives with the other bearer credentials' (the brain API's too).
export { tokensEqual } from "../shared/bearer.ts";

/** The start of every inspector's cookie name; each adds an id of its own. */
export const INSPECTOR_COOKIE = "bma_inspector";

/** How long a login code waits for its use: 10 minutes. */
export const DEFAULT_LOGIN_CODE_TTL_MS = 10 * 60_000;

/** How long a browser stays logged in: 12 hours. */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60_000;

/** How many browser sessions an inspector keeps; a newer one ends the oldest. */
const MAX_SESSIONS = 64;

/** How many login codes wait for their use at once; a newer one makes the oldest unusable. */
const MAX_CODES = 16;

/** A new random token: 32 random bytes in hex. */
export function randomInspectorToken(): string {
  return randomHex(32);
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

/** Options of an {@linkcode InspectorAuth}. */
export interface InspectorAuthOptions {
  /** Measures the codes' and sessions' lifetimes. Default: the system clock. */
  clock?: Clock;
  /** How long a login code waits for its use. Default {@linkcode DEFAULT_LOGIN_CODE_TTL_MS}. */
  loginCodeTtlMs?: number;
  /** How long a browser session lasts. Default {@linkcode DEFAULT_SESSION_TTL_MS}. */
  sessionTtlMs?: number;
}

/** The inspector's token, its one-time login codes and its browser sessions. */
export class InspectorAuth {
  readonly #tokenDigest: Promise<Uint8Array>;
  /** Digests (hex) of the codes not used yet, oldest first, with when each expires. */
  readonly #codes = new Map<string, number>();
  /** Digests (hex) of the sessions' ids, oldest first, with when each expires. */
  readonly #sessions = new Map<string, number>();
  readonly #clock: Clock;
  /** How long a login code waits for its use, in ms. */
  readonly loginCodeTtlMs: number;
  /** How long a session lasts, in ms. */
  readonly sessionTtlMs: number;
  /** This inspector's cookie name. */
  readonly cookieName: string = `${INSPECTOR_COOKIE}_${randomHex(4)}`;

  /** Guards `token` (at least `MIN_TOKEN_LENGTH` characters: `TokenTooShortError`). */
  constructor(token: string, options: InspectorAuthOptions = {}) {
    requireTokenLength(token);
    this.#tokenDigest = sha256(token);
    this.#clock = options.clock ?? systemClock;
    this.loginCodeTtlMs = options.loginCodeTtlMs ?? DEFAULT_LOGIN_CODE_TTL_MS;
    this.sessionTtlMs = options.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS;
  }

  /**
   * Whether the request presents the token (a bearer header) or a live session (this
   * inspector's cookie). A bearer header decides alone: a bad one is not rescued by a cookie.
   */
  async admits(headers: Headers): Promise<boolean> {
    const presented = bearer(headers);
    if (presented !== null) {
      const [a, b] = await Promise.all([sha256(presented), this.#tokenDigest]);
      return sameBytes(a, b);
    }
    const session = cookieValue(headers.get("cookie"), this.cookieName);
    if (!session) return false;
    return live(this.#sessions, hex(await sha256(session)), this.#clock.now());
  }

  /** A new one-time login code (valid once, for the code lifetime; at most 16 wait at once). */
  async issueCode(): Promise<string> {
    const code = randomHex(24);
    const now = this.#clock.now();
    remember(this.#codes, hex(await sha256(code)), now, now + this.loginCodeTtlMs, MAX_CODES);
    return code;
  }

  /**
   * Uses a login code: a new session's id once for a live code {@linkcode issueCode} made,
   * undefined afterwards, after its lifetime, and for any other string. Codes are looked up by
   * their digest, so the lookup's timing says nothing about the codes themselves.
   */
  async redeem(code: string): Promise<string | undefined> {
    const key = hex(await sha256(code));
    const now = this.#clock.now();
    if (!live(this.#codes, key, now)) return undefined;
    this.#codes.delete(key);
    const session = randomHex(32);
    const sessionKey = hex(await sha256(session));
    remember(this.#sessions, sessionKey, now, now + this.sessionTtlMs, MAX_SESSIONS);
    return session;
  }
}

/** Whether `key` is in `entries` and not expired (an expired one is dropped). */
function live(entries: Map<string, number>, key: string, now: number): boolean {
  const expires = entries.get(key);
  if (expires === undefined) return false;
  if (expires > now) return true;
  entries.delete(key);
  return false;
}

/** Adds `key` until `expires`, dropping the entries expired by `now` and the oldest past `max`. */
function remember(
  entries: Map<string, number>,
  key: string,
  now: number,
  expires: number,
  max: number,
): void {
  for (const [k, at] of entries) if (at <= now) entries.delete(k);
  entries.set(key, expires);
  while (entries.size > max) entries.delete(entries.keys().next().value!);
}
