/**
 * One output stream of a process as a byte log addressed by offset: readers catch up from any
 * offset still held, older bytes are evicted past a cap, and waiters wake on new bytes.
 */
import { InvalidParamsError } from "../../protocol/generated/errors.ts";
import { fromBase64, toBase64 } from "../../protocol/base64.ts";

/** Bytes of one stream from `offset`, and where to read next. */
export interface OutputSlice {
  offset: number;
  bytes: Uint8Array;
  nextOffset: number;
  /** The stream closed and nothing lies beyond `nextOffset`. */
  eof: boolean;
}

/** A bounded, offset-addressed byte log. */
export class OutputBuffer {
  #chunks: Uint8Array[] = [];
  #start = 0; // offset of the first byte held
  #end = 0; // offset after the last byte written
  #closed = false;
  #waiters = new Set<() => void>();

  constructor(readonly capacity: number = 8 * 1024 * 1024) {}

  /** Offset after the last byte written. */
  get end(): number {
    return this.#end;
  }

  get closed(): boolean {
    return this.#closed;
  }

  append(bytes: Uint8Array): void {
    if (bytes.byteLength === 0 || this.#closed) return;
    this.#chunks.push(bytes);
    this.#end += bytes.byteLength;
    while (this.#end - this.#start > this.capacity && this.#chunks.length > 1) {
      this.#start += this.#chunks.shift()!.byteLength;
    }
    this.#wake();
  }

  close(): void {
    this.#closed = true;
    this.#wake();
  }

  /** Reads from `offset` (clamped to what is held), at most `maxBytes`. */
  read(offset: number, maxBytes: number): OutputSlice {
    const from = Math.min(Math.max(offset, this.#start), this.#end);
    const to = Math.min(this.#end, from + maxBytes);
    const out = new Uint8Array(to - from);
    let position = this.#start;
    let written = 0;
    for (const chunk of this.#chunks) {
      const chunkEnd = position + chunk.byteLength;
      if (chunkEnd > from && position < to) {
        const a = Math.max(from, position) - position;
        const b = Math.min(to, chunkEnd) - position;
        out.set(chunk.subarray(a, b), written);
        written += b - a;
      }
      position = chunkEnd;
      if (position >= to) break;
    }
    return { offset: from, bytes: out, nextOffset: to, eof: this.#closed && to === this.#end };
  }

  /** Resolves when bytes beyond `offset` exist, the stream closes, or `signal` aborts. */
  waitBeyond(offset: number, signal?: AbortSignal): Promise<void> {
    if (this.#end > offset || this.#closed || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.#waiters.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      this.#waiters.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  #wake(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Encodes bytes for the wire: UTF-8 text when they are valid UTF-8, else base64. */
export function encodeChunk(bytes: Uint8Array): { data: string; encoding: "utf8" | "base64" } {
  try {
    return { data: strictUtf8.decode(bytes), encoding: "utf8" };
  } catch {
    return { data: toBase64(bytes), encoding: "base64" };
  }
}

const encoder = new TextEncoder();

/**
 * Whether `data` is base64 (padding optional): checked a character at a time, as a regular
 * expression of repeated groups overflows V8's stack on a few MiB of data.
 */
function isBase64(data: string): boolean {
  let end = data.length;
  let padding = 0;
  while (padding < 2 && end > 0 && data.charCodeAt(end - 1) === 61 /* = */) {
    end--;
    padding++;
  }
  // The last group holds 2 or 3 characters (then `==` or `=`, or nothing), never 1.
  const rest = end % 4;
  if (padding > 0 ? rest !== 4 - padding : rest === 1) return false;
  for (let i = 0; i < end; i++) {
    const c = data.charCodeAt(i);
    const letterOrDigit = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57);
    if (!letterOrDigit && c !== 43 /* + */ && c !== 47 /* / */) return false;
  }
  return true;
}

/**
 * The bytes of a chunk from the wire (`process.write`, `terminal.input`): UTF-8 text as it is,
 * base64 checked first (padding optional), so that data that is not base64 is the caller's
 * error, -32602 naming `/data`, never a failure of the receiver.
 */
export function decodeChunk(data: string, encoding: "utf8" | "base64" | undefined): Uint8Array {
  if (encoding !== "base64") return encoder.encode(data);
  if (!isBase64(data)) {
    throw new InvalidParamsError("data is not base64", {
      reason: "invalid_params",
      field: "/data",
    });
  }
  return fromBase64(data);
}

/** How many leading bytes of `bytes` end on a UTF-8 character boundary. */
export function utf8Boundary(bytes: Uint8Array): number {
  let end = bytes.length;
  // Step back over at most 3 continuation bytes to the start of the last character.
  let i = end - 1;
  let back = 0;
  while (i >= 0 && back < 3 && (bytes[i] & 0xc0) === 0x80) {
    i--;
    back++;
  }
  if (i < 0) return end;
  const lead = bytes[i];
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  if (end - i < need) end = i;
  return end;
}
