/**
 * `skill.install`: a skill directory (`SKILL.md` at its root) from inline files or a verified
 * tar.gz, installed under the skills root and replaced atomically.
 *
 * Layout: `<skills root>/<name>` is a symlink to `.versions/<name>@<random>`. An install builds
 * the new version beside the old one, then renames a new link over the name (one `rename(2)`:
 * the name always resolves, to the old skill or the new one). A replaced version stays for
 * `skillRetainMs` after it was replaced (a reader that resolved the old link just before the
 * rename, or is reading its files, still finds them), and the one just replaced always until
 * the next install; an install removes the older ones. A directory left at the name by an older
 * executor is moved aside first (that one time the name is missing for the span of two renames).
 *
 * Everything is confined: the skills root is reached through {@linkcode Workdir} when it lies in
 * the workdir (a skills root that is a link out of it is refused), and every file of the skill
 * is written below the version directory through {@linkcode ConfinedDir} without following any
 * link. Archive members that are absolute, climb with `..`, or are links pointing out of the
 * skill are refused (-32001 `path_outside_workdir`); an archive's links are made after its
 * files, so no member is ever written through one. A URL source is fetched with a size limit and
 * a timeout, hashed while it streams to a temporary file, and unpacked only once its SHA-256
 * matches.
 *
 * A `signal` (the session's end, the request's cancel) stops an install wherever it is: the
 * fetch, the unpacking between chunks and entries, before the new version replaces the old; the
 * install answers its reason and leaves nothing behind, as any refused one.
 */
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { isAbsolute, relative, resolve } from "node:path";
import { Buffer } from "node:buffer";
import { createTarDecoder } from "modern-tar";
import type { FileHandle } from "node:fs/promises";
import type {
  SkillFile,
  SkillInstallParams,
  SkillInstallResult,
} from "../../protocol/generated/contract.ts";
import {
  ConflictError,
  ForbiddenError,
  InvalidParamsError,
  UnavailableError,
} from "../../protocol/generated/errors.ts";
import { READ_FLAGS } from "./confined-dir.node.ts";
import { gunzip } from "./gzip.node.ts";
import { DEFAULT_MACHINE_LIMITS, type SkillLimits } from "./limits.ts";
import {
  type ConfinedDir,
  errorCode,
  PathOutsideWorkdirError,
  Workdir,
  writeIn,
} from "./workdir.node.ts";

/** Options of {@linkcode installSkill}. */
export interface InstallSkillOptions {
  /** The session's workdir: a skills root inside it is confined to it. */
  workdir?: Workdir;
  limits?: SkillLimits;
  /** Stops the install (answered with its reason) until the new version is in place. */
  signal?: AbortSignal;
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const VERSIONS = ".versions";

/** Installs serialized per skill directory, so that each removes only the version it replaced. */
const installing = new Map<string, Promise<unknown>>();

/** `skill.install`: into `<skillsRoot>/<name>`, replacing an older install atomically. */
export async function installSkill(
  params: SkillInstallParams,
  skillsRoot: string,
  fetchFn: typeof fetch = fetch,
  options: InstallSkillOptions = {},
): Promise<SkillInstallResult> {
  if (!NAME.test(params.name)) throw invalid("invalid skill name", "/name");
  const limits = options.limits ?? DEFAULT_MACHINE_LIMITS;
  const signal = options.signal;
  signal?.throwIfAborted();
  const root = await openSkillsRoot(skillsRoot, options.workdir);
  const key = `${root.path}/${params.name}`;
  const before = installing.get(key) ?? Promise.resolve();
  const run = before.catch(() => {}).then(() => {
    // Stopped while it waited for the install before it: it never starts.
    signal?.throwIfAborted();
    return install(params, root, fetchFn, limits, signal);
  });
  installing.set(key, run);
  try {
    return await run;
  } finally {
    if (installing.get(key) === run) installing.delete(key);
    await root.close();
  }
}

async function install(
  params: SkillInstallParams,
  root: ConfinedDir,
  fetchFn: typeof fetch,
  limits: SkillLimits,
  signal: AbortSignal | undefined,
): Promise<SkillInstallResult> {
  const versions = await root.ensureDirectory(VERSIONS).catch(confinedError);
  try {
    const staging = await versions.createTempDirectory(`${params.name}@`);
    let installed = false;
    try {
      await staging.dir.close(); // reopened by the writer below
      const writer = new SkillWriter(versions, staging.name, limits, signal);
      try {
        const source = params.source;
        if (source.type === "files") {
          for (const file of source.files) await writer.file(file);
        } else {
          const fetching = { fetchFn, limits, signal };
          await fetchAndUnpack(source.url, source.sha256, versions, writer, fetching);
        }
        await writer.finish();
      } finally {
        await writer.close();
      }
      // The last moment to stop: past the rename the new version is installed.
      signal?.throwIfAborted();
      const previous = await flip(root, params.name, `${VERSIONS}/${staging.name}`);
      installed = true;
      if (previous !== undefined) await markReplaced(versions, previous);
      await removeVersions(versions, params.name, [staging.name, previous], limits.skillRetainMs);
      return { name: params.name, path: root.pathOf(params.name), files: writer.files };
    } finally {
      if (!installed) await versions.removeTree(staging.name).catch(() => {});
    }
  } finally {
    await versions.close();
  }
}

/**
 * Points `name` in `root` at `target` by renaming a new link over it; answers the version
 * directory (below `.versions`) the name pointed at before.
 */
async function flip(root: ConfinedDir, name: string, target: string): Promise<string | undefined> {
  let previous: string | undefined;
  const existing = await root.lstat(name);
  if (existing?.isSymbolicLink()) {
    const old = await root.readlink(name).catch(() => "");
    const version = old.startsWith(`${VERSIONS}/`) ? old.slice(VERSIONS.length + 1) : "";
    if (version !== "" && !version.includes("/") && version !== "..") previous = version;
  }
  const link = `.${name}.link-${randomSuffix()}`;
  await root.symlink(target, link);
  try {
    if (existing && !existing.isSymbolicLink()) {
      // Installed by an older executor as a plain directory (or made by hand): moved aside
      // into .versions, kept as the previous version.
      previous = `${name}@replaced-${randomSuffix()}`;
      const versions = await root.openDirectory(VERSIONS);
      try {
        await root.rename(name, previous, versions);
      } finally {
        await versions.close();
      }
    }
    await root.rename(link, name);
  } catch (error) {
    await root.unlink(link).catch(() => {});
    throw error;
  }
  return previous;
}

/** Stamps the version just replaced with the time it was (its modification time). */
async function markReplaced(versions: ConfinedDir, version: string): Promise<void> {
  try {
    const dir = await versions.openDirectory(version);
    try {
      await dir.touch();
    } finally {
      await dir.close();
    }
  } catch {
    // Gone already: nothing to keep.
  }
}

/**
 * Removes the versions of `name` below `versions` (`<name>@...`: `@` is in no skill name, so
 * another skill's versions never match) replaced more than `retainMs` ago, except `keep`.
 */
async function removeVersions(
  versions: ConfinedDir,
  name: string,
  keep: (string | undefined)[],
  retainMs: number,
): Promise<void> {
  const stale: string[] = [];
  for await (const entry of versions.entries()) {
    if (!entry.name.startsWith(`${name}@`) || keep.includes(entry.name)) continue;
    const stat = await versions.lstat(entry.name).catch(() => undefined);
    if (stat && stat.mtimeMs + retainMs <= Date.now()) stale.push(entry.name);
  }
  for (const version of stale) await versions.removeTree(version).catch(() => {});
}

/** Opens the skills root, confined to the workdir when it lies inside it. */
async function openSkillsRoot(skillsRoot: string, workdir?: Workdir): Promise<ConfinedDir> {
  const absolute = resolve(skillsRoot);
  if (workdir) {
    const real = await workdir.realRoot();
    const below = [workdir.root, real]
      .map((base) => relative(base, absolute))
      .find((rel) => !rel.startsWith("..") && !isAbsolute(rel));
    if (below !== undefined) {
      return await workdir.openDirectory(below === "" ? "." : below, { create: true })
        .catch(confinedError);
    }
  }
  // A skills root the operator put elsewhere is trusted as configured; below it the same
  // rule holds.
  await mkdir(absolute, { recursive: true });
  return await new Workdir(absolute).openRoot();
}

/** The most links one path may pass through (Linux's own bound on a lookup). */
const MAX_LINK_HOPS = 40;

/**
 * Whether the link at `link` (parts relative to the skill), followed as the system would —
 * through the archive's links `targets` (by path) wherever a step names one — leaves the skill,
 * or passes through more than {@linkcode MAX_LINK_HOPS} links (a loop).
 */
function followedOut(link: string[], targets: ReadonlyMap<string, string>): boolean {
  let hops = 0;
  /** The skill-relative parts `target` leads to from directory `from`; undefined once out. */
  const walk = (from: string[], target: string): string[] | undefined => {
    if (isAbsolute(target)) return undefined;
    const at = [...from];
    for (const part of target.split("/")) {
      if (part === "" || part === ".") continue;
      if (part === "..") {
        if (at.length === 0) return undefined;
        at.pop();
        continue;
      }
      at.push(part);
      const next = targets.get(at.join("/"));
      if (next === undefined) continue;
      if (++hops > MAX_LINK_HOPS) return undefined;
      const resolved = walk(at.slice(0, -1), next);
      if (resolved === undefined) return undefined;
      at.splice(0, at.length, ...resolved);
    }
    return at;
  };
  return walk(link.slice(0, -1), targets.get(link.join("/"))!) === undefined;
}

/**
 * Writes a skill's entries below `versions/<name>`: regular files and directories as they
 * come, links at the end (so nothing is written through one), every path checked to stay in.
 */
class SkillWriter {
  files = 0;
  readonly #versions: ConfinedDir;
  readonly #name: string;
  readonly #limits: SkillLimits;
  readonly #signal: AbortSignal | undefined;
  #dir: ConfinedDir | undefined;
  #entries = 0;
  #bytes = 0;
  readonly #links: { path: string[]; target: string }[] = [];
  readonly #written = new Set<string>();

  constructor(versions: ConfinedDir, name: string, limits: SkillLimits, signal?: AbortSignal) {
    this.#versions = versions;
    this.#name = name;
    this.#limits = limits;
    this.#signal = signal;
  }

  /** One inline file of a `files` source. */
  async file(file: SkillFile): Promise<void> {
    const bytes = file.encoding === "base64"
      ? new Uint8Array(Buffer.from(file.content, "base64"))
      : new TextEncoder().encode(file.content);
    await this.regular(file.path, bytes, file.mode);
  }

  /** A regular file at `path` (relative to the skill) with `body`. */
  async regular(
    path: string,
    body: Uint8Array | ReadableStream<Uint8Array>,
    mode?: number,
  ): Promise<void> {
    const parts = this.#parts(path);
    if (parts.length === 0) throw invalid(`not a file path: ${path}`, "/source");
    this.#count();
    const dir = await this.#directory(parts.slice(0, -1));
    const name = parts.at(-1)!;
    try {
      await writeIn(dir, name, async (handle) => {
        let position = 0;
        const write = async (chunk: Uint8Array) => {
          this.#signal?.throwIfAborted();
          this.#bytes += chunk.length;
          if (this.#bytes > this.#limits.skillBytes) {
            throw invalid(`skill larger than ${this.#limits.skillBytes} bytes`, "/source");
          }
          for (let at = 0; at < chunk.length;) {
            const { bytesWritten } = await handle.write(chunk, at, chunk.length - at, position);
            at += bytesWritten;
            position += bytesWritten;
          }
        };
        if (body instanceof Uint8Array) await write(body);
        else for await (const chunk of body) await write(chunk);
        await handle.chmod((mode ?? 0o644) & 0o777);
      });
    } catch (error) {
      if (errorCode(error) === "EISDIR") throw invalid(`a directory is at ${path}`, "/source");
      throw error;
    } finally {
      if (dir !== this.#dir) await dir.close();
    }
    const key = parts.join("/");
    if (!this.#written.has(key)) {
      this.#written.add(key);
      this.files++;
    }
  }

  /** A directory at `path`. */
  async directory(path: string): Promise<void> {
    const parts = this.#parts(path);
    this.#count();
    if (parts.length === 0) return;
    const dir = await this.#directory(parts);
    if (dir !== this.#dir) await dir.close();
  }

  /** A symlink at `path` to `target`, which must resolve inside the skill; made at the end. */
  link(path: string, target: string): void {
    const parts = this.#parts(path);
    this.#count();
    if (parts.length === 0 || isAbsolute(target) || target.includes("\0")) {
      throw outside();
    }
    let depth = parts.length - 1;
    for (const part of target.split("/")) {
      if (part === "..") depth--;
      else if (part !== "" && part !== ".") depth++;
      if (depth < 0) throw outside();
    }
    this.#links.push({ path: parts, target });
  }

  /** Makes the links and checks that `SKILL.md` is a regular file at the root. */
  async finish(): Promise<void> {
    // Each target was checked alone; followed through the archive's other links (a link to
    // `../` deep down, then `..` after it) one may still leave the skill.
    const targets = new Map(this.#links.map(({ path, target }) => [path.join("/"), target]));
    for (const { path } of this.#links) {
      if (followedOut(path, targets)) throw outside();
    }
    for (const { path, target } of this.#links) {
      const dir = await this.#directory(path.slice(0, -1));
      try {
        await dir.symlink(target, path.at(-1)!);
      } catch (error) {
        if (errorCode(error) === "EEXIST") {
          throw invalid(`two entries at ${path.join("/")}`, "/source");
        }
        throw error;
      } finally {
        if (dir !== this.#dir) await dir.close();
      }
    }
    const root = await this.#root();
    const manifest = await root.lstat("SKILL.md");
    if (!manifest?.isFile()) throw invalid("SKILL.md missing at the skill's root", "/source");
  }

  async close(): Promise<void> {
    await this.#dir?.close();
  }

  #count(): void {
    this.#signal?.throwIfAborted();
    if (++this.#entries > this.#limits.skillEntries) {
      throw invalid(`more than ${this.#limits.skillEntries} entries`, "/source");
    }
  }

  /** The components of a member path; absolute paths and `..` are outside the skill. */
  #parts(path: string): string[] {
    if (isAbsolute(path) || path.includes("\0") || path.includes("\\")) throw outside();
    const parts = path.split("/").filter((part) => part !== "" && part !== ".");
    if (parts.includes("..")) throw outside();
    return parts;
  }

  async #root(): Promise<ConfinedDir> {
    return this.#dir ??= await this.#versions.openDirectory(this.#name);
  }

  /** The directory `parts` below the skill, made as needed, never through a link. */
  async #directory(parts: string[]): Promise<ConfinedDir> {
    let dir = await this.#root();
    for (const part of parts) {
      let next: ConfinedDir;
      try {
        next = await dir.ensureDirectory(part);
      } catch (error) {
        if (dir !== this.#dir) await dir.close();
        const code = errorCode(error);
        if (code === "ENOTDIR" || code === "ELOOP") {
          throw invalid(`a file is where a directory should be: ${parts.join("/")}`, "/source");
        }
        throw error;
      }
      if (dir !== this.#dir) await dir.close();
      dir = next;
    }
    return dir;
  }
}

/** How {@linkcode fetchAndUnpack} fetches, within which limits, until `signal` stops it. */
interface Fetching {
  readonly fetchFn: typeof fetch;
  readonly limits: SkillLimits;
  readonly signal: AbortSignal | undefined;
}

/**
 * Fetches `url` into a temporary file below `spool` (bounded by size and time, hashed as it
 * streams), checks its SHA-256, then unpacks it through `writer`.
 */
async function fetchAndUnpack(
  url: string,
  sha256: string,
  spool: ConfinedDir,
  writer: SkillWriter,
  { fetchFn, limits, signal: stop }: Fetching,
): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid("invalid skill URL", "/source/url");
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw invalid("skill URLs are http or https", "/source/url");
  }
  const timeout = AbortSignal.timeout(limits.skillFetchMs);
  const signal = stop ? AbortSignal.any([timeout, stop]) : timeout;
  // A fetch stopped by `stop` answers its reason; any other failure is the server's.
  const unavailable = () =>
    stop?.aborted ? stop.reason : new UnavailableError("skill archive could not be fetched", {
      reason: "backend_unavailable",
    });
  let response: Response;
  try {
    response = await fetchFn(parsed, { signal, redirect: "follow" });
  } catch {
    throw unavailable();
  }
  const tooLarge = () =>
    invalid(`archive larger than ${limits.skillArchiveBytes} bytes`, "/source");
  if (!response.ok || !response.body) {
    await response.body?.cancel().catch(() => {});
    throw unavailable();
  }
  const declared = Number(response.headers.get("content-length") ?? NaN);
  if (declared > limits.skillArchiveBytes) {
    await response.body.cancel().catch(() => {});
    throw tooLarge();
  }
  const temp = await spool.createTemp(".archive-");
  try {
    const hash = createHash("sha256");
    let size = 0;
    try {
      // A failed read is the timeout, or the connection dropped.
      for await (const chunk of chunksOf(response.body.getReader(), unavailable)) {
        size += chunk.length;
        if (size > limits.skillArchiveBytes) throw tooLarge();
        hash.update(chunk);
        for (let at = 0; at < chunk.length;) {
          const { bytesWritten } = await temp.file.write(chunk, at);
          at += bytesWritten;
        }
      }
    } finally {
      await temp.file.close();
    }
    if (hash.digest("hex") !== sha256) {
      throw new ConflictError("sha256 mismatch", { reason: "sha256_mismatch" });
    }
    stop?.throwIfAborted();
    const { file } = await spool.openFile(temp.name, READ_FLAGS);
    try {
      await unpack(fileStream(file), writer, limits, stop);
    } finally {
      await file.close();
    }
  } finally {
    await spool.unlink(temp.name).catch(() => {});
  }
}

/** Unpacks a tar.gz stream through `writer`, within `limits`, until `signal` stops it. */
async function unpack(
  archive: ReadableStream<Uint8Array>,
  writer: SkillWriter,
  limits: SkillLimits,
  signal: AbortSignal | undefined,
): Promise<void> {
  const decoder = createTarDecoder({ strict: true });
  const bad = () => invalid("not a tar.gz archive", "/source");
  // What the archive may unpack to: the skill's bytes, and per entry its header, padding and
  // extended header. A small archive could otherwise inflate without end (GiBs of zeros after
  // its last entry, which count toward no entry).
  const most = limits.skillBytes + limits.skillEntries * TAR_BYTES_PER_ENTRY + TAR_END_BYTES;
  let unpacked = 0;
  let overflow: Error | undefined;
  const bounded = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      // Between chunks of the gunzip: an archive's tail that counts toward no entry is stopped
      // here too, not only between entries.
      if (signal?.aborted) {
        controller.error(signal.reason);
        return;
      }
      unpacked += chunk.byteLength;
      if (unpacked > most) {
        overflow = invalid(`archive unpacks to more than ${most} bytes`, "/source");
        controller.error(overflow);
        return;
      }
      controller.enqueue(chunk);
    },
  });
  const piping = gunzip(archive).pipeThrough(bounded).pipeTo(decoder.writable).catch(() => {});
  try {
    // Leaving the loop cancels the entries, which stops the pipe above them too.
    for await (const { header, body } of chunksOf(decoder.readable.getReader(), bad)) {
      signal?.throwIfAborted();
      const type = header.type ?? "file";
      if (type === "file") {
        await writer.regular(header.name, body, header.mode);
        continue;
      }
      await body.cancel().catch(() => {});
      if (type === "directory") await writer.directory(header.name);
      else if (type === "symlink") writer.link(header.name, header.linkname ?? "");
      else if (type === "pax-global-header") continue;
      else throw invalid(`unsupported archive member (${type}): ${header.name}`, "/source");
    }
  } catch (error) {
    signal?.throwIfAborted();
    throw overflow ?? error;
  } finally {
    await piping;
  }
  signal?.throwIfAborted();
  if (overflow) throw overflow;
}

/** A tar entry's most bytes besides its body: header, padding, an extended (pax) header. */
const TAR_BYTES_PER_ENTRY = 4096;
/** The end of a tar archive: its zero blocks, padded to a record. */
const TAR_END_BYTES = 1024 * 1024;

/**
 * The chunks `reader` reads, a failed read thrown as `failure()`; leaving the loop early (a
 * break, a throw) cancels the reader, and the cancel is awaited.
 */
async function* chunksOf<T>(
  reader: ReadableStreamDefaultReader<T>,
  failure: () => unknown,
): AsyncGenerator<T, void, undefined> {
  try {
    for (;;) {
      let next: ReadableStreamReadResult<T>;
      try {
        next = await reader.read();
      } catch {
        throw failure();
      }
      if (next.done) return;
      yield next.value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

function fileStream(file: FileHandle): ReadableStream<Uint8Array> {
  let position = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const buffer = new Uint8Array(64 * 1024);
      const { bytesRead } = await file.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) controller.close();
      else {
        position += bytesRead;
        controller.enqueue(buffer.subarray(0, bytesRead));
      }
    },
  });
}

function confinedError(error: unknown): never {
  if (error instanceof PathOutsideWorkdirError) throw outside();
  throw error;
}

function outside(): ForbiddenError {
  return new ForbiddenError("path outside the skill directory", {
    reason: "path_outside_workdir",
  });
}

function invalid(message: string, field: string): InvalidParamsError {
  return new InvalidParamsError(message, { reason: "invalid_params", field });
}

function randomSuffix(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(6)),
    (b) => b.toString(16).padStart(2, "0"),
  )
    .join("");
}
