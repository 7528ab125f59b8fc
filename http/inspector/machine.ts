/**
 * The machine of a session in the inspector's page (`machine.html?session=<id>`): its terminals
 * (xterm.js in the page, over `terminal.*` held by {@linkcode InspectorTerminals}), its processes
 * (`process.list`, `process.read`, `process.signal`) and its files (browsed with the `glob` tool,
 * downloaded with `file.download`, uploaded with `file.upload`). These are the routes; the page is
 * in `machine-page.ts` and `browser/machine.ts`.
 *
 * Portable: web-standard APIs only.
 */
import type { Context, Hono } from "hono";
import { fromBase64, toBase64 } from "../../protocol/base64.ts";
import { hex, randomId } from "../../protocol/ids.ts";
import type { Logger } from "../../protocol/logger.ts";
import type { Signal } from "../../protocol/generated/contract.ts";
import type { Session } from "../../harness/handles.ts";
import { serverSentEvent } from "../shared/server-sent-event.ts";
import { JsonBodyError, readBoundedBytes } from "../shared/json-body.ts";
import { boundedEventStream } from "./event-stream.ts";
import { asset, json, optionalString, param, SECURITY_HEADERS } from "./http.ts";
import { ApiError } from "../shared/api-error.ts";
import { ForbiddenError } from "../../protocol/generated/errors.ts";
import { InspectorTerminals } from "./terminals.ts";
import { MACHINE_CSS, MACHINE_HTML } from "./machine-page.ts";
import { MACHINE_JS } from "./generated/pages.ts";
import { FIT_MJS, XTERM_CSS, XTERM_MJS } from "./generated/xterm.ts";
import type { UnsentBudget } from "../../transport/unsent-budget.ts";

/** What the machine's routes need from the inspector that mounts them. */
export interface MachineRoutes {
  /** A route's path under the inspector's base path. */
  readonly at: (path: string) => string;
  /** The live session `id` (or the refusal that says why not). */
  readonly sessionOf: (id: string) => Session;
  /** The JSON object of a request's body. */
  readonly readBody: (c: Context) => Promise<Record<string, unknown>>;
  readonly logger: Logger;
  readonly now: () => number;
  /** Most bytes a page's stream holds unread. */
  readonly maxStreamQueueBytes: number;
  /** The budget of unread bytes the inspector's streams share. */
  readonly unsent: UnsentBudget;
  /** Largest file the page uploads. */
  readonly maxUploadBytes: number;
}

/** Bytes per `file.download` and `file.upload` (a frame holds them in base64 with room). */
const TRANSFER_CHUNK_BYTES = 512 * 1024;
/** Bytes per `process.read` the page asks for. */
const PROCESS_READ_BYTES = 256 * 1024;
/** Longest a page's `process.read` waits for output. */
const PROCESS_WAIT_MAX_MS = 5_000;
const SIGNALS: readonly Signal[] = ["SIGTERM", "SIGINT", "SIGKILL", "SIGHUP"];

/**
 * xterm.js writes its own `<style>` elements (its theme, its measurements), so this page alone
 * allows inline style; it still runs only its own scripts and renders what executors send as
 * terminal cells and text nodes, never as HTML.
 */
const MACHINE_CSP = SECURITY_HEADERS["content-security-policy"].replace(
  "style-src 'self'",
  "style-src 'self' 'unsafe-inline'",
);

/** Mounts the machine's routes; the returned terminals are closed with the inspector. */
export function machineRoutes(app: Hono, routes: MachineRoutes): InspectorTerminals {
  const { at, sessionOf, readBody } = routes;
  const terminals = new InspectorTerminals(routes.logger, routes.now);
  const encoder = new TextEncoder();

  app.get(at("/machine.html"), () =>
    new Response(MACHINE_HTML, {
      headers: {
        ...SECURITY_HEADERS,
        "content-type": "text/html; charset=utf-8",
        "content-security-policy": MACHINE_CSP,
      },
    }));
  app.get(at("/machine.js"), () => asset(MACHINE_JS, "text/javascript; charset=utf-8"));
  app.get(at("/machine.css"), () => asset(MACHINE_CSS, "text/css; charset=utf-8"));
  app.get(at("/xterm.mjs"), () => asset(XTERM_MJS, "text/javascript; charset=utf-8"));
  app.get(at("/addon-fit.mjs"), () => asset(FIT_MJS, "text/javascript; charset=utf-8"));
  app.get(at("/xterm.css"), () => asset(XTERM_CSS, "text/css; charset=utf-8"));

  // ---- terminals ----

  app.get(at("/api/sessions/:id/terminals"), (c) => {
    const id = param(c, "id");
    return json(200, { terminals: terminals.list(id) });
  });

  app.post(at("/api/sessions/:id/terminals"), async (c) => {
    const session = sessionOf(param(c, "id"));
    const body = await readBody(c);
    const view = await terminals.open(session, {
      cols: dimension(body, "cols", 80),
      rows: dimension(body, "rows", 24),
      terminalId: randomId("term_"),
    });
    return json(201, view);
  });

  app.get(at("/api/terminals/:tid/stream"), (c) => {
    const held = heldTerminal(c);
    // A reconnecting EventSource says where it was; a page that attaches says where it wants to
    // start (0: everything kept).
    const from = offsetOf(c.req.header("last-event-id") ?? c.req.query("from") ?? "0");
    const { response } = boundedEventStream({
      signal: c.req.raw.signal,
      maxQueueBytes: routes.maxStreamQueueBytes,
      budget: routes.unsent,
      logger: routes.logger,
      headers: SECURITY_HEADERS,
    }, (sink) => {
      const send = (event: string, data: unknown, id?: number) =>
        sink.write(encoder.encode(serverSentEvent({
          event,
          data,
          ...(id !== undefined ? { id: String(id) } : {}),
        })));
      // What is kept goes out as the page reads it: all of it at once would be more than the
      // stream holds for a page, and the page would be dropped before it read a byte.
      const attached = held.attach(from, {
        output: (offset, bytes) =>
          send("output", { offset, data: toBase64(bytes) }, offset + bytes.byteLength),
        skipped: (skippedFrom, to) => send("skipped", { from: skippedFrom, to }, to),
        live: () => send("live", {}),
        exit: (exitCode) => {
          send("exit", { exit_code: exitCode });
          sink.end();
        },
        hasRoom: sink.hasRoom,
      });
      sink.onRoom(attached.resume);
      return attached.detach;
    });
    return response;
  });

  app.post(at("/api/terminals/:tid/input"), async (c) => {
    const held = heldTerminal(c);
    const data = optionalString(await readBody(c), "data") ?? "";
    const written = await held.terminal.write(data);
    return json(200, { written });
  });

  app.post(at("/api/terminals/:tid/resize"), async (c) => {
    const held = heldTerminal(c);
    const body = await readBody(c);
    const cols = dimension(body, "cols", held.cols);
    const rows = dimension(body, "rows", held.rows);
    await held.terminal.resize(cols, rows);
    held.cols = cols;
    held.rows = rows;
    return json(200, { cols, rows });
  });

  app.post(at("/api/terminals/:tid/close"), async (c) => {
    const held = heldTerminal(c);
    await readBody(c);
    return json(200, await held.terminal.close());
  });

  function heldTerminal(c: Context) {
    const held = terminals.get(param(c, "tid"));
    if (!held) {
      throw new ApiError(
        404,
        "not_found",
        "no such terminal (the inspector holds none by this id)",
      );
    }
    return held;
  }

  // ---- processes ----

  app.get(at("/api/sessions/:id/processes"), async (c) => {
    const session = sessionOf(param(c, "id"));
    return json(200, await session.executor.request("process.list", { session_id: session.id }));
  });

  app.get(at("/api/sessions/:id/processes/:pid/output"), async (c) => {
    const { session, processId } = processOf(c);
    const stream = c.req.query("stream") ?? "stdout";
    if (stream !== "stdout" && stream !== "stderr") {
      throw new ApiError(400, "bad_request", "stream must be stdout or stderr");
    }
    const wait = Math.min(offsetOf(c.req.query("wait_ms") ?? "0"), PROCESS_WAIT_MAX_MS);
    const read = await session.executor.request("process.read", {
      session_id: session.id,
      process_id: processId,
      stream,
      offset: offsetOf(c.req.query("offset") ?? "0"),
      max_bytes: PROCESS_READ_BYTES,
      ...(wait > 0 ? { wait_ms: wait } : {}),
    }, { signal: c.req.raw.signal });
    return json(200, read);
  });

  app.post(at("/api/sessions/:id/processes/:pid/signal"), async (c) => {
    const { session, processId } = processOf(c);
    const signal = (optionalString(await readBody(c), "signal") ?? "SIGTERM") as Signal;
    if (!SIGNALS.includes(signal)) {
      throw new ApiError(400, "bad_request", `signal must be one of ${SIGNALS.join(", ")}`);
    }
    const sent = await session.executor.request("process.signal", {
      session_id: session.id,
      process_id: processId,
      signal,
    });
    return json(200, sent);
  });

  /** The route's live session and the process it names. */
  function processOf(c: Context): { session: Session; processId: string } {
    return { session: sessionOf(param(c, "id")), processId: param(c, "pid") };
  }

  // ---- files ----

  app.get(at("/api/sessions/:id/files"), async (c) => {
    const session = sessionOf(param(c, "id"));
    const path = directoryOf(c.req.query("path"));
    // The glob tool lists files: those right here, and below each directory (whose names are
    // what the listing shows of it). An empty directory does not show.
    const [here, below] = await Promise.all([
      session.tools.glob.call({ pattern: "*", path }),
      session.tools.glob.call({ pattern: "*/**", path }),
    ]);
    const failed = [here, below].find((result) => result.is_error);
    if (failed) {
      // The tool says why in words only: a path outside the workdir is refused 403 as a
      // download's is, by the executor's typed verdict on it.
      await checkedPath(session, path);
      const text = failed.content.map((part) => ("text" in part ? part.text : "")).join(" ");
      throw new ApiError(409, "glob_failed", text || "the glob tool failed");
    }
    const files = (here.structured_content?.files ?? []).filter((f) => !f.includes("/"));
    const directories = new Set<string>();
    for (const file of below.structured_content?.files ?? []) {
      const slash = file.indexOf("/");
      if (slash > 0) directories.add(file.slice(0, slash));
    }
    return json(200, {
      path,
      directories: [...directories].sort(),
      files: files.sort(),
      truncated: Boolean(here.structured_content?.truncated || below.structured_content?.truncated),
    });
  });

  app.get(at("/api/sessions/:id/files/download"), async (c) => {
    const session = sessionOf(param(c, "id"));
    const path = c.req.query("path");
    if (!path) throw new ApiError(400, "bad_request", "path is required");
    const read = (offset: number) =>
      session.executor.request("file.download", {
        session_id: session.id,
        path,
        offset,
        max_bytes: TRANSFER_CHUNK_BYTES,
      });
    const first = await read(0).catch(pathRefused);
    let next = first.offset;
    let pending: typeof first | undefined = first;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const chunk = pending ?? await read(next);
          pending = undefined;
          // The file changed under the download: what was sent is not one file.
          if (chunk.sha256 !== first.sha256 || chunk.size !== first.size) {
            throw new ApiError(409, "conflict", "the file changed during the download");
          }
          const bytes = fromBase64(chunk.content);
          next = chunk.offset + bytes.byteLength;
          if (bytes.byteLength > 0) controller.enqueue(bytes);
          if (chunk.eof || bytes.byteLength === 0) controller.close();
        } catch (error) {
          routes.logger.info("inspector download failed", { path, error: String(error) });
          controller.error(error);
        }
      },
    });
    return new Response(body, {
      headers: {
        ...SECURITY_HEADERS,
        "content-type": "application/octet-stream",
        "content-length": String(first.size),
        "content-disposition": attachment(first.path),
        "x-sha256": first.sha256,
      },
    });
  });

  app.post(at("/api/sessions/:id/files/upload"), async (c) => {
    const session = sessionOf(param(c, "id"));
    const path = c.req.query("path");
    if (!path) throw new ApiError(400, "bad_request", "path is required");
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = await readBoundedBytes(c.req.raw, routes.maxUploadBytes);
    } catch (error) {
      // Past this route's bound or the server's: the server answers it as it promised.
      if (!(error instanceof JsonBodyError)) throw error;
      throw new ApiError(413, "payload_too_large", error.message);
    }
    // The last chunk carries the hash of the whole: the executor checks that it has the file.
    // The chunks build a temporary of their own (`upload_id`) that only the last, checked,
    // renames over the path: another upload to it meanwhile neither mixes in nor destroys it.
    const sha256 = await sha256Hex(bytes);
    const uploadId = randomId("up_");
    let result: { path: string; size: number; sha256: string } | undefined;
    for (
      let offset = 0;
      offset < bytes.byteLength || result === undefined;
      offset += TRANSFER_CHUNK_BYTES
    ) {
      const chunk = bytes.subarray(offset, offset + TRANSFER_CHUNK_BYTES);
      const last = offset + TRANSFER_CHUNK_BYTES >= bytes.byteLength;
      result = await session.executor.request("file.upload", {
        session_id: session.id,
        path,
        content: toBase64(chunk),
        offset,
        upload_id: uploadId,
        ...(last ? { sha256 } : {}),
      }).catch(pathRefused);
    }
    return json(201, result);
  });

  return terminals;
}

/**
 * An executor's refusal of a path the caller named outside the workdir (-32001), answered for what
 * it is, a refusal of the caller's input: 403, with the executor's code, message and data
 * unchanged (as every other refusal of the executor, 409, has them). Any other error is thrown as
 * it is.
 */
function pathRefused(error: unknown): never {
  if (error instanceof ForbiddenError) {
    throw new ApiError(403, error.code, error.message, error.data);
  }
  throw error;
}

/**
 * Asks the executor whether `path` lies inside the workdir (reading one byte of it with
 * `file.download`), and throws its refusal as {@linkcode pathRefused} answers it; any other
 * answer (a directory, a missing file, an executor without file transfer) passes.
 */
async function checkedPath(session: Session, path: string): Promise<void> {
  try {
    await session.executor.request("file.download", {
      session_id: session.id,
      path,
      max_bytes: 1,
    });
  } catch (error) {
    if (error instanceof ForbiddenError) pathRefused(error);
  }
}

/** A terminal's columns or rows (1 to 1000). */
function dimension(body: Record<string, unknown>, key: string, fallback: number): number {
  const value = body[key] ?? fallback;
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 1000) {
    throw new ApiError(400, "bad_request", `${key} must be an integer from 1 to 1000`);
  }
  return value as number;
}

/** A byte offset (or a wait) from a query or header. */
function offsetOf(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new ApiError(400, "bad_request", "offsets are whole numbers from 0");
  }
  return value;
}

/** The directory a listing is of: the workdir (".") unless one is named. */
function directoryOf(path: string | undefined): string {
  const trimmed = (path ?? "").replace(/\/+$/, "");
  return trimmed === "" ? "." : trimmed;
}

/** `Content-Disposition` of a download: the file's own name, any characters. */
function attachment(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1) || "download";
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  return hex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
}
