/**
 * Tool results: what a tool handler returns turned into the members of a `tool.result` (text,
 * content blocks, a {@linkcode ToolResult}, or a tool's typed result — `BashResult`,
 * `ReadResult`, ... — with large bash output cut to a head-and-tail preview and the full output
 * uploaded as artifacts), and the {@linkcode ResultOutbox} that delivers each `tool.result`
 * until the harness accepts it: sent on the registered connection, sent again on the next one if
 * the connection drops first, and retried after a delay on -32009, -32004 (the retryable codes
 * of the contract) or a timeout. Any other refusal is final: a result given up on goes to
 * `onToolResultLost`.
 */
import {
  type Artifact,
  type ArtifactBlock,
  type BashResult,
  type ContentBlock,
  ContentBlockSchema,
  type EditResult,
  type GlobResult,
  type GrepResult,
  isContentBlock,
  type ReadResult,
  TOOL_SPECS,
  type ToolResultParams,
  type WriteResult,
} from "../protocol/generated/contract.ts";
import type { Clock } from "../protocol/clock.ts";
import {
  ConnectionClosedError,
  FrameTooLargeError,
  InvalidOutgoingParamsError,
  InvalidResultError,
  ProtocolError,
  RequestAbortedError,
} from "../protocol/errors.ts";
import { utf8Length } from "../protocol/jsonrpc.ts";
import type { Logger } from "../protocol/logger.ts";
import { type ConnectionLink, deliver } from "../protocol/retry.ts";
import type { ArtifactByteStream, ArtifactUpload } from "./artifacts.ts";
import { ClientStoppedError } from "./errors.ts";
import type { ToolResultLostHandler } from "./options.ts";
import { type BackoffPolicy, describeError } from "./timing.ts";

/**
 * Bash output up to this many UTF-8 bytes (stdout and stderr together) travels inline in the
 * `tool.result`; beyond it the result carries a head-and-tail preview and the full output is
 * uploaded as artifacts.
 */
export const INLINE_RESULT_BYTES: number = 32 * 1024;

/**
 * The exact bytes of one output stream of a `bash` call, which the machine's `bash` tool attaches
 * to its result under {@linkcode BASH_OUTPUT}: the result's text is decoded (lossily, for bytes
 * that are not UTF-8) and, for a long stream, only a head and a tail. A large result's artifact
 * and preview are made from this instead.
 */
export interface CapturedOutput {
  /** The text the result carried for the stream when it was captured. */
  readonly text: string;
  /** Bytes the stream wrote. */
  readonly totalBytes: number;
  /** The first of them, kept for the artifact (fewer than `totalBytes` past the bound). */
  readonly keptBytes: number;
  /** Whether the kept bytes are valid UTF-8. */
  readonly utf8: boolean;
  /** A prefix of the output (all of it when it is held in memory). */
  readonly head: Uint8Array;
  /** A suffix of the output (all of it when it is held in memory). */
  readonly tail: Uint8Array;
  /** The kept bytes, to upload (a file's as a stream opened for each attempt). */
  body(): Promise<Blob | Uint8Array | ArtifactByteStream>;
  /**
   * Why the kept bytes stop short of the output when it is not the executor's bound: its temp
   * file failed (`ENOSPC`, a full disk).
   */
  readonly spoolFailure?: string;
  /** Frees what it holds (a temp file); once released, `body` is empty. Idempotent. */
  release(): void;
}

/** Where a `bash` result carries its {@linkcode CapturedOutput}s (a symbol: never in JSON). */
export const BASH_OUTPUT: unique symbol = Symbol("bma.bash.output");

/** The captured streams a `bash` result may carry. */
export interface BashResultOutput {
  [BASH_OUTPUT]?: { readonly stdout: CapturedOutput; readonly stderr: CapturedOutput };
}

/**
 * Thrown by a tool handler to report a tool-level error: the result has `is_error: true` and
 * outcome `completed` (the tool ran; what it was asked failed). Any other exception is outcome
 * `failed`.
 */
export class ToolError extends Error {
  /** Content to report instead of the message alone. */
  readonly content: ContentBlock[] | undefined;
  /** `message` is the error text; `content` replaces it in the result when given. */
  constructor(message: string, options?: { content?: ContentBlock[]; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ToolError";
    this.content = options?.content;
  }
}

/**
 * Thrown by a handler whose own time limit passed (the `bash` tool's `timeout_ms`): the call ends
 * with outcome `timed_out` and `error.code` `timeout`, and carries what the tool produced until
 * then, `result` rendered as a handler's return value is (the bash result's output so far).
 */
export class ToolTimeoutError extends Error {
  /** What the tool produced before its time ran out (rendered into the result), if anything. */
  readonly result: unknown;
  /** `message` is the error's text; `result` what the tool produced until then. */
  constructor(message: string, options?: { result?: unknown; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ToolTimeoutError";
    this.result = options?.result;
  }
}

/** What {@linkcode ToolResult} is built from. */
export interface ToolResultInit {
  /** Text, or content blocks. */
  content?: string | ContentBlock[];
  /** A tool-level error (outcome stays `completed`). */
  isError?: boolean;
  /** Artifacts the call produced (uploaded with `client.uploadArtifact`). */
  artifacts?: Artifact[];
  /** The typed result, sent as `structured_content`. */
  structuredContent?: Record<string, unknown>;
}

/** A fully specified tool result, for handlers that want to set every member. */
export class ToolResult {
  /** The rendered content. */
  readonly content: ContentBlock[];
  /** Whether the result is a tool-level error. */
  readonly isError: boolean;
  /** Artifacts the call produced. */
  readonly artifacts: Artifact[];
  /** The typed result. */
  readonly structuredContent: Record<string, unknown> | undefined;
  /** A result from its parts; every member is optional. */
  constructor(init: ToolResultInit = {}) {
    this.content = typeof init.content === "string"
      ? [{ type: "text", text: init.content }]
      : init.content ?? [];
    this.isError = init.isError ?? false;
    this.artifacts = init.artifacts ?? [];
    this.structuredContent = init.structuredContent;
  }
}

/** What a handler of a tool with result type `R` may return. */
export type ToolOutput<R> = string | ContentBlock[] | ToolResult | R;

/** The rendered members of a `tool.result` (everything but ids and outcome). */
export interface RenderedResult {
  /** The result's content blocks. */
  content: ContentBlock[];
  /** A tool-level error: the tool ran, what it was asked failed. */
  is_error?: boolean;
  /** Artifacts the call produced. */
  artifacts?: Artifact[];
  /** The typed result. */
  structured_content?: Record<string, unknown>;
}

/** A handler returned something that is not a valid result of its tool. */
export class InvalidToolOutputError extends Error {
  /** `message` says what is wrong with the handler's return value. */
  constructor(message: string) {
    super(message);
    this.name = "InvalidToolOutputError";
  }
}

/** A text cut to a head and a tail. */
export interface TextPreview {
  /** The preview: head, a marker naming the omitted byte count, tail. */
  readonly text: string;
  /** UTF-8 bytes left out (0 when the text fit). */
  readonly omittedBytes: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Cuts `text` to at most about `maxBytes` UTF-8 bytes: the first and last half, on character
 * boundaries, joined by a marker with the number of bytes left out.
 */
export function previewText(text: string, maxBytes: number): TextPreview {
  const total = utf8Length(text);
  if (total <= maxBytes) return { text, omittedBytes: 0 };
  const bytes = encoder.encode(text);
  const half = Math.max(0, Math.floor(maxBytes / 2));
  let headEnd = half;
  // Never cut inside a character: step back off continuation bytes (10xxxxxx).
  while (headEnd > 0 && (bytes[headEnd] & 0xc0) === 0x80) headEnd--;
  let tailStart = bytes.length - half;
  while (tailStart < bytes.length && (bytes[tailStart] & 0xc0) === 0x80) tailStart++;
  if (tailStart < headEnd) tailStart = headEnd;
  const omittedBytes = tailStart - headEnd;
  const head = decoder.decode(bytes.subarray(0, headEnd));
  const tail = decoder.decode(bytes.subarray(tailStart));
  return { text: `${head}\n… [${omittedBytes} bytes omitted] …\n${tail}`, omittedBytes };
}

/** What rendering needs from the client. */
export interface RenderContext {
  /** The call, for artifact names. */
  readonly toolCallId: string;
  /** Inline limit; default {@linkcode INLINE_RESULT_BYTES}. */
  readonly inlineBytes?: number;
  /** Uploads an artifact; absent when no artifact endpoint is configured. */
  readonly upload?: (upload: ArtifactUpload) => Promise<Artifact>;
  /** Reports an upload that failed (the result is sent with the preview only). */
  readonly onUploadFailed?: (error: unknown) => void;
}

/**
 * Renders a handler's return value for `tool`. Throws {@linkcode InvalidToolOutputError}.
 * Synchronous unless bash output has to be uploaded: most results need no await.
 */
export function renderToolOutput(
  tool: string,
  value: unknown,
  context: RenderContext,
): RenderedResult | Promise<RenderedResult> {
  if (value === undefined || value === null) return { content: [] };
  if (typeof value === "string") return { content: [{ type: "text", text: value }] };
  if (Array.isArray(value)) return { content: checkBlocks(value) };
  if (value instanceof ToolResult) {
    const out: RenderedResult = { content: checkBlocks(value.content) };
    if (value.isError) out.is_error = true;
    if (value.artifacts.length) out.artifacts = value.artifacts;
    if (value.structuredContent) out.structured_content = value.structuredContent;
    return out;
  }
  if (typeof value !== "object") {
    // A function's text is its source code, a symbol's its description: neither is a result.
    if (typeof value === "function" || typeof value === "symbol") {
      throw new InvalidToolOutputError(
        `the ${tool} handler returned a ${typeof value}, not a result`,
      );
    }
    return { content: [{ type: "text", text: String(value) }] };
  }
  const spec = TOOL_SPECS.get(tool);
  if (spec?.result) {
    const checked = spec.result.safeParse(value);
    if (!checked.success) {
      throw new InvalidToolOutputError(`the ${tool} handler returned an invalid result`);
    }
    if (tool === "bash") return renderBash(value as BashResult, context);
    return {
      content: [{ type: "text", text: renderTyped(tool, value) }],
      structured_content: value as Record<string, unknown>,
    };
  }
  // A custom tool's own object: structured, and readable as JSON.
  return {
    content: [{ type: "text", text: JSON.stringify(value) }],
    structured_content: value as Record<string, unknown>,
  };
}

/**
 * `blocks` as content blocks, when each matches the contract (a `ToolError`'s content, a returned
 * array). Throws {@linkcode InvalidToolOutputError}, or whatever reading `blocks` throws.
 */
export function checkBlocks(blocks: readonly unknown[]): ContentBlock[] {
  for (const block of blocks) {
    if (!isContentBlock(block) && !ContentBlockSchema.safeParse(block).success) {
      throw new InvalidToolOutputError("a returned content block does not match the contract");
    }
  }
  return blocks as ContentBlock[];
}

function renderTyped(tool: string, value: unknown): string {
  switch (tool) {
    case "read":
      return (value as ReadResult).content;
    case "write": {
      const r = value as WriteResult;
      return `${r.created ? "Created" : "Wrote"} ${r.path} (${r.bytes_written} bytes)`;
    }
    case "edit": {
      const r = value as EditResult;
      return `Replaced ${r.replacements} occurrence${r.replacements === 1 ? "" : "s"} in ${r.path}`;
    }
    case "glob": {
      const r = value as GlobResult;
      return r.files.join("\n") + (r.truncated ? "\n(more files matched)" : "");
    }
    case "grep": {
      const r = value as GrepResult;
      return r.matches.map((m) => `${m.path}:${m.line}:${m.text}`).join("\n") +
        (r.truncated ? "\n(more matches)" : "");
    }
    default:
      return JSON.stringify(value);
  }
}

function bashText(result: BashResult, note?: string): string {
  const parts: string[] = [];
  if (result.stdout) parts.push(result.stdout);
  if (result.stderr) parts.push(`[stderr]\n${result.stderr}`);
  if (result.exit_code !== 0) parts.push(`[exit code ${result.exit_code}]`);
  if (note) parts.push(note);
  return parts.join("\n");
}

function renderBash(
  result: BashResult,
  context: RenderContext,
): RenderedResult | Promise<RenderedResult> {
  const limit = context.inlineBytes ?? INLINE_RESULT_BYTES;
  const outBytes = utf8Length(result.stdout);
  const errBytes = utf8Length(result.stderr);
  if (outBytes + errBytes <= limit && !result.truncated) {
    return {
      content: [{ type: "text", text: bashText(result) }],
      structured_content: { ...result },
    };
  }
  return renderLargeBash(result, context, limit, outBytes, errBytes);
}

/** One stream of a large bash result: its size, its preview and its artifact. */
interface LargeStream {
  readonly name: "stdout" | "stderr";
  /** Bytes of the output, for the split of the preview's budget. */
  readonly bytes: number;
  preview(maxBytes: number): TextPreview;
  /** Bytes of the output the artifact leaves out (past the executor's bound). */
  readonly cutBytes: number;
  /** Why they are left out when it is not the bound (the temp file's failure). */
  readonly cutBy?: string;
  upload(toolCallId: string): Promise<ArtifactUpload>;
}

/**
 * A stream as the result's text (what a handler returned), or, when the result carries the
 * stream's captured bytes and the text is still what was captured (a handler may append to it,
 * as a timeout's note), as those bytes.
 */
function largeStream(
  name: "stdout" | "stderr",
  text: string,
  bytes: number,
  captured: CapturedOutput | undefined,
): LargeStream {
  if (!captured || !text.startsWith(captured.text)) {
    return {
      name,
      bytes,
      preview: (maxBytes) => previewText(text, maxBytes),
      cutBytes: 0,
      upload: (toolCallId) => Promise.resolve({ name: `${toolCallId}.${name}.txt`, data: text }),
    };
  }
  const appended = text.slice(captured.text.length);
  return {
    name,
    bytes: captured.totalBytes + utf8Length(appended),
    preview: (maxBytes) => previewCaptured(captured, appended, maxBytes),
    cutBytes: captured.totalBytes - captured.keptBytes,
    ...(captured.spoolFailure !== undefined ? { cutBy: captured.spoolFailure } : {}),
    upload: async (toolCallId) => {
      const utf8 = captured.utf8;
      return {
        name: `${toolCallId}.${name}.${utf8 ? "txt" : "bin"}`,
        data: await captured.body(),
        mimeType: utf8 ? "text/plain; charset=utf-8" : "application/octet-stream",
      };
    },
  };
}

/**
 * The preview of captured bytes, as {@linkcode previewText} cuts a text: the first and last half
 * of `maxBytes` on character boundaries, the omitted count exact, then what a handler appended.
 */
function previewCaptured(
  captured: CapturedOutput,
  appended: string,
  maxBytes: number,
): TextPreview {
  const total = captured.totalBytes;
  const { head, tail } = captured;
  if (head.byteLength === total && total <= maxBytes) {
    return { text: decoder.decode(head) + appended, omittedBytes: 0 };
  }
  const half = Math.max(0, Math.floor(maxBytes / 2));
  let headEnd = Math.min(half, head.byteLength);
  while (headEnd > 0 && (head[headEnd] & 0xc0) === 0x80) headEnd--;
  let tailStart = Math.max(0, tail.byteLength - half);
  // The tail never overlaps the head (they are the same bytes when all are in memory).
  const tailOffset = total - tail.byteLength;
  if (tailOffset + tailStart < headEnd) tailStart = headEnd - tailOffset;
  while (tailStart < tail.byteLength && (tail[tailStart] & 0xc0) === 0x80) tailStart++;
  const omittedBytes = total - headEnd - (tail.byteLength - tailStart);
  const text = `${
    decoder.decode(head.subarray(0, headEnd))
  }\n… [${omittedBytes} bytes omitted] …\n${decoder.decode(tail.subarray(tailStart))}${appended}`;
  return { text, omittedBytes };
}

/** Bash output over the inline limit: a preview inline, the full output uploaded. */
async function renderLargeBash(
  result: BashResult,
  context: RenderContext,
  limit: number,
  outBytes: number,
  errBytes: number,
): Promise<RenderedResult> {
  const captured = (result as BashResult & BashResultOutput)[BASH_OUTPUT];
  try {
    return await renderLargeStreams(
      result,
      context,
      limit,
      largeStream("stdout", result.stdout, outBytes, captured?.stdout),
      largeStream("stderr", result.stderr, errBytes, captured?.stderr),
    );
  } finally {
    // Uploaded or not, the captured bytes (temp files) are not needed any more.
    captured?.stdout.release();
    captured?.stderr.release();
  }
}

async function renderLargeStreams(
  result: BashResult,
  context: RenderContext,
  limit: number,
  out: LargeStream,
  err: LargeStream,
): Promise<RenderedResult> {
  // Split the budget between the streams; a stream that needs less leaves the rest to the other.
  let outBudget = Math.floor(limit / 2);
  let errBudget = limit - outBudget;
  if (err.bytes < errBudget) outBudget += errBudget - err.bytes;
  else if (out.bytes < outBudget) errBudget += outBudget - out.bytes;
  const stdout = out.preview(outBudget);
  const stderr = err.preview(errBudget);
  const artifacts: Artifact[] = [];
  const cuts: string[] = [];
  if (context.upload) {
    try {
      // Uploaded first, so the result can reference them.
      for (const stream of [out, err]) {
        if (stream.bytes === 0) continue;
        const artifact = await context.upload(await stream.upload(context.toolCallId));
        artifacts.push(artifact);
        if (stream.cutBytes > 0) {
          cuts.push(
            `${artifact.name ?? artifact.artifact_id} holds the first ${
              stream.bytes - stream.cutBytes
            } of ${stream.bytes} bytes of ${stream.name}` +
              (stream.cutBy !== undefined ? ` (its temp file failed: ${stream.cutBy})` : ""),
          );
        }
      }
    } catch (error) {
      context.onUploadFailed?.(error);
    }
  }
  const omitted = stdout.omittedBytes + stderr.omittedBytes;
  const where = artifacts.length
    ? `full output in artifact${artifacts.length > 1 ? "s" : ""} ${
      artifacts.map((a) => a.name ?? a.artifact_id).join(", ")
    }`
    : "full output not uploaded";
  const cut = cuts.length
    ? `; cut ${
      [out, err].some((s) => s.cutBy !== undefined) ? "short" : "at the executor's bound"
    }: ${cuts.join(", ")}`
    : "";
  const note = `[output truncated: ${omitted} bytes omitted; ${where}${cut}]`;
  const preview: BashResult = {
    stdout: stdout.text,
    stderr: stderr.text,
    exit_code: result.exit_code,
    truncated: true,
  };
  const blocks: ArtifactBlock[] = artifacts.map((a) => ({ type: "artifact", ...a }));
  const rendered: RenderedResult = {
    content: [{ type: "text", text: bashText(preview, note) }, ...blocks],
    structured_content: { ...preview },
  };
  if (artifacts.length) rendered.artifacts = artifacts;
  return rendered;
}

/**
 * Every result in flight listens to the outbox's one signal: lift Node's limit of 10 listeners
 * per event target, past which it prints a (here false) leak warning. Feature-detected, so the
 * portable core imports nothing from Node; elsewhere there is no such limit.
 */
function unboundedListeners(signal: AbortSignal): void {
  const events = (globalThis as {
    process?: { getBuiltinModule?: (id: string) => unknown };
  }).process?.getBuiltinModule?.("node:events") as
    | { setMaxListeners?: (n: number, ...targets: EventTarget[]) => void }
    | undefined;
  try {
    events?.setMaxListeners?.(0, signal);
  } catch {
    // A runtime whose events module does not take an AbortSignal has no such limit either.
  }
}

/**
 * Why sending a result failed for good: `"too_large"` for one frame; `"unsendable"` here, before
 * it went out, for a reason of its own (the contract refused it, `JSON.stringify` threw, a getter
 * or Proxy trap of it threw); else `"lost"` (the harness refused or answered it, the client
 * stopped).
 */
function sendFailure(error: unknown): "too_large" | "unsendable" | "lost" {
  try {
    if (error instanceof FrameTooLargeError) return "too_large";
    return error instanceof ProtocolError || error instanceof ConnectionClosedError ||
        error instanceof InvalidResultError || error instanceof ClientStoppedError ||
        error instanceof RequestAbortedError
      ? "lost"
      : "unsendable";
  } catch {
    return "unsendable"; // a Proxy of the result's, thrown from a trap while it was checked
  }
}

/** What an unsendable result's failure says (never the value itself). */
function unsendableMessage(error: unknown): string {
  try {
    if (error instanceof InvalidOutgoingParamsError) {
      return "the result does not match the contract";
    }
    // What `JSON.stringify` throws.
    if (error instanceof TypeError || error instanceof RangeError) {
      return "the result cannot be serialized as JSON (a BigInt, a cycle or too deep a nesting)";
    }
  } catch {
    // A Proxy of the result's, thrown from a trap while it was checked.
  }
  return "the result cannot be sent";
}

/** The small failed result that stands for `params` when they cannot be sent. */
function failedResult(params: ToolResultParams, message: string, code: string): ToolResultParams {
  return {
    session_id: params.session_id,
    tool_call_id: params.tool_call_id,
    outcome: "failed",
    error: { message, code },
  };
}

interface PendingResult {
  readonly params: ToolResultParams;
  readonly accepted: Promise<boolean>;
}

/** Options of {@linkcode ResultOutbox}. */
export interface ResultOutboxOptions {
  link: ConnectionLink;
  clock: Clock;
  random: () => number;
  retry: BackoffPolicy;
  timeoutMs: number;
  logger: Logger;
  /** Who is told of each result given up on (`onToolResultLost`); read at each loss. */
  lostHandlers: ReadonlySet<ToolResultLostHandler>;
}

/** The tool results of one client that are not yet accepted. */
export class ResultOutbox {
  readonly #options: ResultOutboxOptions;
  readonly #pending = new Map<string, PendingResult>();
  /** Aborts every pending delivery on close (one signal for all: a signal per result is costly). */
  readonly #closing = new AbortController();
  #closedWith: unknown;

  constructor(options: ResultOutboxOptions) {
    this.#options = options;
    unboundedListeners(this.#closing.signal);
  }

  /** Results not yet accepted or given up on. */
  get pending(): number {
    return this.#pending.size;
  }

  /**
   * Delivers a result; resolves `true` once accepted, `false` once given up on (after
   * `onToolResultLost` ran). A second send for a call still pending joins the first.
   */
  send(params: ToolResultParams): Promise<boolean> {
    const existing = this.#pending.get(params.tool_call_id);
    if (existing) return existing.accepted;
    if (this.#closedWith !== undefined) {
      this.#lost(params, this.#closedWith);
      return Promise.resolve(false);
    }
    const pending: PendingResult = { params, accepted: this.#deliver(params) };
    this.#pending.set(params.tool_call_id, pending);
    return pending.accepted;
  }

  /**
   * Delivers through {@linkcode deliver}: across reconnects and retryable refusals. A result
   * that cannot be sent is reported as a failure instead of being lost, once (a failure that
   * cannot be sent either is lost): too large for one frame (`result_too_large`), or refused
   * here before it went out, by the contract or by `JSON.stringify` (a nested BigInt or cycle:
   * `invalid_result`). The connection finds that when it checks and serializes the result: no
   * second walk over every result to look for it.
   */
  #deliver(params: ToolResultParams, fallback = false): Promise<boolean> {
    return deliver(this.#options.link, "tool.result", params, {
      clock: this.#options.clock,
      random: this.#options.random,
      retry: this.#options.retry,
      timeoutMs: this.#options.timeoutMs,
      signal: this.#closing.signal,
      // Closing comes with the connection's end, which ends the request in flight anyway.
      signalBetweenAttempts: true,
    }).then(
      () => this.#accepted(params),
      (error) => {
        if (fallback || this.#closing.signal.aborted) return this.#given(params, error);
        const failure = sendFailure(error);
        if (failure === "lost") return this.#given(params, error);
        return this.#deliver(
          failure === "too_large" ? this.#tooLarge(params) : this.#unsendable(params, error),
          true,
        );
      },
    );
  }

  #tooLarge(params: ToolResultParams): ToolResultParams {
    this.#options.logger.warn("tool result too large for one frame", {
      tool_call_id: params.tool_call_id,
    });
    return failedResult(
      params,
      "the result is larger than the frame limit; return large output as an artifact",
      "result_too_large",
    );
  }

  #unsendable(params: ToolResultParams, error: unknown): ToolResultParams {
    this.#options.logger.warn("tool result cannot be sent: reporting the failure instead", {
      tool_call_id: params.tool_call_id,
      error: describeError(error),
    });
    return failedResult(params, unsendableMessage(error), "invalid_result");
  }

  #accepted(params: ToolResultParams): boolean {
    this.#pending.delete(params.tool_call_id);
    return true;
  }

  #given(params: ToolResultParams, error: unknown): boolean {
    this.#pending.delete(params.tool_call_id);
    this.#lost(params, error);
    return false;
  }

  /** Resolves once every result pending now is accepted or given up on. */
  async idle(): Promise<void> {
    await Promise.all([...this.#pending.values()].map((p) => p.accepted));
  }

  /** Gives up on every pending result with `error` (the client stopped). */
  close(error: unknown): void {
    this.#closedWith = error;
    this.#closing.abort(error);
  }

  #lost(params: ToolResultParams, error: unknown): void {
    this.#options.logger.warn("tool result lost", {
      session_id: params.session_id,
      tool_call_id: params.tool_call_id,
      error: describeError(error),
    });
    for (const handler of [...this.#options.lostHandlers]) {
      try {
        handler(params, error);
      } catch (handlerError) {
        this.#options.logger.error("onToolResultLost handler failed", {
          error: describeError(handlerError),
        });
      }
    }
  }
}
