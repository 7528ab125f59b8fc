/**
 * Base64 of bytes and back, as the wire carries binary data (`encoding: "base64"`), in chunks so
 * that a large buffer never becomes one argument list.
 *
 * Portable: web-standard APIs only.
 */

/** Base64 (with padding) of `bytes`. */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** The bytes of base64 `text` (throws on text that is not base64). */
export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}
