/**
 * What a Unix socket path must be before a server listens on it or a client connects to it, with
 * `node:process` and `node:path` (which Node, Deno and Bun all run): short enough for the
 * system's `sun_path`, and the URL a server reports for it.
 */
import process from "node:process";
import { isAbsolute, resolve } from "node:path";
import { LocalError } from "../protocol/errors.ts";
import { isLocalSocketUrl, localSocketPath } from "./server.ts";
import { DialError } from "./transport.ts";
import { unsupportedDialUrl } from "./dial-url.ts";

/**
 * The longest Unix socket path, in bytes, the system takes whole: `sun_path` less its closing
 * NUL, 108 - 1 on Linux, 104 - 1 on macOS and the BSDs. A longer one is not refused by Node's
 * `listen` or `connect`: it is cut short, and a server then binds a file it does not report,
 * cannot remove, and finds in its way at the next start.
 */
export function maxSocketPathBytes(platform: string = process.platform): number {
  return platform === "darwin" || platform.endsWith("bsd") ? 103 : 107;
}

/**
 * A Unix socket path longer than the system takes ({@linkcode maxSocketPathBytes}): refused
 * before anything is bound or dialed. `code` is the errno a system that refuses it names.
 */
export class SocketPathTooLongError extends LocalError {
  /** The path as given. */
  readonly path: string;
  /** Its length in bytes (UTF-8). */
  readonly bytes: number;
  /** The most this system takes. */
  readonly limit: number;
  /** The errno a system that refuses such a path names. */
  readonly code = "ENAMETOOLONG";
  /** `action` is what was to be done with the path: listen on it, or connect to it. */
  constructor(
    path: string,
    bytes: number,
    limit: number,
    action: "listen on" | "connect to",
    absolute?: string,
  ) {
    super(
      absolute === undefined
        ? `cannot ${action} ${path}: a Unix socket path may have at most ${limit} bytes here, ` +
          `this one has ${bytes} (choose a shorter path)`
        : `cannot ${action} ${path}: its absolute path ${absolute}, which its unix:// URL ` +
          `names, has ${bytes} bytes, and a Unix socket path may have at most ${limit} here ` +
          `(choose a shorter path)`,
    );
    this.name = "SocketPathTooLongError";
    this.path = path;
    this.bytes = bytes;
    this.limit = limit;
  }
}

const encoder = new TextEncoder();

/**
 * Throws {@linkcode SocketPathTooLongError} when `path` is longer than the system takes: the
 * one check before every runtime's server listens on a Unix socket path (a relative one's
 * absolute form too, which its URL names), and before it is dialed. Windows named pipes (`\\.\pipe\name`) have no such limit and are not checked.
 */
export function assertSocketPathFits(path: string, action: "listen on" | "connect to"): void {
  if (path.startsWith("\\\\.\\pipe\\")) return;
  const bytes = encoder.encode(path).byteLength;
  const limit = maxSocketPathBytes();
  if (bytes > limit) throw new SocketPathTooLongError(path, bytes, limit, action);
  // A relative path binds from the working directory, but its URL names the absolute path
  // (`socketUrl`), which is what clients dial: that one must fit too.
  if (action === "listen on" && !isAbsolute(path)) {
    const absolute = resolve(path);
    const absoluteBytes = encoder.encode(absolute).byteLength;
    if (absoluteBytes > limit) {
      throw new SocketPathTooLongError(path, absoluteBytes, limit, action, absolute);
    }
  }
}

/**
 * The dial of `url` refused up front: a URL no dialer opens (`unsupportedDialUrl`), or a Unix
 * socket path too long to connect to (a {@linkcode DialError} whose `cause` is the
 * {@linkcode SocketPathTooLongError}). Undefined when the dial may go ahead.
 */
export function refusedDial(url: string): Promise<never> | undefined {
  const unsupported = unsupportedDialUrl(url);
  if (unsupported) return Promise.reject(unsupported);
  if (!isLocalSocketUrl(url)) return undefined;
  try {
    assertSocketPathFits(localSocketPath(url), "connect to");
  } catch (error) {
    return Promise.reject(new DialError((error as Error).message, undefined, { cause: error }));
  }
  return undefined;
}

/**
 * The `unix://` URL a server on `path` is reached at. A relative path is made absolute (from the
 * working directory, which it was bound from): `unix://` followed by `s/x.sock` would read as
 * host `s` and path `/x.sock`, another file.
 */
export function socketUrl(path: string): string {
  return `unix://${isAbsolute(path) ? path : resolve(path)}`;
}
