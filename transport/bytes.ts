/** Bytes: frame sizes in UTF-8 measured without encoding the frame, and chunks joined. */

/** The default limit on a frame's size: 16 MiB. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** The size of a string encoded as UTF-8, without allocating the encoding. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 2; // a surrogate pair is 4 bytes for 2 UTF-16 units
        i++;
      } else bytes += 2;
    } else bytes += 2;
  }
  return bytes;
}

/** Whether `text` is over `limit` UTF-8 bytes; cheap for text far under it. */
export function exceedsBytes(text: string, limit: number): boolean {
  if (text.length * 3 <= limit) return false;
  if (text.length > limit) return true;
  return utf8Length(text) > limit;
}

/** `chunks` joined into one array (`length`: their total, when the caller counted it already). */
export function concatBytes(
  chunks: readonly Uint8Array[],
  length = chunks.reduce((total, chunk) => total + chunk.byteLength, 0),
): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}
