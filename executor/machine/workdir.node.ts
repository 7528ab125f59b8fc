/**
 * A session's working directory and the one rule every file access of the executor obeys: a
 * path given by a caller reaches nothing outside the root, whatever symlinks are there or are
 * swapped in while it is being opened.
 *
 * How: the path is split lexically (`..` may not climb above the root), then walked from the
 * open root one component at a time through {@linkcode ConfinedDir}, each directory opened with
 * `O_NOFOLLOW` relative to its parent's descriptor. A symlink met on the way is read and its
 * target walked the same way from the root when it lies inside the root (lexically, against the
 * link's own directory); a link that leads outside is refused with
 * {@linkcode PathOutsideWorkdirError}. Files are opened with `O_NOFOLLOW`, created `O_EXCL`, and
 * written as a temporary file in the checked directory renamed over the name (a link at the
 * name is replaced, never followed). On Linux each result's descriptor is finally checked to
 * lie inside the root by the kernel's own account (`/proc/self/fd`).
 */
import type { FileHandle } from "node:fs/promises";
import { open, readlink, realpath } from "node:fs/promises";
import { constants, type Stats } from "node:fs";
import { isAbsolute, posix, relative, resolve, sep } from "node:path";
import {
  type Addressing,
  ConfinedDir,
  errorCode,
  FsError,
  READ_FLAGS,
  WRITE_FLAGS,
} from "./confined-dir.node.ts";

export { ConfinedDir, errorCode, FsError } from "./confined-dir.node.ts";

/** How many symlinks one lookup may follow (as Linux's `MAXSYMLINKS`). */
const MAX_SYMLINKS = 40;

/** A path resolved outside the workdir (directly, through `..`, or through a symlink). */
export class PathOutsideWorkdirError extends Error {
  /** The path as given. */
  readonly path: string;
  constructor(path: string) {
    super(`path is outside the workdir: ${path}`);
    this.name = "PathOutsideWorkdirError";
    this.path = path;
  }
}

/** Options of {@linkcode Workdir}. */
export interface WorkdirOptions {
  /**
   * How children of a directory are reached: `"descriptor"` through `/proc/self/fd/<fd>/`
   * (Linux: no path is walked twice, races are excluded), `"path"` through real paths with a
   * (device, inode) check after each open. Default: `"descriptor"` where `/proc/self/fd`
   * names the open root, else `"path"`.
   */
  addressing?: Addressing;
}

/** A regular file opened inside the root. Close {@linkcode OpenedFile.file} when done. */
export interface OpenedFile {
  readonly file: FileHandle;
  readonly stat: Stats;
  /** Its real absolute path. */
  readonly path: string;
}

/** What {@linkcode Workdir.open} found: a regular file or a directory. */
export type OpenedEntry =
  | ({ kind: "file" } & OpenedFile)
  | { kind: "directory"; dir: ConfinedDir };

/** Options of {@linkcode Workdir.writeFile}. */
export interface WriteFileOptions {
  /** Mode of the file; default that of the file replaced, or 0666 less the umask. */
  mode?: number;
  /** Make missing parent directories (default true). */
  createParents?: boolean;
}

/** The root every path of a session resolves in. */
export class Workdir {
  readonly root: string;
  #realRoot: Promise<string> | undefined;
  #addressing: Addressing | undefined;

  constructor(root: string, options: WorkdirOptions = {}) {
    this.root = resolve(root);
    this.#addressing = options.addressing;
  }

  /** The root with symlinks resolved. */
  realRoot(): Promise<string> {
    this.#realRoot ??= realpath(this.root).catch((error) => {
      this.#realRoot = undefined; // a root made later is found then
      throw error;
    });
    return this.#realRoot;
  }

  /**
   * Resolves `path` (relative to the root, or absolute inside it) to an absolute real path
   * inside the root, following symlinks that stay inside. A path that does not exist yet
   * resolves to where it would be created. For a process's working directory: the caller opens
   * it by path afterwards, which a concurrent swap can still redirect (processes are not
   * confined; see the README's security model).
   */
  async resolve(path: string = "."): Promise<string> {
    try {
      const { dir, name } = await this.#locate(path, { create: false });
      await dir.close();
      return name === undefined ? dir.path : dir.pathOf(name);
    } catch (error) {
      if (!(error instanceof MissingComponent)) throw error;
      return error.wouldBe;
    }
  }

  /** `absolute` as shown to a tool's caller: relative to the root. */
  async display(absolute: string): Promise<string> {
    return relative(await this.realRoot(), absolute) || ".";
  }

  /** Opens the root itself. */
  async openRoot(): Promise<ConfinedDir> {
    const root = await this.realRoot();
    const handle = await open(
      root,
      constants.O_RDONLY | (constants.O_DIRECTORY ?? 0) |
        (constants.O_NOFOLLOW ?? 0),
    );
    try {
      const stat = await handle.stat();
      if (!stat.isDirectory()) throw new FsError("ENOTDIR", "the workdir is not a directory");
      if (this.#addressing !== "path") {
        const seen = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
        if (seen === undefined) {
          if (this.#addressing === "descriptor") {
            throw new FsError("ENOSYS", "/proc/self/fd is not available");
          }
          this.#addressing = "path";
        } else {
          this.#addressing = "descriptor";
          // The root was moved or replaced by a link since it was resolved.
          if (seen !== root) throw new PathOutsideWorkdirError(this.root);
        }
      }
      return new ConfinedDir(handle, root, "", this.#addressing ?? "path");
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /**
   * Opens the regular file at `path` for reading (default) or writing in place. A symlink on
   * the way or at the end is followed only inside the root.
   */
  async openFile(path: string, mode: "read" | "write" = "read"): Promise<OpenedFile> {
    const opened = await this.#open(path, mode === "read" ? READ_FLAGS : WRITE_FLAGS, false);
    return opened as OpenedFile;
  }

  /** Opens what `path` names: a regular file (for reading) or a directory. */
  open(path: string): Promise<OpenedEntry> {
    return this.#open(path, READ_FLAGS, true);
  }

  /** Opens the directory at `path`; with `create`, missing directories are made on the way. */
  async openDirectory(path: string, options: { create?: boolean } = {}): Promise<ConfinedDir> {
    for (let attempt = 0;; attempt++) {
      let opened: OpenedEntry;
      try {
        opened = await this.open(path);
      } catch (error) {
        if (!options.create || errorCode(error) !== "ENOENT" || attempt > MAX_SYMLINKS) throw error;
        const { dir, name } = await this.parentOf(path, { create: true });
        try {
          await dir.mkdir(name);
        } finally {
          await dir.close();
        }
        continue;
      }
      if (opened.kind === "directory") return opened.dir;
      await opened.file.close();
      throw new FsError("ENOTDIR", `not a directory: ${path}`);
    }
  }

  /**
   * The directory holding `path`'s final component and that component's name, every symlink on
   * the way and a symlink at the end followed inside the root. With `create`, missing parent
   * directories are made. Close the directory when done.
   */
  async parentOf(
    path: string,
    options: { create?: boolean } = {},
  ): Promise<{ dir: ConfinedDir; name: string }> {
    const located = await this.#locate(path, { create: options.create ?? false });
    if (located.name === undefined) {
      await located.dir.close();
      throw new FsError("EISDIR", "the workdir itself is a directory");
    }
    return located as { dir: ConfinedDir; name: string };
  }

  /**
   * Replaces (or creates) the file at `path` with what `write` puts into a new temporary file
   * in the same checked directory, renamed over the name at the end: readers see the old or
   * the new content, never a part, and a symlink at the name is replaced, not followed.
   */
  async writeFile(
    path: string,
    write: Uint8Array | ((file: FileHandle) => Promise<void>),
    options: WriteFileOptions = {},
  ): Promise<{ path: string; created: boolean }> {
    const { dir, name } = await this.parentOf(path, { create: options.createParents ?? true });
    try {
      return await writeIn(dir, name, write, options.mode);
    } finally {
      await dir.close();
    }
  }

  async #open(path: string, flags: number, directories: boolean): Promise<OpenedEntry> {
    for (let attempt = 0;; attempt++) {
      const { dir, name } = await this.#locate(path, { create: false });
      if (name === undefined) {
        if (directories) return { kind: "directory", dir };
        await dir.close();
        throw new FsError("EISDIR", `is a directory: ${path}`);
      }
      try {
        const opened = await dir.openChild(name, flags, directories);
        if ("dir" in opened) {
          return { kind: "directory", dir: await this.#inside(opened.dir, path) };
        }
        try {
          await this.#fileInside(opened.file, path);
        } catch (error) {
          await opened.file.close();
          throw error;
        }
        return { kind: "file", file: opened.file, stat: opened.stat, path: dir.pathOf(name) };
      } catch (error) {
        // Swapped for a link after the lookup: look again (the link is followed, or refused).
        if (errorCode(error) !== "ELOOP" || attempt >= MAX_SYMLINKS) throw error;
      } finally {
        await dir.close();
      }
    }
  }

  /**
   * Walks to the directory that holds `path`'s final component (the root itself for `.`):
   * the heart of the rule. Symlinks on the way and at the end are read and their targets walked
   * again from the root when they lie inside it.
   */
  async #locate(
    path: string,
    options: { create: boolean },
  ): Promise<Located> {
    const root = await this.realRoot();
    let components = this.#lexical(path, root);
    for (let links = 0;; links++) {
      if (links > MAX_SYMLINKS) throw new FsError("ELOOP", `too many symlinks: ${path}`);
      const step = await this.#walk(components, path, root, options);
      if (!("follow" in step)) return step;
      components = step.follow;
    }
  }

  /** One walk of `components` from the root, up to the first symlink met. */
  async #walk(
    components: string[],
    path: string,
    root: string,
    options: { create: boolean },
  ): Promise<Located | { follow: string[] }> {
    let dir: ConfinedDir | undefined = await this.openRoot();
    try {
      for (let i = 0; i < components.length; i++) {
        const name = components[i];
        if (i === components.length - 1) {
          if ((await dir.lstat(name))?.isSymbolicLink()) {
            const target = await this.#target(dir, name, path, root);
            // No longer a link when read: look at the same path again.
            return { follow: target ?? components };
          }
          const located = { dir: await this.#inside(dir, path), name };
          dir = undefined; // handed to the caller
          return located;
        }
        const next = await this.#child(
          dir,
          name,
          options.create,
          () =>
            new MissingComponent(path, posix.join(dir!.pathOf(name), ...components.slice(i + 1))),
        );
        if (next === "link") {
          const target = await this.#target(dir, name, path, root);
          if (target === undefined) throw new FsError("ENOTDIR", `not a directory: ${path}`);
          return { follow: [...target, ...components.slice(i + 1)] };
        }
        await dir.close();
        dir = next;
      }
      const located = { dir: await this.#inside(dir, path), name: undefined };
      dir = undefined;
      return located;
    } finally {
      await dir?.close();
    }
  }

  /** The child directory `name` of `dir`, made when missing and `create`; "link" if not one. */
  async #child(
    dir: ConfinedDir,
    name: string,
    create: boolean,
    missing: () => Error,
  ): Promise<ConfinedDir | "link"> {
    try {
      return await dir.openDirectory(name);
    } catch (error) {
      const code = errorCode(error);
      if (code === "ENOTDIR" || code === "ELOOP") return "link";
      if (code !== "ENOENT") throw error;
    }
    if (!create) throw missing();
    try {
      return await dir.ensureDirectory(name);
    } catch (error) {
      const code = errorCode(error);
      if (code === "ENOTDIR" || code === "ELOOP") return "link";
      throw error;
    }
  }

  /**
   * The components below the root that the symlink `name` in `dir` points at; undefined when
   * `name` is not a symlink (any more).
   */
  async #target(
    dir: ConfinedDir,
    name: string,
    path: string,
    root: string,
  ): Promise<string[] | undefined> {
    let target: string;
    try {
      target = await dir.readlink(name);
    } catch (error) {
      if (errorCode(error) === "EINVAL") return undefined;
      if (errorCode(error) === "ENOENT") throw new MissingComponent(path, dir.pathOf(name));
      throw error;
    }
    if (isAbsolute(target)) return this.#lexical(target, root, path);
    const below = climb(split(dir.relativePath), target);
    if (below === undefined) throw new PathOutsideWorkdirError(path);
    return below;
  }

  /** `path`'s components below the root, or {@linkcode PathOutsideWorkdirError}. */
  #lexical(path: string, root: string, reported: string = path): string[] {
    if (path.includes("\0")) throw new PathOutsideWorkdirError(reported);
    let below: string;
    if (isAbsolute(path)) {
      const absolute = resolve(path);
      // An absolute path may name the root by its real or its given spelling.
      const base = within(root, absolute) ? root : within(this.root, absolute) ? this.root : "";
      if (base === "") throw new PathOutsideWorkdirError(reported);
      below = relative(base, absolute);
    } else {
      below = path;
    }
    const components = climb([], below.split(sep).join("/"));
    if (components === undefined) throw new PathOutsideWorkdirError(reported);
    return components;
  }

  /** `dir`, if the kernel still places it inside the root (closed and refused otherwise). */
  async #inside(dir: ConfinedDir, path: string): Promise<ConfinedDir> {
    const now = await dir.currentPath().catch(() => undefined);
    if (now !== undefined && !within(await this.realRoot(), now)) {
      await dir.close();
      throw new PathOutsideWorkdirError(path);
    }
    return dir;
  }

  async #fileInside(file: FileHandle, path: string): Promise<void> {
    if (this.#addressing !== "descriptor") return;
    const now = await readlink(`/proc/self/fd/${file.fd}`).catch(() => undefined);
    if (now !== undefined && !within(await this.realRoot(), now)) {
      throw new PathOutsideWorkdirError(path);
    }
  }
}

/**
 * Writes `name` in `dir` through a temporary file renamed over it (see
 * {@linkcode Workdir.writeFile}); shared by every writer below a confined directory.
 */
export async function writeIn(
  dir: ConfinedDir,
  name: string,
  write: Uint8Array | ((file: FileHandle) => Promise<void>),
  mode?: number,
): Promise<{ path: string; created: boolean }> {
  const existing = await dir.lstat(name);
  if (existing?.isDirectory()) {
    throw new FsError("EISDIR", `is a directory: ${dir.relativeOf(name)}`);
  }
  const temp = await dir.createTemp();
  try {
    try {
      if (typeof write === "function") await write(temp.file);
      else await temp.file.writeFile(write);
      const keep = mode ?? (existing?.isFile() ? existing.mode & 0o7777 : undefined);
      if (keep !== undefined) await temp.file.chmod(keep);
    } finally {
      await temp.file.close();
    }
    await dir.rename(temp.name, name);
  } catch (error) {
    await dir.unlink(temp.name).catch(() => {});
    throw error;
  }
  return { path: dir.pathOf(name), created: existing === undefined };
}

/** Where {@linkcode Workdir}'s walk ended: the directory and the final component's name. */
interface Located {
  dir: ConfinedDir;
  name: string | undefined;
}

/** A component on the way is missing (the lookup did not create it). */
class MissingComponent extends FsError {
  /** Where the path would be. */
  readonly wouldBe: string;
  constructor(path: string, wouldBe: string) {
    super("ENOENT", `no such file or directory: ${path}`);
    this.wouldBe = wouldBe;
  }
}

/** `relative` applied to the components `from`; undefined when `..` climbs above them all. */
function climb(from: string[], relative: string): string[] | undefined {
  const out = [...from];
  for (const part of relative.split("/")) {
    if (part === "" || part === ".") continue;
    if (part !== "..") out.push(part);
    else if (out.pop() === undefined) return undefined;
  }
  return out;
}

function split(path: string): string[] {
  return path.split("/").filter((part) => part !== "" && part !== ".");
}

function within(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
