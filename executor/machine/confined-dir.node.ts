/**
 * An open directory and the operations on its direct children, none of which follows a
 * symlink: the building block of {@linkcode Workdir}'s confinement.
 *
 * On Linux a child is reached as `/proc/self/fd/<fd>/<name>`: the kernel starts the lookup
 * from the open directory itself (as `openat(2)` does), so no path above it is walked again and
 * no swap of a directory elsewhere can redirect it. Where `/proc/self/fd` does not exist the
 * child is reached through the directory's real path, and every opened descriptor is compared
 * (device, inode) with an `lstat` of that path: a final component swapped in is caught, a
 * directory above it swapped during the lookup is not (see the README's security model).
 */
import { constants } from "node:fs";
import {
  type FileHandle,
  lstat,
  mkdir,
  open,
  opendir,
  readlink,
  rename,
  rmdir,
  symlink,
  unlink,
} from "node:fs/promises";
import type { Stats } from "node:fs";
import { randomHex } from "../../protocol/ids.ts";

const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const O_DIRECTORY = constants.O_DIRECTORY ?? 0;
const O_NONBLOCK = constants.O_NONBLOCK ?? 0;
const { O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL } = constants;

/** Flags of every open of an existing file: no symlink, and a FIFO never blocks the open. */
export const READ_FLAGS: number = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
/** The same for reading and writing in place. */
export const WRITE_FLAGS: number = O_RDWR | O_NOFOLLOW | O_NONBLOCK;

/** An error with an errno-style `code`, as Node's own file system errors carry. */
export class FsError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.name = "FsError";
    this.code = code;
  }
}

/** The `code` of a file system error, if it has one. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * Runs one removal: true when the entry is gone (removed, or missing already), false when it
 * failed with one of the codes `again` names (the caller tries another way); any other failure
 * is thrown.
 */
async function removed(remove: () => Promise<void>, again: readonly string[]): Promise<boolean> {
  try {
    await remove();
    return true;
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT") return true;
    if (code === undefined || !again.includes(code)) throw error;
    return false;
  }
}

/** What a directory entry is, as `readdir` reports it (a symlink is never resolved). */
export type EntryKind = "file" | "directory" | "symlink" | "other";

/** A name of one directory entry: not empty, not `.` or `..`, no `/`, no NUL. */
export function checkName(name: string): string {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new FsError("EINVAL", `not a file name: ${JSON.stringify(name)}`);
  }
  return name;
}

/** How children of a directory are addressed (see the module comment). */
export type Addressing = "descriptor" | "path";

/** An open directory; {@linkcode ConfinedDir.close} it when done. */
export class ConfinedDir {
  /** The directory's real absolute path when it was reached. */
  readonly path: string;
  /** Its path below the confinement root, `/`-separated (`""` for the root itself). */
  readonly relativePath: string;
  readonly #handle: FileHandle;
  readonly #addressing: Addressing;
  #closed = false;

  /** Wraps `handle`, an open directory reached at `path` (`relativePath` below the root). */
  constructor(handle: FileHandle, path: string, relativePath: string, addressing: Addressing) {
    this.#handle = handle;
    this.path = path;
    this.relativePath = relativePath;
    this.#addressing = addressing;
  }

  /** How children are addressed. */
  get addressing(): Addressing {
    return this.#addressing;
  }

  /** The path through which a system call reaches the child `name` of this very directory. */
  at(name: string): string {
    checkName(name);
    return this.#addressing === "descriptor"
      ? `/proc/self/fd/${this.#handle.fd}/${name}`
      : `${this.path === "/" ? "" : this.path}/${name}`;
  }

  /** The real absolute path of the child `name` (for results and messages, never for access). */
  pathOf(name: string): string {
    return `${this.path === "/" ? "" : this.path}/${name}`;
  }

  /** The child's path below the root. */
  relativeOf(name: string): string {
    return this.relativePath === "" ? name : `${this.relativePath}/${name}`;
  }

  /** The directory's entries, streamed (a huge directory is never listed whole). */
  async *entries(): AsyncGenerator<{ name: string; kind: EntryKind }> {
    const dir = await opendir(
      this.#addressing === "descriptor" ? `/proc/self/fd/${this.#handle.fd}` : this.path,
      { bufferSize: 64 },
    );
    try {
      for (;;) {
        const entry = await dir.read();
        if (entry === null) return;
        const kind: EntryKind = entry.isFile()
          ? "file"
          : entry.isDirectory()
          ? "directory"
          : entry.isSymbolicLink()
          ? "symlink"
          : "other";
        yield { name: entry.name, kind };
      }
    } finally {
      await dir.close().catch(() => {});
    }
  }

  /** Opens the child directory `name`; a symlink is refused (`ENOTDIR` or `ELOOP`). */
  async openDirectory(name: string): Promise<ConfinedDir> {
    const opened = await this.openChild(name, O_RDONLY | O_DIRECTORY, true);
    return (opened as { dir: ConfinedDir }).dir;
  }

  /**
   * Opens the child `name` with `flags` (a symlink is refused with `ELOOP`). The result is a
   * regular file or, when `directories` allows it, a directory; anything else is `EINVAL`.
   */
  async openChild(
    name: string,
    flags: number = READ_FLAGS,
    directories = false,
  ): Promise<{ file: FileHandle; stat: Stats } | { dir: ConfinedDir }> {
    const handle = await open(this.at(name), flags | O_NOFOLLOW);
    try {
      const stat = await this.#verify(handle, name);
      if (stat.isFile()) return { file: handle, stat };
      if (stat.isDirectory()) {
        if (!directories) throw new FsError("EISDIR", `is a directory: ${this.relativeOf(name)}`);
        return {
          dir: new ConfinedDir(handle, this.pathOf(name), this.relativeOf(name), this.#addressing),
        };
      }
      throw new FsError("EINVAL", `not a regular file: ${this.relativeOf(name)}`);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Opens the regular file `name` (no symlink, no FIFO or device). */
  async openFile(
    name: string,
    flags: number = READ_FLAGS,
  ): Promise<{ file: FileHandle; stat: Stats }> {
    const opened = await this.openChild(name, flags);
    return opened as { file: FileHandle; stat: Stats };
  }

  /** The child's own status (a symlink is reported as one), or undefined when it is missing. */
  async lstat(name: string): Promise<Stats | undefined> {
    try {
      return await lstat(this.at(name));
    } catch (error) {
      if (errorCode(error) === "ENOENT") return undefined;
      throw error;
    }
  }

  /** The target of the symlink `name`; `EINVAL` when it is not one. */
  readlink(name: string): Promise<string> {
    return readlink(this.at(name));
  }

  /** Makes the child directory `name`; an existing one is fine. */
  async mkdir(name: string, mode = 0o777): Promise<void> {
    try {
      await mkdir(this.at(name), mode);
    } catch (error) {
      if (errorCode(error) !== "EEXIST") throw error;
    }
  }

  /** Opens the child directory `name`, making it first when it is missing. */
  async ensureDirectory(name: string): Promise<ConfinedDir> {
    for (let attempt = 0;; attempt++) {
      try {
        return await this.openDirectory(name);
      } catch (error) {
        if (errorCode(error) !== "ENOENT" || attempt > 3) throw error;
      }
      await this.mkdir(name);
    }
  }

  /** Makes a symlink `name` pointing at `target` (the target is not looked at). */
  symlink(target: string, name: string): Promise<void> {
    return symlink(target, this.at(name));
  }

  /** Renames the child `from` to `to` in `dir` (default this one), replacing what `to` names. */
  rename(from: string, to: string, dir: ConfinedDir = this): Promise<void> {
    return rename(this.at(from), dir.at(to));
  }

  /** Removes the child `name` if it is not a directory; false when there was nothing. */
  async unlink(name: string): Promise<boolean> {
    try {
      await unlink(this.at(name));
      return true;
    } catch (error) {
      if (errorCode(error) === "ENOENT") return false;
      throw error;
    }
  }

  /**
   * Removes the child `name` and, for a directory, everything below it, without following a
   * symlink anywhere (a link is removed, never what it points at).
   */
  async removeTree(name: string): Promise<void> {
    for (let attempt = 0; attempt < 4; attempt++) {
      // A directory: EISDIR on Linux, EPERM elsewhere, ENOTEMPTY from Deno's unlink.
      if (await removed(() => unlink(this.at(name)), ["EISDIR", "EPERM", "ENOTEMPTY"])) return;
      let child: ConfinedDir;
      try {
        child = await this.openDirectory(name);
      } catch (error) {
        const code = errorCode(error);
        if (code === "ENOENT") return;
        if (code === "ENOTDIR" || code === "ELOOP") continue; // replaced by a file or link
        throw error;
      }
      try {
        const names: string[] = [];
        for await (const entry of child.entries()) names.push(entry.name);
        for (const entry of names) await child.removeTree(entry);
      } finally {
        await child.close();
      }
      // Not empty: something was created in it meanwhile; another round.
      if (await removed(() => rmdir(this.at(name)), ["ENOTEMPTY", "EEXIST"])) return;
    }
    throw new FsError("EBUSY", `could not remove ${this.relativeOf(name)}`);
  }

  /**
   * Creates a new file named `.bma-<random>` here (`O_CREAT | O_EXCL`, never through a link),
   * with mode 0666 less the umask.
   */
  async createTemp(prefix = ".bma-"): Promise<{ name: string; file: FileHandle }> {
    for (;;) {
      const name = `${prefix}${randomHex(8)}.tmp`;
      try {
        const file = await open(this.at(name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o666);
        try {
          await this.#verify(file, name);
        } catch (error) {
          await file.close();
          throw error;
        }
        return { name, file };
      } catch (error) {
        if (errorCode(error) !== "EEXIST") throw error;
      }
    }
  }

  /** Makes a new directory named `<prefix><random>` here and opens it. */
  async createTempDirectory(prefix: string): Promise<{ name: string; dir: ConfinedDir }> {
    for (;;) {
      const name = `${prefix}${randomHex(8)}`;
      try {
        await mkdir(this.at(name), 0o700);
      } catch (error) {
        if (errorCode(error) === "EEXIST") continue;
        throw error;
      }
      return { name, dir: await this.openDirectory(name) };
    }
  }

  /**
   * Where the kernel says this directory is now (descriptor addressing only; undefined
   * elsewhere): a directory moved away while it was open no longer lies inside the root.
   */
  async currentPath(): Promise<string | undefined> {
    if (this.#addressing !== "descriptor") return undefined;
    return await readlink(`/proc/self/fd/${this.#handle.fd}`);
  }

  /** Sets the directory's own access and modification times to now. */
  async touch(): Promise<void> {
    const now = new Date();
    await this.#handle.utimes(now, now);
  }

  /** Closes the directory (idempotent). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#handle.close().catch(() => {});
  }

  /**
   * Where children are addressed by path, the descriptor must be what `name` names now: a
   * component swapped in between the lookup and the open shows as another (device, inode).
   */
  async #verify(handle: FileHandle, name: string): Promise<Stats> {
    const stat = await handle.stat();
    if (this.#addressing === "path") {
      const now = await lstat(this.at(name)).catch(() => undefined);
      if (!now || now.dev !== stat.dev || now.ino !== stat.ino) {
        throw new FsError("ELOOP", `changed while it was opened: ${this.relativeOf(name)}`);
      }
    }
    return stat;
  }
}
