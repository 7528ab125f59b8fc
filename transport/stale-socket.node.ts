/**
 * Clearing a Unix socket path before a server listens on it, with `node:fs` (which Node, Deno and
 * Bun all run). A socket file left by a server that died is removed, so a restart can listen
 * again; a socket a server still listens on, and anything else at the path, is never removed:
 * the server refuses to listen ({@linkcode SocketPathTakenError}).
 */
import { lstat, unlink } from "node:fs/promises";
import { createConnection } from "node:net";
import { LocalError } from "../protocol/errors.ts";

/** What a path names, as the refusal says it. */
export type SocketPathOccupant =
  | "regular file"
  | "directory"
  | "symbolic link"
  | "special file"
  | "listening socket";

/**
 * A server was asked to listen on a Unix socket path where something other than a socket is (a
 * regular file, a directory, a symbolic link): it refuses rather than delete it.
 */
export class SocketPathTakenError extends LocalError {
  /** The path the server was to listen on. */
  readonly path: string;
  /** What is there instead of a socket. */
  readonly occupant: SocketPathOccupant;
  /** The path and what occupies it. */
  constructor(path: string, occupant: SocketPathOccupant) {
    super(
      occupant === "listening socket"
        ? `cannot listen on ${path}: a server is listening there ` +
          "(it is left alone: stop it, or choose another path)"
        : `cannot listen on ${path}: a ${occupant} is there, not a socket ` +
          "(it is left alone: remove it, or choose another path)",
    );
    this.name = "SocketPathTakenError";
    this.path = path;
    this.occupant = occupant;
  }
}

/**
 * Removes `path` when it is a socket no server listens on (a previous server's, left behind),
 * does nothing when nothing is there, and rejects with {@linkcode SocketPathTakenError} when a
 * server still listens on it or something else is there. Other failures (a missing or unreadable
 * directory) are left to `listen`, which names them.
 */
export async function removeStaleSocket(path: string): Promise<void> {
  let stats;
  try {
    stats = await lstat(path);
  } catch {
    return;
  }
  // lstat, not stat: a symbolic link is judged itself, never what it points to.
  if (stats.isSocket()) {
    // Unlinked, a live server's socket would vanish under it: its clients could no longer
    // reach it, and the two would both believe they serve the path.
    if (await listening(path)) throw new SocketPathTakenError(path, "listening socket");
    await unlink(path).catch(() => {});
    return;
  }
  throw new SocketPathTakenError(
    path,
    stats.isFile()
      ? "regular file"
      : stats.isDirectory()
      ? "directory"
      : stats.isSymbolicLink()
      ? "symbolic link"
      : "special file",
  );
}

/** How long a connection to a socket may take to say whether a server listens there. */
const PROBE_MS = 2_000;

/**
 * Whether a server accepts connections on the socket at `path`: refused (or gone) means stale. A
 * server too busy to accept within {@linkcode PROBE_MS} counts as listening: removing its
 * socket is the harm to avoid.
 */
function listening(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ path });
    const done = (live: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(live);
    };
    const timer = setTimeout(() => done(true), PROBE_MS);
    socket.once("connect", () => done(true));
    socket.once("error", (error: NodeJS.ErrnoException) => {
      done(error.code !== "ECONNREFUSED" && error.code !== "ENOENT");
    });
  });
}
