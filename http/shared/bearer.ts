/**
 * Bearer credentials on the harness's HTTP surfaces — the brain API, the inspector and the token
 * endpoint: the token an `Authorization: Bearer <token>` header presents, and comparisons of
 * secrets in time that does not depend on their contents. Secrets are compared through their
 * SHA-256 digests, so neither a common prefix nor a length shows in the timing.
 *
 * Portable: web-standard APIs only (`crypto.subtle`).
 *
 * @module
 */

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
