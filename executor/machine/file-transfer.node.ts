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
import { WRITE_FLAGS } from "./confined-dir.node.ts";
import { DEFAULT_MACHINE_LIMITS, type FileTransferLimits } from "./limits.ts";
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

  /** The hash state after all of `file` (whose status is `stat`), read only when unknown. */
  async of(file: FileHandle, stat: BigIntStats): Promise<Hash> {
    const key = versionKey(stat);
    const known = this.#take(key);
    if (known) return known;
    let pending = this.#pending.get(key);
    if (!pending) {
      pending = hashPrefix(file, Number(stat.size));
      this.#pending.set(key, pending);
      pending.finally(() => this.#pending.delete(key)).catch(() => {});
    }
    const state = await pending;
    this.remember(stat, state);
    return state.copy();
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

/** `file.upload`: offset 0 creates or replaces; a later chunk must start at the current size. */
export async function uploadFile(
  params: FileUploadParams,
  workdir: Workdir,
): Promise<FileUploadResult> {
  const offset = params.offset ?? 0;
  const bytes = decodeBase64(params.content);
  const hashes = hashesOf(workdir);
  const { dir, name } = await workdir.parentOf(params.path, { create: true })
    .catch(transferError);
  try {
    let state: Hash;
    let after: BigIntStats;
    if (offset === 0) {
      // A new version in a temporary file renamed over the name: no link at the name is
      // followed, and readers never see a half-written file.
      state = createHash("sha256").update(bytes);
      let stat: BigIntStats | undefined;
      await writeIn(dir, name, async (file) => {
        await writeAll(file, bytes, 0);
        if (params.mode !== undefined) await file.chmod(params.mode);
        stat = await file.stat({ bigint: true });
      }).catch(transferError);
      after = stat!;
    } else {
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
        state = hashes.peek(before) ?? await hashPrefix(opened.file, offset);
        await writeAll(opened.file, bytes, offset);
        state.update(bytes);
        if (params.mode !== undefined) await opened.file.chmod(params.mode);
        after = await opened.file.stat({ bigint: true });
      } finally {
        await opened.file.close();
      }
    }
    const sha256 = state.copy().digest("hex");
    if (params.sha256 !== undefined && params.sha256 !== sha256) {
      await dir.unlink(name); // the contract: the file is removed
      throw new ConflictError("sha256 mismatch", { reason: "sha256_mismatch" });
    }
    hashes.remember(after, state);
    return { path: dir.pathOf(name), size: Number(after.size), sha256 };
  } finally {
    await dir.close();
  }
}

/** `file.download`: one base64 chunk from `offset`; `sha256` covers the whole file. */
export async function downloadFile(
  params: FileDownloadParams,
  workdir: Workdir,
  limits: FileTransferLimits = DEFAULT_MACHINE_LIMITS,
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
    const state = await hashesOf(workdir).of(opened.file, stat);
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

function offsetMismatch(expected: number): ConflictError {
  return new ConflictError("offset mismatch", {
    reason: "offset_mismatch",
    expected_offset: expected,
  });
}

function versionKey(stat: BigIntStats): string {
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}`;
}

/** The SHA-256 state after the first `length` bytes of `file`, read a chunk at a time. */
async function hashPrefix(file: FileHandle, length: number): Promise<Hash> {
  const hash = createHash("sha256");
  const buffer = new Uint8Array(Math.min(HASH_CHUNK_BYTES, Math.max(length, 1)));
  for (let position = 0; position < length;) {
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
