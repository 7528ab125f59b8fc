/**
 * HS256 JSON Web Tokens on WebCrypto (`crypto.subtle`): signing and verifying the short-lived
 * executor tokens of the self-hosted token endpoint. The HMAC itself and the constant-time
 * comparison are WebCrypto's (`sign` / `verify`); this file only frames the token.
 */
import { TokenRejectedError } from "../../harness/errors.ts";
import { fromBase64, toBase64 } from "../../protocol/base64.ts";

/** Claims of a token. `iat`, `nbf` and `exp` are seconds since the epoch. */
export interface JwtClaims {
  /** Issuer. */
  iss?: string;
  /** Subject: whom the token is for. */
  sub?: string;
  /** Issued at. */
  iat?: number;
  /** Not valid before. */
  nbf?: number;
  /** Expires at. */
  exp?: number;
  /** Any other claim. */
  [claim: string]: unknown;
}

/** Options of {@linkcode HmacJwt.verify}. */
export interface JwtVerifyOptions {
  /** The current time in ms since the epoch (the harness's clock). */
  now: number;
  /** When set, `iss` must equal it. */
  issuer?: string;
  /** Tolerated clock skew for `exp` / `nbf`, in seconds. Default 0. */
  leewaySeconds?: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const HEADER = base64UrlEncode(encoder.encode(JSON.stringify({ alg: "HS256", typ: "JWT" })));
/** RFC 7518 §3.2: an HS256 key must be at least as long as the hash output. */
const MIN_SECRET_BYTES = 32;

/** Signs and verifies HS256 JWTs with one secret. */
export class HmacJwt {
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey) {
    this.#key = key;
  }

  /** Imports `secret` (at least 32 bytes) as an HMAC-SHA-256 key. */
  static async create(secret: string | Uint8Array): Promise<HmacJwt> {
    const raw = typeof secret === "string" ? encoder.encode(secret) : secret;
    if (raw.byteLength < MIN_SECRET_BYTES) {
      throw new RangeError(`an HS256 secret needs at least ${MIN_SECRET_BYTES} bytes`);
    }
    const key = await crypto.subtle.importKey(
      "raw",
      raw as Uint8Array<ArrayBuffer>,
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
    return new HmacJwt(key);
  }

  /** Returns a compact JWS of `claims`. */
  async sign(claims: JwtClaims): Promise<string> {
    const payload = base64UrlEncode(encoder.encode(JSON.stringify(claims)));
    const input = `${HEADER}.${payload}`;
    const signature = await crypto.subtle.sign("HMAC", this.#key, encoder.encode(input));
    return `${input}.${base64UrlEncode(new Uint8Array(signature))}`;
  }

  /**
   * Verifies signature, algorithm, expiry and issuer; resolves with the claims. Rejects with
   * {@linkcode TokenRejectedError} (whose message never contains the token).
   */
  async verify(token: string, options: JwtVerifyOptions): Promise<JwtClaims> {
    const parts = token.split(".");
    if (parts.length !== 3) throw new TokenRejectedError("malformed");
    const [headerPart, payloadPart, signaturePart] = parts;
    const header = parseJson(headerPart);
    if (!header) throw new TokenRejectedError("malformed");
    // Only HS256: "none" and every other algorithm are refused before the signature is read.
    if (header.alg !== "HS256") throw new TokenRejectedError("algorithm");
    const signature = base64UrlDecode(signaturePart);
    if (!signature) throw new TokenRejectedError("malformed");
    const valid = await crypto.subtle.verify(
      "HMAC",
      this.#key,
      signature as Uint8Array<ArrayBuffer>,
      encoder.encode(`${headerPart}.${payloadPart}`),
    );
    if (!valid) throw new TokenRejectedError("signature");
    const claims = parseJson(payloadPart);
    if (!claims) throw new TokenRejectedError("malformed");
    const now = options.now / 1000;
    const leeway = options.leewaySeconds ?? 0;
    if (typeof claims.exp !== "number" || !Number.isFinite(claims.exp)) {
      throw new TokenRejectedError("claims");
    }
    if (claims.exp + leeway <= now) throw new TokenRejectedError("expired");
    if (typeof claims.nbf === "number" && claims.nbf - leeway > now) {
      throw new TokenRejectedError("claims");
    }
    if (options.issuer !== undefined && claims.iss !== options.issuer) {
      throw new TokenRejectedError("issuer");
    }
    return claims as JwtClaims;
  }
}

function parseJson(part: string): Record<string, unknown> | undefined {
  const bytes = base64UrlDecode(part);
  if (!bytes) return undefined;
  try {
    const value: unknown = JSON.parse(decoder.decode(bytes));
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? value as Record<string, unknown>
      : undefined;
  } catch {
    return undefined;
  }
}

/** Base64url without padding (RFC 7515 §2). */
export function base64UrlEncode(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Decodes base64url (no padding); `undefined` for anything else. */
export function base64UrlDecode(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return undefined;
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  try {
    return fromBase64(padded);
  } catch {
    return undefined;
  }
}
