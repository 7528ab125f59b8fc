/**
 * `workspace.backup`: a tar.gz of the workdir (or a directory in it), PUT to a presigned URL.
 *
 * The archive is written by walking the tree through {@linkcode ConfinedDir} (no link is
 * followed: a symlink is archived as a link, a directory swapped for one is not entered), so it
 * obeys the same confinement as every other file access, needs no `tar` program, and an exclude
 * pattern is only ever a glob (matched by `patterns.ts`), never an option. It streams through
 * gzip into a private temporary file outside the workdir, hashed and counted as it goes, and is
 * then uploaded from that file with its `Content-Length` (presigned PUT URLs refuse chunked
 * bodies): with backpressure all along (`gzip.node.ts`), memory stays constant whatever the
 * workspace's size. The URL and headers are
 * secrets: they appear in no error and no log.
 */
import { createHash } from "node:crypto";
import { once } from "node:events";
import { constants } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { type FileHandle, mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTarPacker, type TarPackController } from "modern-tar";
import type {
  WorkspaceBackupParams,
  WorkspaceBackupResult,
} from "../../protocol/generated/contract.ts";
import {
  ForbiddenError,
  InvalidParamsError,
  NotFoundError,
  UnavailableError,
} from "../../protocol/generated/errors.ts";
import { gzip } from "./gzip.node.ts";
import { type BackupLimits, DEFAULT_MACHINE_LIMITS } from "./limits.ts";
import { compileGlob, PatternError } from "./patterns.ts";
import {
  type ConfinedDir,
  errorCode,
  PathOutsideWorkdirError,
  type Workdir,
} from "./workdir.node.ts";

/** Deepest directory level archived (each level holds a descriptor open while it is walked). */
const MAX_DEPTH = 512;
const CHUNK_BYTES = 256 * 1024;

/** `workspace.backup`: a tar.gz of the workdir (or a path in it), PUT to `upload_url`. */
export async function backupWorkspace(
  params: WorkspaceBackupParams,
  workdir: Workdir,
  fetchFn: typeof fetch = fetch,
  limits: BackupLimits = DEFAULT_MACHINE_LIMITS,
  signal?: AbortSignal,
): Promise<WorkspaceBackupResult> {
  // A presigned URL is HTTP(S); another scheme would only fail as an upload (the URL is a
  // secret: never repeated).
  const scheme = URL.parse(params.upload_url)?.protocol;
  if (scheme !== "http:" && scheme !== "https:") {
    throw new InvalidParamsError("upload_url is not an http or https URL", {
      reason: "invalid_params",
      field: "/upload_url",
    });
  }
  const excludes = (params.exclude ?? []).map((pattern, i) => {
    try {
      return compileGlob(pattern);
    } catch (error) {
      if (!(error instanceof PatternError)) throw error;
      throw new InvalidParamsError(error.message, {
        reason: "invalid_params",
        field: `/exclude/${i}`,
      });
    }
  });
  const excluded = (path: string) => excludes.some((matches) => matches(path));
  const base = await workdir.openDirectory(params.path ?? ".").catch((error) => {
    if (error instanceof PathOutsideWorkdirError) {
      throw new ForbiddenError("path outside the workdir", { reason: "path_outside_workdir" });
    }
    if (errorCode(error) === "ENOENT" || errorCode(error) === "ENOTDIR") {
      throw new NotFoundError("no such directory", { reason: "file_not_found" });
    }
    throw error;
  });
  const spoolDir = await mkdtemp(join(limits.backupSpoolDir ?? tmpdir(), "bma-backup-"));
  try {
    const spoolPath = join(spoolDir, "workspace.tar.gz");
    const spool = await open(
      spoolPath,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
      0o600,
    );
    let archived: { size: number; sha256: string; files: number };
    try {
      archived = await writeArchive(base, excluded, spool, signal);
    } finally {
      await spool.close();
      await base.close();
    }
    const uploaded = await upload(
      params,
      spoolPath,
      archived.size,
      fetchFn,
      limits.backupUploadMs,
      signal,
    );
    // Stopped (the session ended): the reason, whatever the upload answered meanwhile.
    signal?.throwIfAborted();
    if (!uploaded) throw new UnavailableError("upload failed", { reason: "backend_unavailable" });
    return { format: "tar.gz", ...archived };
  } finally {
    await rm(spoolDir, { recursive: true, force: true });
  }
}

/** Streams the tree below `base` as tar.gz into `out`; answers its size, hash and file count. */
async function writeArchive(
  base: ConfinedDir,
  excluded: (path: string) => boolean,
  out: FileHandle,
  signal: AbortSignal | undefined,
): Promise<{ size: number; sha256: string; files: number }> {
  const { readable, controller } = createTarPacker();
  const hash = createHash("sha256");
  let size = 0;
  const sink = gzip(readable).pipeTo(
    new WritableStream<Uint8Array>({
      async write(chunk) {
        hash.update(chunk);
        size += chunk.length;
        for (let at = 0; at < chunk.length;) {
          const { bytesWritten } = await out.write(chunk, at);
          at += bytesWritten;
        }
      },
    }),
  );
  let files = 0;
  try {
    files = await addTree(controller, base, "", excluded, 0, signal);
    controller.finalize();
  } catch (error) {
    controller.error(error);
    await sink.catch(() => {});
    throw error;
  }
  await sink;
  return { size, sha256: hash.digest("hex"), files };
}

/** Adds the entries of `dir` (its path in the archive: `prefix`); answers the files added. */
async function addTree(
  pack: TarPackController,
  dir: ConfinedDir,
  prefix: string,
  excluded: (path: string) => boolean,
  depth: number,
  signal: AbortSignal | undefined,
): Promise<number> {
  if (depth > MAX_DEPTH) {
    throw new UnavailableError("directory tree too deep to archive", {
      reason: "backend_unavailable",
    });
  }
  const entries: { name: string; kind: string }[] = [];
  for await (const entry of dir.entries()) entries.push(entry);
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  let files = 0;
  for (const { name, kind } of entries) {
    signal?.throwIfAborted();
    const path = prefix === "" ? name : `${prefix}/${name}`;
    if (excluded(path)) continue;
    if (kind === "directory") {
      let child: ConfinedDir;
      try {
        child = await dir.openDirectory(name); // a link swapped in is refused, not entered
      } catch {
        continue;
      }
      try {
        const stat = await dir.lstat(name);
        await pack.add({
          name: `${path}/`,
          type: "directory",
          size: 0,
          mode: (stat?.mode ?? 0o755) & 0o7777,
          ...(stat ? { mtime: stat.mtime } : {}),
        }).close();
        files += await addTree(pack, child, path, excluded, depth + 1, signal);
      } finally {
        await child.close();
      }
    } else if (kind === "symlink") {
      const target = await dir.readlink(name).catch(() => undefined);
      if (target === undefined) continue;
      await pack.add({ name: path, type: "symlink", size: 0, linkname: target }).close();
      files++;
    } else if (kind === "file") {
      let opened;
      try {
        opened = await dir.openFile(name);
      } catch {
        continue; // gone, or swapped for a link: not archived
      }
      try {
        await addFile(pack, path, opened.file, opened.stat.size, opened.stat, signal);
        files++;
      } finally {
        await opened.file.close();
      }
    }
    // Sockets, FIFOs and devices are not archived.
  }
  return files;
}

/** Adds one regular file: exactly `size` bytes (zeros if it shrank while being read). */
async function addFile(
  pack: TarPackController,
  path: string,
  file: FileHandle,
  size: number,
  stat: { mode: number; mtime: Date },
  signal: AbortSignal | undefined,
): Promise<void> {
  const writer = pack.add({
    name: path,
    type: "file",
    size,
    mode: stat.mode & 0o7777,
    mtime: stat.mtime,
  }).getWriter();
  const buffer = new Uint8Array(CHUNK_BYTES);
  for (let position = 0; position < size;) {
    signal?.throwIfAborted();
    const want = Math.min(buffer.length, size - position);
    const { bytesRead } = await file.read(buffer, 0, want, position);
    const chunk = bytesRead === 0 ? new Uint8Array(want) : buffer.slice(0, bytesRead);
    await writer.write(chunk);
    position += chunk.length;
  }
  await writer.close();
}

/**
 * PUTs the file at `path` (`size` bytes) to the upload URL, streamed from disk with its
 * `Content-Length`; true on a 2xx answer. With the global fetch this goes through `node:http`:
 * the runtimes' fetch either reads a file body whole into memory (Node, Deno) or drops the
 * length of a streamed one (Deno). A fetch given in the options gets a streamed body with the
 * length set.
 */
async function upload(
  params: WorkspaceBackupParams,
  path: string,
  size: number,
  fetchFn: typeof fetch,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const headers: Record<string, string> = {
    "content-type": "application/gzip",
    ...params.headers,
    "content-length": String(size),
  };
  const file = await open(path, constants.O_RDONLY);
  try {
    if (fetchFn !== globalThis.fetch) {
      const response = await fetchFn(params.upload_url, {
        method: "PUT",
        headers,
        body: fileStream(file),
        duplex: "half",
        signal: signal
          ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)])
          : AbortSignal.timeout(timeoutMs),
      } as RequestInit).catch(() => undefined);
      await response?.body?.cancel().catch(() => {});
      return response?.ok ?? false;
    }
    return await put(params.upload_url, headers, file, timeoutMs, signal);
  } catch {
    return false; // the reason may name the URL: it stays here
  } finally {
    await file.close();
  }
}

/** A PUT through `node:http(s)`, written as fast as the socket drains, within `timeoutMs`. */
async function put(
  url: string,
  headers: Record<string, string>,
  file: FileHandle,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const target = new URL(url);
  if (target.protocol !== "http:" && target.protocol !== "https:") return false;
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  const request = send(target, { method: "PUT", headers });
  const timer = setTimeout(() => request.destroy(new Error("upload timed out")), timeoutMs);
  const stop = () => request.destroy(new Error("upload stopped"));
  if (signal?.aborted) stop();
  else signal?.addEventListener("abort", stop, { once: true });
  let status: number | undefined;
  const answered = new Promise<void>((resolve, reject) => {
    request.once("response", (response) => {
      status = response.statusCode ?? 0;
      response.resume(); // the body is of no interest
      resolve();
    });
    request.once("error", reject);
    request.once("close", () => resolve());
  });
  answered.catch(() => {}); // awaited below, unless reading the file failed first
  try {
    const buffer = new Uint8Array(CHUNK_BYTES);
    for (let position = 0; status === undefined && !request.destroyed;) {
      const { bytesRead } = await file.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      if (!request.write(buffer.slice(0, bytesRead))) {
        await Promise.race([once(request, "drain"), answered]);
      }
    }
    request.end();
    await answered;
    return status !== undefined && status >= 200 && status < 300;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", stop);
    request.destroy();
  }
}

function fileStream(file: FileHandle): ReadableStream<Uint8Array> {
  let position = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const buffer = new Uint8Array(CHUNK_BYTES);
      const { bytesRead } = await file.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) controller.close();
      else {
        position += bytesRead;
        controller.enqueue(buffer.subarray(0, bytesRead));
      }
    },
  }, { highWaterMark: 0 });
}
