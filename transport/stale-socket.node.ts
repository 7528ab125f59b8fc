/**
 * Clearing a Unix socket path before a server listens on it, with `node:fs` (which Node, Deno and
 * Bun all run). A socket file left by a server that died is removed, so a restart can listen
 * again; anything else at the path is someone's file and is never removed: the server refuses
 * to listen ({@linkcode SocketPathTakenError}).
 */
import { lstat, unlink } from "node:fs/promises";
import { LocalError } from "../protocol/errors.ts";

/** What a path names, as the refusal says it. */
export type SocketPathOccupant = "regular file" | "directory" | "symbolic link" | "special file";

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
      `cannot listen on ${path}: a ${occupant} is there, not a socket ` +
        "(it is left alone: remove it, or choose another path)",
    );
    this.name = "SocketPathTakenError";
    this.path = path;
    this.occupant = occupant;
  }
}

/**
 * Removes `path` when it is a socket (a previous server's, left behind), does nothing when
 * nothing is there, and rejects with {@linkcode SocketPathTakenError} when something else is.
 * Other failures (a missing or unreadable directory) are left to `listen`, which names them.
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
