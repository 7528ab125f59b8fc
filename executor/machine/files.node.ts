/**
 * The file tools (`read`, `write`, `edit`, `glob`, `grep`), confined to the session workdir by
 * {@linkcode Workdir} (no symlink leads them outside it, glob and grep follow none at all).
 * A failure the caller can act on (missing file, no match, a path outside the workdir, a bad
 * pattern) is a {@linkcode FileToolError}: the executor reports it as a tool error
 * (`is_error: true`).
 *
 * No call can hold the event loop: patterns match in linear time (see `patterns.ts`), a walk or
 * a search yields to the event loop every few milliseconds, and each call's work is bounded
 * ({@linkcode FileLimits}); a call that reaches a bound answers what it found with
 * `truncated: true`.
 */
import type { FileHandle } from "node:fs/promises";
import { setImmediate } from "node:timers";
import type {
  EditInput,
  EditResult,
  GlobInput,
  GlobResult,
  GrepInput,
  GrepResult,
  ReadInput,
  ReadResult,
  WriteInput,
  WriteResult,
} from "../../protocol/generated/contract.ts";
import {
  type ConfinedDir,
  errorCode,
  PathOutsideWorkdirError,
  type Workdir,
} from "./workdir.node.ts";
import { compileGlob, compileRegex, globBase, type LineMatcher, PatternError } from "./patterns.ts";
import { DEFAULT_MACHINE_LIMITS, type FileLimits } from "./limits.ts";

/** A tool-level failure: reported to the model as `is_error: true`, not as a failed call. */
export class FileToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FileToolError";
  }
}

const DEFAULT_READ_LINES = 2_000;
const DEFAULT_GREP_RESULTS = 500;
/** After the lines asked for, `read` counts the rest of a file up to this many bytes. */
const READ_COUNT_BYTES = 64 * 1024 * 1024;
const CHUNK_BYTES = 64 * 1024;
/** How long synchronous work may run before it yields to the event loop. */
const SLICE_MS = 5;
const SKIPPED_DIRECTORIES = new Set([".git", "node_modules"]);
const NEWLINE = 0x0a;

/**
 * Maps a confinement or file system failure to the tool error the model sees, naming `path` as
 * the caller gave it. Any other failure is thrown on, with the executor's own path for the file
 * (`/proc/self/fd/<fd>/<name>`) replaced by `path` in its message.
 */
function toolError(error: unknown, path: string): never {
  if (error instanceof PathOutsideWorkdirError) throw new FileToolError(error.message);
  if (error instanceof PatternError) throw new FileToolError(error.message);
  const code = errorCode(error);
  switch (code) {
    case "ENOENT":
      throw new FileToolError(`no such file: ${path}`);
    case "ENOTDIR":
      throw new FileToolError(`not a directory: ${path}`);
    case "EISDIR":
      throw new FileToolError(`is a directory: ${path}`);
    case "EACCES":
    case "EPERM":
      throw new FileToolError(`permission denied: ${path}`);
    case "ELOOP":
      throw new FileToolError(`too many symlinks: ${path}`);
    // What an open of something else than a regular file or a directory answers: a FIFO or a
    // device (EINVAL, from the check after the open), a socket (ENXIO on Linux, EOPNOTSUPP on
    // BSDs and macOS), a device without a driver (ENXIO, ENODEV).
    case "EINVAL":
    case "ENXIO":
    case "ENODEV":
    case "ENOTSUP":
    case "EOPNOTSUPP":
      throw new FileToolError(`not a regular file: ${path}`);
    case "ETXTBSY":
      throw new FileToolError(`file busy (a program running from it): ${path}`);
    case "ENAMETOOLONG":
      throw new FileToolError(`name too long: ${path}`);
  }
  const internal = (error as { path?: unknown } | null)?.path;
  if (code !== undefined && error instanceof Error && typeof internal === "string") {
    error.message = error.message.split(internal).join(path);
  }
  throw error;
}

/**
 * Yields to the event loop once the current slice of synchronous work is used up, and ends the
 * work (throwing the abort reason) once `signal` is aborted.
 */
class Slicer {
  #until = performance.now() + SLICE_MS;
  readonly #signal: AbortSignal | undefined;
  constructor(signal?: AbortSignal) {
    this.#signal = signal;
  }
  /** Whether the slice is used up (cheap enough to ask on every line). */
  due(): boolean {
    return performance.now() >= this.#until;
  }
  /** Lets timers, sockets and other calls run, then starts a new slice. */
  async pause(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    this.#signal?.throwIfAborted();
    this.#until = performance.now() + SLICE_MS;
  }
}

/**
 * `read`: lines `offset`.. (1-based) of a text file, at most `limit` of them. The file is read up
 * to the size it had when it was opened: what is appended while it is read is not read (nor
 * counted in `total_lines`), so a file that keeps growing is answered too. Aborting `signal`
 * (the call canceled or past its `timeout_ms`) ends the read at its next chunk, and a long scan
 * yields to the event loop every few milliseconds.
 */
export async function readTool(
  input: ReadInput,
  workdir: Workdir,
  limits: FileLimits = DEFAULT_MACHINE_LIMITS,
  signal?: AbortSignal,
): Promise<ReadResult> {
  signal?.throwIfAborted();
  const opened = await workdir.openFile(input.path).catch((e) => toolError(e, input.path));
  try {
    const size = opened.stat.size;
    const slicer = new Slicer(signal);
    const start = Math.max(1, input.offset ?? 1);
    const end = start + (input.limit ?? DEFAULT_READ_LINES); // first line not returned
    const kept: Uint8Array[] = [];
    let keptBytes = 0;
    let cut = false;
    let line = 1; // the line the next byte belongs to
    let lineHasBytes = false;
    let countUntil = Infinity; // byte position where counting stops once the lines are read
    let position = 0;
    let complete = true;
    const buffer = new Uint8Array(CHUNK_BYTES);
    for (;;) {
      signal?.throwIfAborted();
      if (position >= countUntil) {
        complete = false;
        break;
      }
      if (position >= size) break;
      const want = Math.min(buffer.length, size - position);
      const { bytesRead } = await opened.file.read(buffer, 0, want, position);
      if (bytesRead === 0) break; // cut shorter since it was opened
      const chunk = buffer.subarray(0, bytesRead);
      let at = 0;
      while (at < chunk.length) {
        const newline = chunk.indexOf(NEWLINE, at);
        const stop = newline < 0 ? chunk.length : newline + 1;
        if (line >= start && line < end && !cut) {
          const piece = chunk.subarray(at, newline < 0 ? stop : newline);
          const separator = line > start && !lineHasBytes ? 1 : 0;
          if (keptBytes + piece.length + separator > limits.readBytes) {
            if (keptBytes === 0) {
              // A first line longer than the bound: as much of it as fits, whole characters.
              let room = limits.readBytes;
              while (room > 0 && (piece[room] & 0xc0) === 0x80) room--;
              kept.push(piece.slice(0, room));
              keptBytes = room;
            }
            cut = true;
            countUntil = Math.min(countUntil, position + at + READ_COUNT_BYTES);
          } else {
            if (separator) kept.push(new Uint8Array([NEWLINE]));
            if (piece.length) kept.push(piece.slice());
            keptBytes += piece.length + separator;
          }
        }
        lineHasBytes = newline < 0;
        if (newline >= 0) {
          line++;
          if (line === end && countUntil === Infinity) {
            countUntil = position + newline + 1 + READ_COUNT_BYTES;
          }
        }
        at = stop;
      }
      position += bytesRead;
      if (slicer.due()) await slicer.pause();
    }
    const totalLines = lineHasBytes ? line : line - 1;
    return {
      content: decode(kept),
      start_line: start,
      ...(complete ? { total_lines: totalLines } : {}),
      ...(cut || !complete || end - 1 < totalLines ? { truncated: true } : {}),
    };
  } finally {
    await opened.file.close();
  }
}

/**
 * `write`: replaces (or creates) a file, creating its directories. A symlink at the path is
 * followed inside the workdir (its target is replaced, the link stays); an existing FIFO, socket
 * or device is refused and left as it is.
 */
export async function writeTool(input: WriteInput, workdir: Workdir): Promise<WriteResult> {
  const bytes = new TextEncoder().encode(input.content);
  const written = await writeRegular(workdir, input.path, bytes);
  return {
    path: written.path,
    bytes_written: bytes.byteLength,
    ...(written.created ? { created: true } : {}),
  };
}

/** `edit`: replaces an exact string, which must occur once unless `replace_all`. */
export async function editTool(
  input: EditInput,
  workdir: Workdir,
  limits: FileLimits = DEFAULT_MACHINE_LIMITS,
): Promise<EditResult> {
  if (input.old_string === "") throw new FileToolError("old_string is empty");
  const opened = await workdir.openFile(input.path).catch((e) => toolError(e, input.path));
  let text: string;
  try {
    if (opened.stat.size > limits.editBytes) {
      throw new FileToolError(`file too large to edit (over ${limits.editBytes} bytes)`);
    }
    // Fatal: a byte that is not UTF-8 would be written back as U+FFFD, changing the file
    // outside the edit; the BOM is kept as U+FEFF and written back with the rest.
    const bytes = await readAll(opened.file, opened.stat.size);
    try {
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      throw new FileToolError(
        `${input.path} is not UTF-8 text: an edit would change its other bytes`,
      );
    }
  } finally {
    await opened.file.close();
  }
  const count = text.split(input.old_string).length - 1;
  if (count === 0) throw new FileToolError(`old_string not found in ${input.path}`);
  if (count > 1 && !input.replace_all) {
    throw new FileToolError(
      `old_string occurs ${count} times in ${input.path}; give more context or set replace_all`,
    );
  }
  const next = input.replace_all
    ? text.split(input.old_string).join(input.new_string)
    : text.replace(input.old_string, () => input.new_string);
  // Written where it was read (a link followed then is followed again, inside the root).
  const written = await writeRegular(workdir, input.path, new TextEncoder().encode(next));
  return { path: written.path, replacements: input.replace_all ? count : 1 };
}

/**
 * Replaces (or creates) the file at `path` with `bytes` through {@linkcode Workdir.writeFile},
 * unless what is there (a symlink followed inside the root) is neither a regular file nor a
 * directory: a FIFO, a socket or a device would be replaced by a regular file, taken from whoever
 * uses it. A directory is left to `writeFile`, which refuses it.
 */
async function writeRegular(
  workdir: Workdir,
  path: string,
  bytes: Uint8Array,
): Promise<{ path: string; created: boolean }> {
  const special = await isSpecial(workdir, path).catch((e) => toolError(e, path));
  if (special) throw new FileToolError(`not a regular file: ${path}`);
  return await workdir.writeFile(path, bytes).catch((e) => toolError(e, path));
}

/** Whether `path` names an existing FIFO, socket or device (a symlink followed inside). */
async function isSpecial(workdir: Workdir, path: string): Promise<boolean> {
  let located: { dir: ConfinedDir; name: string };
  try {
    located = await workdir.parentOf(path);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return false; // a directory on the way is missing
    throw error;
  }
  try {
    const stat = await located.dir.lstat(located.name);
    return stat !== undefined && !stat.isFile() && !stat.isDirectory() &&
      !stat.isSymbolicLink();
  } finally {
    await located.dir.close();
  }
}

/**
 * `glob`: files under `path` matching `pattern`, most recently modified first. Aborting `signal`
 * ends the walk.
 */
export async function globTool(
  input: GlobInput,
  workdir: Workdir,
  limits: FileLimits = DEFAULT_MACHINE_LIMITS,
  signal?: AbortSignal,
): Promise<GlobResult> {
  let matches: (path: string) => boolean;
  try {
    matches = compileGlob(input.pattern);
  } catch (error) {
    toolError(error, input.pattern);
  }
  const path = input.path ?? ".";
  const base = await workdir.openDirectory(path).catch((e) => toolError(e, path));
  const walk = new Walk(limits, signal);
  const found: { path: string; mtime: number }[] = [];
  try {
    // Only the part of the tree the pattern can match is walked.
    const prefix = globBase(input.pattern);
    const start = prefix === "" ? base : await descend(base, prefix);
    if (start) {
      try {
        for await (const file of walk.files(start, prefix)) {
          if (!matches(file.path)) continue;
          const stat = await file.dir.lstat(file.name).catch(() => undefined);
          found.push({ path: file.path, mtime: stat?.mtimeMs ?? 0 });
        }
      } finally {
        if (start !== base) await start.close();
      }
    }
  } finally {
    await base.close();
  }
  found.sort((a, b) => b.mtime - a.mtime || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return {
    files: found.slice(0, limits.globResults).map((f) => f.path),
    ...(found.length > limits.globResults || walk.exhausted ? { truncated: true } : {}),
  };
}

/**
 * `grep`: lines matching a regular expression, in file order. Paths are relative to the
 * searched directory (for a single file: relative to the workdir). Aborting `signal` ends the
 * search.
 */
export async function grepTool(
  input: GrepInput,
  workdir: Workdir,
  limits: FileLimits = DEFAULT_MACHINE_LIMITS,
  signal?: AbortSignal,
): Promise<GrepResult> {
  let regex: LineMatcher;
  let filter: ((path: string) => boolean) | undefined;
  try {
    regex = compileRegex(input.pattern, { caseInsensitive: input.case_insensitive });
    filter = input.glob ? compileGlob(input.glob) : undefined;
  } catch (error) {
    toolError(error, input.pattern);
  }
  const path = input.path ?? ".";
  const search = new Search(
    regex,
    Math.min(input.max_results ?? DEFAULT_GREP_RESULTS, limits.grepResults),
    limits,
    new Slicer(signal),
  );
  const target = await workdir.open(path).catch((e) => toolError(e, path));
  if (target.kind === "file") {
    try {
      // A file named alone is not skipped in silence: "no match" would be a false answer.
      if (target.stat.size > limits.grepFileBytes) {
        throw new FileToolError(
          `file too large to grep (over ${limits.grepFileBytes} bytes): ${path}`,
        );
      }
      const shown = await workdir.display(target.path);
      if (await search.file(target.file, target.stat.size, shown) === BINARY) {
        throw new FileToolError(
          `${path} is a binary file (a NUL byte in its first 8 KiB): not searched`,
        );
      }
    } finally {
      await target.file.close();
    }
  } else {
    const walk = new Walk(limits, signal);
    try {
      for await (const file of walk.files(target.dir, "")) {
        if (search.done) break;
        if (filter && !filter(file.path)) continue;
        let opened;
        try {
          opened = await file.dir.openFile(file.name);
        } catch {
          continue; // gone, swapped for a link, unreadable: not searched
        }
        try {
          await search.file(opened.file, opened.stat.size, file.path);
        } finally {
          await opened.file.close();
        }
      }
    } finally {
      await target.dir.close();
    }
    if (walk.exhausted) search.truncated = true;
  }
  return { matches: search.matches, ...(search.truncated ? { truncated: true } : {}) };
}

/** What {@linkcode Search.file} answers for a binary file. */
const BINARY = 1;

/** One grep's matches and budget. */
class Search {
  readonly matches: GrepResult["matches"] = [];
  truncated = false;
  done = false;
  readonly #regex: LineMatcher;
  readonly #max: number;
  readonly #limits: FileLimits;
  #bytesLeft: number;
  readonly #slicer: Slicer;

  constructor(regex: LineMatcher, max: number, limits: FileLimits, slicer: Slicer) {
    this.#regex = regex;
    this.#max = max;
    this.#limits = limits;
    this.#bytesLeft = limits.grepBytes;
    this.#slicer = slicer;
  }

  /**
   * Searches one open file, a chunk at a time; binary and oversized files are skipped (a binary
   * one answers {@linkcode BINARY}).
   */
  async file(file: FileHandle, size: number, path: string): Promise<typeof BINARY | undefined> {
    if (this.done || size > this.#limits.grepFileBytes) return;
    const decoder = new TextDecoder();
    const buffer = new Uint8Array(CHUNK_BYTES);
    let carry: string[] = []; // the current line's text before this chunk
    let line = 0;
    for (let position = 0;;) {
      const want = Math.min(buffer.length, this.#bytesLeft);
      if (want <= 0) {
        this.truncated = this.done = true;
        return;
      }
      const { bytesRead } = await file.read(buffer, 0, want, position);
      if (bytesRead === 0) break;
      const chunk = buffer.subarray(0, bytesRead);
      if (position === 0 && chunk.subarray(0, 8192).includes(0)) return BINARY;
      position += bytesRead;
      this.#bytesLeft -= bytesRead;
      const text = decoder.decode(chunk, { stream: true });
      let at = 0;
      for (;;) {
        const newline = text.indexOf("\n", at);
        if (newline < 0) {
          if (at < text.length) carry.push(text.slice(at));
          break;
        }
        const piece = text.slice(at, newline);
        const whole = carry.length ? carry.join("") + piece : piece;
        carry = [];
        at = newline + 1;
        if (this.#line(whole, ++line, path)) return;
        if (this.#slicer.due()) await this.#slicer.pause();
      }
    }
    const rest = carry.join("") + decoder.decode();
    if (rest !== "") this.#line(rest, ++line, path);
  }

  /** Tests one line; true once no more matches are wanted. */
  #line(text: string, line: number, path: string): boolean {
    const tested = text.length > this.#limits.grepLineChars
      ? text.slice(0, this.#limits.grepLineChars)
      : text;
    if (!this.#regex.test(tested)) return false;
    if (this.matches.length === this.#max) {
      this.truncated = this.done = true;
      return true;
    }
    const max = this.#limits.grepMatchChars;
    this.matches.push({
      path,
      line,
      text: text.length > max ? `${text.slice(0, max)}…` : text,
    });
    return false;
  }
}

/** A bounded walk over regular files; symlinks are neither followed nor listed. */
class Walk {
  exhausted = false;
  #entriesLeft: number;
  readonly #depth: number;
  readonly #slicer: Slicer;

  constructor(limits: FileLimits, signal?: AbortSignal) {
    this.#entriesLeft = limits.walkEntries;
    this.#depth = limits.walkDepth;
    this.#slicer = new Slicer(signal);
  }

  /**
   * The regular files below `dir` in name order, each with its open parent directory (valid
   * until the next file) and its path relative to the walk's start (`prefix` before it).
   */
  async *files(
    dir: ConfinedDir,
    prefix: string,
    depth = 0,
  ): AsyncGenerator<{ dir: ConfinedDir; name: string; path: string }> {
    const names: { name: string; directory: boolean }[] = [];
    try {
      for await (const entry of dir.entries()) {
        if (--this.#entriesLeft < 0) {
          this.exhausted = true;
          break;
        }
        if (entry.kind === "file") names.push({ name: entry.name, directory: false });
        else if (entry.kind === "directory" && !SKIPPED_DIRECTORIES.has(entry.name)) {
          names.push({ name: entry.name, directory: true });
        }
        if (this.#slicer.due()) await this.#slicer.pause();
      }
    } catch (error) {
      if (depth === 0) throw error;
      return; // a directory that vanished or cannot be read is skipped
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const { name, directory } of names) {
      const path = prefix === "" ? name : `${prefix}/${name}`;
      if (!directory) {
        yield { dir, name, path };
        continue;
      }
      if (depth + 1 > this.#depth) {
        this.exhausted = true;
        continue;
      }
      let child: ConfinedDir;
      try {
        child = await dir.openDirectory(name); // a directory swapped for a link is refused
      } catch {
        continue;
      }
      try {
        yield* this.files(child, path, depth + 1);
      } finally {
        await child.close();
      }
      if (this.#entriesLeft < 0) return;
    }
  }
}

/** Opens the directory `relative` (no links followed) below `dir`, or undefined. */
async function descend(dir: ConfinedDir, relative: string): Promise<ConfinedDir | undefined> {
  let current = dir;
  for (const name of relative.split("/")) {
    if (name === "" || name === ".") continue;
    let next: ConfinedDir;
    try {
      if (name === "..") throw new Error("..");
      next = await current.openDirectory(name);
    } catch {
      if (current !== dir) await current.close();
      return undefined;
    }
    if (current !== dir) await current.close();
    current = next;
  }
  return current;
}

async function readAll(file: FileHandle, size: number): Promise<Uint8Array> {
  const bytes = new Uint8Array(size);
  let at = 0;
  while (at < size) {
    const { bytesRead } = await file.read(bytes, at, size - at, at);
    if (bytesRead === 0) break;
    at += bytesRead;
  }
  return at === size ? bytes : bytes.subarray(0, at);
}

function decode(parts: Uint8Array[]): string {
  const decoder = new TextDecoder();
  let out = "";
  for (const part of parts) out += decoder.decode(part, { stream: true });
  return out + decoder.decode();
}
