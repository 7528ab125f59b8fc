/**
 * The JSON object of an HTTP request's body, as the brain API and the inspector accept it: at
 * most `maxBytes` (refused by its `Content-Length` before a byte is read, or as soon as more
 * arrives than it said), no deeper than the frame limit (checked on the text before it is
 * parsed, so a hostile nesting never reaches `JSON.parse` or a schema), and an object.
 */
import { DEFAULT_MAX_DEPTH, exceedsDepth } from "../../protocol/jsonrpc.ts";
import { concatBytes } from "../../transport/bytes.ts";

/** Why a body is not a JSON object. */
export type JsonBodyProblem = "the body is not JSON" | "the body must be a JSON object";

/** The object `text` holds (`{}` for an empty body), or why it holds none. */
function parseJsonObject(text: string): Record<string, unknown> | JsonBodyProblem {
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return "the body is not JSON";
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return "the body must be a JSON object";
  }
  return value as Record<string, unknown>;
}

/**
 * A request body refused: 413 (too large), 400 (not a JSON object, not UTF-8, nested too deep,
 * cut by the connection's end), 408 (it stopped arriving: `request-body.node.ts`) or 415 (its
 * `content-type` names a charset other than UTF-8).
 */
export class JsonBodyError extends Error {
  /** The HTTP status that answers it. */
  readonly status: 400 | 408 | 413 | 415;
  constructor(status: 400 | 408 | 413 | 415, message: string) {
    super(message);
    this.name = "JsonBodyError";
    this.status = status;
  }
}

/** The bytes of a body of at most `maxBytes`; {@linkcode JsonBodyError} 413 past it. */
export async function readBoundedBytes(
  request: Request,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  return await readBoundedStream(request.body, maxBytes);
}

/**
 * The bytes of `body`, at most `maxBytes`; {@linkcode JsonBodyError} 413 past it. What is left is
 * not read: the server that holds the connection answers and closes it lingering
 * (`request-body.node.ts`), never with a reset.
 */
export async function readBoundedStream(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer>> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  return concatBytes(chunks, size);
}

function tooLarge(maxBytes: number): JsonBodyError {
  return new JsonBodyError(413, `bodies take at most ${maxBytes} bytes`);
}

/**
 * The text of a body of at most `maxBytes`, which must be UTF-8 (JSON between systems is: RFC
 * 8259 §8.1); {@linkcode JsonBodyError} 413 past the bound, 415 for a `content-type` of another
 * charset, 400 for bytes that are not UTF-8. Never decoded with U+FFFD for what is not UTF-8:
 * two ids that differ in such bytes would become one.
 */
export async function readBoundedText(request: Request, maxBytes: number): Promise<string> {
  const charset = CHARSET.exec(request.headers.get("content-type") ?? "")?.[1];
  if (charset !== undefined && !UTF8_NAMES.has(charset.toLowerCase())) {
    throw new JsonBodyError(415, "the body must be UTF-8 (content-type charset=utf-8)");
  }
  const bytes = await readBoundedBytes(request, maxBytes);
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw new JsonBodyError(400, "the body is not UTF-8 text");
  }
}

/** A `content-type`'s charset parameter, quoted or not. */
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;
/** The names of UTF-8, and of ASCII, its subset. */
const UTF8_NAMES = new Set(["utf-8", "utf8", "us-ascii"]);
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The JSON object of a request's body (`{}` for an empty one), or {@linkcode JsonBodyError}:
 * see the module comment. `maxDepth` defaults to the protocol's frame limit (128).
 */
export async function readJsonObject(
  request: Request,
  maxBytes: number,
  maxDepth: number = DEFAULT_MAX_DEPTH,
): Promise<Record<string, unknown>> {
  const text = await readBoundedText(request, maxBytes);
  if (exceedsDepth(text, maxDepth)) {
    throw new JsonBodyError(400, `the body nests deeper than ${maxDepth} levels`);
  }
  const value = parseJsonObject(text);
  if (typeof value === "string") throw new JsonBodyError(400, value);
  return value;
}
