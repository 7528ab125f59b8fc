/**
 * File transfer (`file.upload` / `file.download`): base64 chunks addressed by offset, confined
 * to the workdir by {@linkcode Workdir}, in constant memory per chunk whatever the file's size.
 *
 * Every answer carries the SHA-256 of the whole file. It is computed by streaming reads and
 * remembered per file version (device, inode, size, modification time) in a
 * {@linkcode FileHashes}: the chunks of one download hash the file once, and an upload's next
 * chunk continues the hash of the bytes before it instead of reading them again.
 */
import { Buffer } from "node:buffer";
import { createHash, type Hash } from "node:crypto";
import type { BigIntStats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import type {
  FileDownloadParams,
  FileDownloadResult,
  FileUploadParams,
  FileUploadResult,
} from "../../protocol/generated/contract.ts";
import {
  ConflictError,
  ForbiddenError,
  InvalidParamsError,
  NotFoundError,
} from "../../protocol/generated/errors.ts";
import { type ConfinedDir, FsError, WRITE_FLAGS } from "./confined-dir.node.ts";
import { DEFAULT_MACHINE_LIMITS, type FileTransferLimits } from "./limits.ts";
import {
  createTemporary,
  forgetRecord,
  PendingUploads,
  removeDropped,
  removeTemporary,
  sweepLeftovers,
} from "./pending-uploads.node.ts";
import { errorCode, PathOutsideWorkdirError, type Workdir, writeIn } from "./workdir.node.ts";

const HASH_CHUNK_BYTES = 1024 * 1024;
/** File versions whose hash is remembered, per workdir. */
const REMEMBERED_HASHES = 64;

/**
 * Maps what a capability request's path resolution can fail with to the contract's errors:
 * outside the workdir is -32001 `path_outside_workdir`, a missing file -32002 `file_not_found`.
 */
export function transferError(error: unknown): never {
  if (error instanceof PathOutsideWorkdirError) {
    throw new ForbiddenError("path outside the workdir", { reason: "path_outside_workdir" });
  }
  switch (errorCode(error)) {
    case "ENOENT":
    case "ENOTDIR":
      throw new NotFoundError("no such file", { reason: "file_not_found" });
    case "EISDIR":
    case "EINVAL":
      throw new NotFoundError("not a regular file", { reason: "file_not_found" });
    case "ENAMETOOLONG":
      throw new InvalidParamsError("path too long", { reason: "invalid_params", field: "/path" });
  }
  throw error;
}

/** SHA-256 states of recently seen file versions (see the module comment). */
export class FileHashes {
  readonly #states = new Map<string, Hash>();
  readonly #pending = new Map<string, Promise<Hash>>();

  /**
   * The hash state after all of `file` (whose status is `stat`), read only when unknown. A
   * caller joins a hash another is computing of the same version; `signal` stops the wait, and
   * the reading when this caller is the one reading (it reads through its own `file`, which it
   * may close once this settles). A joiner whose reader stopped reads the file itself.
   */
  async of(file: FileHandle, stat: BigIntStats, signal?: AbortSignal): Promise<Hash> {
    const key = versionKey(stat);
    for (;;) {
      const known = this.#take(key);
      if (known) return known;
      signal?.throwIfAborted();
      const pending = this.#pending.get(key);
      if (pending) {
        try {
          return (await abortable(pending, signal)).copy();
        } catch (error) {
          if (signal?.aborted) throw error;
          continue; // its reader stopped: read it here
        }
      }
      const reading = hashPrefix(file, Number(stat.size), signal);
      this.#pending.set(key, reading);
      try {
        const state = await reading;
        this.remember(stat, state);
        return state.copy();
      } finally {
        if (this.#pending.get(key) === reading) this.#pending.delete(key);
      }
    }
  }

  /** The state for the version `stat`, if remembered (a copy: the caller may extend it). */
  peek(stat: BigIntStats): Hash | undefined {
    return this.#take(versionKey(stat));
  }

  /** Remembers `state` as the hash of the file version `stat`. */
  remember(stat: BigIntStats, state: Hash): void {
    const key = versionKey(stat);
    this.#states.delete(key);
    this.#states.set(key, state.copy());
    while (this.#states.size > REMEMBERED_HASHES) {
      this.#states.delete(this.#states.keys().next().value!);
    }
  }

  #take(key: string): Hash | undefined {
    const state = this.#states.get(key);
    if (!state) return undefined;
    this.#states.delete(key); // most recently used last
    this.#states.set(key, state);
    return state.copy();
  }
}

/** One {@linkcode FileHashes} per workdir, made on first use. */
const hashesByWorkdir = new WeakMap<Workdir, FileHashes>();
function hashesOf(workdir: Workdir): FileHashes {
  let hashes = hashesByWorkdir.get(workdir);
  if (!hashes) hashesByWorkdir.set(workdir, hashes = new FileHashes());
  return hashes;
}

/** Options of {@linkcode uploadFile}. */
export interface UploadFileOptions {
  /** The uploads in progress of `workdir` (one registry per workdir, shared by its sessions). */
  uploads: PendingUploads;
  /** Told of a failed sweep for leftover temporaries (which never fails an upload). */
  onSweepError?: (error: unknown) => void;
}

/**
 * `file.upload`. A chunk at offset 0 without `upload_id` is a whole file: written to a private
 * temporary and renamed over the name once its hash is checked. Chunks with an `upload_id` build
 * a private temporary that their last chunk renames (see `pending-uploads.node.ts`), one per
 * session, upload id and path. A later chunk without one is appended in place, as the contract
 * has always allowed.
 */
export async function uploadFile(
  params: FileUploadParams,
  workdir: Workdir,
  options: UploadFileOptions,
): Promise<FileUploadResult> {
  const bytes = decodeBase64(params.content);
  const uploads = options.uploads;
  await removeDropped(workdir, uploads.takeIdle());
  await sweepUploads(workdir, uploads, options.onSweepError);
  const { dir, name } = await workdir.parentOf(params.path, { create: true })
    .catch(transferError);
  try {
    if (params.upload_id !== undefined) {
      const key = PendingUploads.key(params.session_id, params.upload_id, params.path);
      return await uploads.serialized(
        key,
        () => uploadChunk(params, bytes, { workdir, uploads, key }, dir, name),
      );
    }
    if ((params.offset ?? 0) === 0) return await uploadWhole(params, bytes, workdir, dir, name);
    return await appendInPlace(params, bytes, workdir, dir, name);
  } finally {
    await dir.close();
  }
}

/** A whole file in one chunk: nothing at the name changes unless it is whole and checked. */
async function uploadWhole(
  params: FileUploadParams,
  bytes: Uint8Array,
  workdir: Workdir,
  dir: ConfinedDir,
  name: string,
): Promise<FileUploadResult> {
  const state = createHash("sha256").update(bytes);
  const sha256 = state.copy().digest("hex");
  if (params.sha256 !== undefined && params.sha256 !== sha256) throw sha256Mismatch();
  let after: BigIntStats | undefined;
  // A new version in a temporary file renamed over the name: no link at the name is followed,
  // and readers never see a half-written file.
  await writeIn(dir, name, async (file) => {
    await writeAll(file, bytes, 0);
    after = await file.stat({ bigint: true });
  }, permissionsOf(params.mode)).catch(transferError);
  hashesOf(workdir).remember(after!, state);
  return { path: dir.pathOf(name), size: Number(after!.size), sha256 };
}

/**
 * Removes what executors gone before left of their uploads, when due (see
 * `pending-uploads.node.ts`): when an executor starts serving `workdir`, and at most every 15
 * minutes when it takes an upload.
 */
export function sweepUploads(
  workdir: Workdir,
  uploads: PendingUploads,
  onError: (error: unknown) => void = () => {},
): Promise<void> {
  return uploads.sweepIfDue(() => sweepLeftovers(workdir, uploads), onError);
}

/** Where a chunk of an `upload_id` goes: the workdir, its uploads, and the upload's key. */
interface ChunkTarget {
  readonly workdir: Workdir;
  readonly uploads: PendingUploads;
  readonly key: string;
}

/** A chunk of the upload `params.upload_id`, in its private temporary (renamed by the last). */
async function uploadChunk(
  params: FileUploadParams,
  bytes: Uint8Array,
  { workdir, uploads, key }: ChunkTarget,
  dir: ConfinedDir,
  name: string,
): Promise<FileUploadResult> {
  const offset = params.offset ?? 0;
  let upload = uploads.get(key);
  if (offset === 0) {
    // The upload starts (again): an earlier start of it is dropped.
    if (upload) {
      uploads.delete(key);
      await removeTemporary(workdir, dir, upload);
    }
    const existing = await dir.lstat(name).catch(transferError);
    if (existing?.isDirectory()) transferError(new FsError("EISDIR", "is a directory"));
    const temp = await createTemporary(workdir, dir).catch(transferError);
    try {
      await writeAll(temp.file, bytes, 0);
      const stat = await temp.file.stat();
      upload = {
        sessionId: params.session_id,
        path: params.path,
        temp: temp.name,
        ref: temp.ref,
        dev: stat.dev,
        ino: stat.ino,
        size: bytes.byteLength,
        state: createHash("sha256").update(bytes),
        touchedAt: 0,
      };
    } catch (error) {
      await dir.unlink(temp.name).catch(() => {});
      if (temp.ref !== undefined) await forgetRecord(workdir, { ref: temp.ref });
      throw error;
    } finally {
      await temp.file.close();
    }
  } else {
    if (!upload) throw offsetMismatch(0);
    if (upload.size !== offset) throw offsetMismatch(upload.size);
    const opened = await dir.openFile(upload.temp, WRITE_FLAGS).catch(() => undefined);
    try {
      // Its temporary is gone or is another file now: the upload starts again from 0.
      if (
        !opened || opened.stat.dev !== upload.dev || opened.stat.ino !== upload.ino ||
        opened.stat.size !== upload.size
      ) {
        uploads.delete(key);
        await removeTemporary(workdir, dir, upload);
        throw offsetMismatch(0);
      }
      await writeAll(opened.file, bytes, offset);
      upload.state.update(bytes);
      upload.size += bytes.byteLength;
    } finally {
      await opened?.file.close();
    }
  }
  const sha256 = upload.state.copy().digest("hex");
  if (params.sha256 === undefined) {
    await removeDropped(workdir, uploads.set(key, upload));
    return { path: dir.pathOf(name), size: upload.size, sha256 };
  }
  // The last chunk: the file lands whole, or only this upload's temporary goes.
  uploads.delete(key);
  try {
    if (params.sha256 !== sha256) throw sha256Mismatch();
    const opened = await dir.openFile(upload.temp, WRITE_FLAGS);
    let after: BigIntStats;
    try {
      if (opened.stat.dev !== upload.dev || opened.stat.ino !== upload.ino) {
        throw offsetMismatch(0);
      }
      const existing = await dir.lstat(name);
      const mode = permissionsOf(params.mode) ??
        (existing?.isFile() ? existing.mode & 0o7777 : undefined);
      if (mode !== undefined) await opened.file.chmod(mode);
      after = await opened.file.stat({ bigint: true });
    } finally {
      await opened.file.close();
    }
    await dir.rename(upload.temp, name);
    await forgetRecord(workdir, upload);
    hashesOf(workdir).remember(after, upload.state);
    return { path: dir.pathOf(name), size: upload.size, sha256 };
  } catch (error) {
    await removeTemporary(workdir, dir, upload);
    if (error instanceof ConflictError) throw error;
    return transferError(error);
  }
}

/** A later chunk without `upload_id`: appended to the file at the name. */
async function appendInPlace(
  params: FileUploadParams,
  bytes: Uint8Array,
  workdir: Workdir,
  dir: ConfinedDir,
  name: string,
): Promise<FileUploadResult> {
  const offset = params.offset ?? 0;
  let opened;
  try {
    opened = await dir.openFile(name, WRITE_FLAGS);
  } catch (error) {
    if (errorCode(error) !== "ENOENT") transferError(error);
    throw offsetMismatch(0);
  }
  try {
    const before = await opened.file.stat({ bigint: true });
    if (Number(before.size) !== offset) throw offsetMismatch(Number(before.size));
    const hashes = hashesOf(workdir);
    const state = hashes.peek(before) ?? await hashPrefix(opened.file, offset);
    await writeAll(opened.file, bytes, offset);
    state.update(bytes);
    const mode = permissionsOf(params.mode);
    if (mode !== undefined) await opened.file.chmod(mode);
    const after = await opened.file.stat({ bigint: true });
    const sha256 = state.copy().digest("hex");
    if (params.sha256 !== undefined && params.sha256 !== sha256) {
      // The contract: the file is removed; but only this file, not one renamed over the name
      // since (another upload's).
      const now = await dir.lstat(name);
      if (now && BigInt(now.ino) === after.ino && BigInt(now.dev) === after.dev) {
        await dir.unlink(name);
      }
      throw sha256Mismatch();
    }
    hashes.remember(after, state);
    return { path: dir.pathOf(name), size: Number(after.size), sha256 };
  } finally {
    await opened.file.close();
  }
}

/**
 * `file.download`: one base64 chunk from `offset`; `sha256` covers the whole file, so the first
 * chunk of a file version reads all of it (a sparse file's holes too). `signal` (the session's
 * end, the connection's) stops that reading and answers with its reason.
 */
export async function downloadFile(
  params: FileDownloadParams,
  workdir: Workdir,
  limits: FileTransferLimits = DEFAULT_MACHINE_LIMITS,
  signal?: AbortSignal,
): Promise<FileDownloadResult> {
  const opened = await workdir.openFile(params.path).catch(transferError);
  try {
    const stat = await opened.file.stat({ bigint: true });
    const size = Number(stat.size);
    const offset = Math.min(params.offset ?? 0, size);
    const cap = Math.min(params.max_bytes ?? limits.downloadBytes, limits.downloadBytes);
    const bytes = new Uint8Array(Math.max(0, Math.min(cap, size - offset)));
    let length = 0;
    while (length < bytes.length) {
      const { bytesRead } = await opened.file.read(
        bytes,
        length,
        bytes.length - length,
        offset + length,
      );
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    const state = await hashesOf(workdir).of(opened.file, stat, signal);
    return {
      path: opened.path,
      content: encodeBase64(bytes.subarray(0, length)),
      offset,
      size,
      eof: offset + length >= size,
      sha256: state.digest("hex"),
    };
  } finally {
    await opened.file.close();
  }
}

/**
 * The permission bits of an upload's `mode`: setuid, setgid and sticky are not the sender's to
 * give (an executor running as root would plant a setuid-root program for local users).
 */
function permissionsOf(mode: number | undefined): number | undefined {
  return mode === undefined ? undefined : mode & 0o777;
}

function sha256Mismatch(): ConflictError {
  return new ConflictError("sha256 mismatch", { reason: "sha256_mismatch" });
}

function offsetMismatch(expected: number): ConflictError {
  return new ConflictError("offset mismatch", {
    reason: "offset_mismatch",
    expected_offset: expected,
  });
}

function versionKey(stat: BigIntStats): string {
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}`;
}

/**
 * The SHA-256 state after the first `length` bytes of `file`, read a chunk at a time; `signal`
 * stops it between chunks (rejecting with its reason).
 */
async function hashPrefix(file: FileHandle, length: number, signal?: AbortSignal): Promise<Hash> {
  const hash = createHash("sha256");
  const buffer = new Uint8Array(Math.min(HASH_CHUNK_BYTES, Math.max(length, 1)));
  for (let position = 0; position < length;) {
    signal?.throwIfAborted();
    const { bytesRead } = await file.read(
      buffer,
      0,
      Math.min(buffer.length, length - position),
      position,
    );
    if (bytesRead === 0) break;
    hash.update(buffer.subarray(0, bytesRead));
    position += bytesRead;
  }
  return hash;
}

/** `work`, or the reason of `signal` once it aborts (the work itself goes on). */
function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    signal.addEventListener("abort", abort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort));
  });
}

async function writeAll(file: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let at = 0; at < bytes.length;) {
    const { bytesWritten } = await file.write(bytes, at, bytes.length - at, position + at);
    at += bytesWritten;
  }
}

function decodeBase64(data: string): Uint8Array {
  const buffer = Buffer.from(data, "base64");
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}
