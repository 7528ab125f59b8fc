/**
 * Request bodies on a `node:http` server (`fetch-bridge.node.ts`: the inspector's
 * `serveInspector`, which also serves the brain API, and the harness's own server): read only if
 * and as fast as the handler reads, never past a bound, never waited on for long (a body that
 * stops arriving fails with 408), and never answered with a reset.
 *
 * A body past its bound (the server's, or the handler's own in `json-body.ts`) is refused with a
 * readable 413, sent or chunked alike: reading stops, but the socket is not destroyed (a reset can
 * destroy the answer in the client's kernel before the client reads it). The answer goes out with
 * its length and `Connection: close`, so that the client has it whole at once, and the connection
 * closes lingering, as nginx's does: it stays open until the client closes or
 * {@linkcode LINGER_MS} passed. The rest of the body is not read meanwhile: it waits in the
 * kernel's buffers, not in this process (reading and dropping it was measured to grow a Bun
 * server's memory by 20 MiB for 24 such clients).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Clock, TimerHandle } from "../../protocol/clock.ts";
import { JsonBodyError } from "./json-body.ts";

/** How long a connection whose request body was left unread stays open after its answer. */
export const LINGER_MS = 2_000;
/** An unread request body this small (declared) is read and dropped, and its connection kept. */
export const DISCARD_BYTES = 64 * 1024;

/** What {@linkcode requestBodyStream} waits for a body's bytes. */
export interface BodyDeadline {
  /**
   * Longest wait for the next byte while the handler reads: past it the stream fails with
   * {@linkcode JsonBodyError} 408 and the body counts as stalled ({@linkcode bodyStalled}).
   */
  readonly idleMs: number;
  /** The clock of `idleMs`. */
  readonly clock: Clock;
}

/** Requests whose body stopped arriving while the handler read it: their connection closes. */
const stalled = new WeakSet<IncomingMessage>();

/**
 * The request's body as a web stream, at most `maxBytes`: past it the stream fails with
 * {@linkcode JsonBodyError} 413 and the socket is no longer read. Nothing is read until the
 * handler reads (a request refused before it reads its body costs no byte of it here), then one
 * chunk at a time. A client that sends nothing for `deadline.idleMs` while the handler waits
 * fails it with 408: a body that holds still holds nothing of the server's for long. Canceling
 * the stream stops reading too; neither destroys the connection (see the module comment).
 */
export function requestBodyStream(
  req: IncomingMessage,
  maxBytes: number,
  deadline?: BodyDeadline,
): ReadableStream<Uint8Array> {
  let size = 0;
  // Once failed, canceled or ended, the stream takes nothing more (the socket may still be read
  // and dropped while the connection lingers).
  let settled = false;
  let timer: TimerHandle | undefined;
  const disarm = () => {
    if (timer === undefined) return;
    deadline?.clock.clearTimeout(timer);
    timer = undefined;
  };
  const settle = () => {
    disarm();
    const was = settled;
    settled = true;
    return !was;
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      req.on("data", (chunk: Uint8Array) => {
        if (settled) return;
        disarm();
        size += chunk.byteLength;
        if (size > maxBytes) {
          settle();
          stopReading(req);
          controller.error(new JsonBodyError(413, `bodies take at most ${maxBytes} bytes`));
          return;
        }
        controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        // One chunk at a time: the socket is read as fast as the handler reads.
        req.pause();
      });
      req.once("end", () => settle() && controller.close());
      req.once("error", (error) => settle() && controller.error(error));
      // A connection gone before the body was whole ends the handler's read too.
      req.once("close", () => {
        if (!req.complete && settle()) {
          controller.error(new JsonBodyError(400, "the connection closed before the body ended"));
        }
      });
      req.pause();
    },
    pull(controller) {
      if (settled) return;
      // The handler waits on the client from here: it must keep sending.
      if (deadline && timer === undefined) {
        timer = deadline.clock.setTimeout(() => {
          timer = undefined;
          if (!settle()) return;
          stalled.add(req);
          stopReading(req);
          controller.error(
            new JsonBodyError(408, `no byte of the body arrived for ${deadline.idleMs} ms`),
          );
        }, deadline.idleMs);
      }
      req.resume();
    },
    cancel() {
      settle();
      stopReading(req);
    },
    // No chunk read ahead: `pull` runs only while the handler waits on a read.
  }, { highWaterMark: 0 });
}

/** Whether the body of `req` stopped arriving while the handler read it (its answer closes). */
export function bodyStalled(req: IncomingMessage): boolean {
  return stalled.has(req);
}

/** Whether `req` has a body that was not read to its end (its answer must then close). */
export function bodyLeftUnread(req: IncomingMessage): boolean {
  return !req.readableEnded && !req.complete;
}

/**
 * Reads what is left of a small request body and drops it, so that its connection can stay. One
 * not whole within `deadline.idleMs` (a client holding it still, or trickling it) loses its
 * connection.
 */
export function discardBody(req: IncomingMessage, deadline: BodyDeadline): void {
  req.removeAllListeners("data");
  req.on("data", () => {});
  const timer = deadline.clock.setTimeout(() => req.socket?.destroy(), deadline.idleMs);
  const done = () => deadline.clock.clearTimeout(timer);
  req.once("end", done);
  req.once("close", done);
  req.resume();
}

/**
 * Ends `res`, an answer sent with `Connection: close` to a request whose body was left unread,
 * lingering first (see the module comment): resolves once the client has closed or
 * {@linkcode LINGER_MS} passed, and the answer has ended.
 */
export async function endLingering(res: ServerResponse, clock: Clock): Promise<void> {
  if (!res.destroyed) {
    await new Promise<void>((resume) => {
      const done = () => {
        clock.clearTimeout(timer);
        res.off("close", done);
        resume();
      };
      const timer = clock.setTimeout(done, LINGER_MS);
      res.on("close", done);
    });
  }
  res.end();
}

/** Stops reading `req` for good, without destroying its connection. */
function stopReading(req: IncomingMessage): void {
  req.removeAllListeners("data");
  req.pause();
}
