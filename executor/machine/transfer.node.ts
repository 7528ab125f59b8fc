/**
 * The remaining capability requests of the contract, each confined to the workdir:
 * file transfer (`file.upload` / `file.download`, base64 chunks addressed by offset),
 * `skill.install` (files or a verified tar.gz, installed atomically) and `workspace.backup`
 * (a tar.gz PUT to a presigned URL).
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, open, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type {
  FileDownloadParams,
  FileDownloadResult,
  FileUploadParams,
  FileUploadResult,
  SkillInstallParams,
  SkillInstallResult,
  WorkspaceBackupParams,
  WorkspaceBackupResult,
} from "../../protocol/generated/contract.ts";
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  UnavailableError,
} from "../../protocol/generated/errors.ts";
import { PathOutsideWorkdirError, type Workdir } from "./workdir.node.ts";

const DEFAULT_DOWNLOAD_BYTES = 4 * 1024 * 1024;

/** Resolves a capability request's path; outside the workdir is -32001 `path_outside_workdir`. */
export async function confined(workdir: Workdir, path: string): Promise<string> {
  try {
    return await workdir.resolve(path);
  } catch (error) {
    if (error instanceof PathOutsideWorkdirError) {
      throw new ForbiddenError("path outside the workdir", { reason: "path_outside_workdir" });
    }
    throw error;
  }
}

async function sha256Of(path: string): Promise<string> {
  return createHash("sha256").update(await readFile(path)).digest("hex");
}

function fromBase64(data: string): Uint8Array {
  return Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** `file.upload`: offset 0 creates or truncates; a later chunk must start at the current size. */
export async function uploadFile(
  params: FileUploadParams,
  workdir: Workdir,
): Promise<FileUploadResult> {
  const path = await confined(workdir, params.path);
  const offset = params.offset ?? 0;
  const bytes = fromBase64(params.content);
  await mkdir(dirname(path), { recursive: true });
  await confined(workdir, params.path); // the directories just made may not lead outside
  if (offset === 0) {
    await writeFile(path, bytes);
  } else {
    const size = await stat(path).then((s) => s.size, () => 0);
    if (size !== offset) {
      throw new ConflictError("offset mismatch", {
        reason: "offset_mismatch",
        expected_offset: size,
      });
    }
    const handle = await open(path, "a");
    try {
      await handle.write(bytes);
    } finally {
      await handle.close();
    }
  }
  if (params.mode !== undefined) await chmod(path, params.mode);
  const sha256 = await sha256Of(path);
  const size = (await stat(path)).size;
  if (params.sha256 && params.sha256 !== sha256) {
    throw new ConflictError("sha256 mismatch", { reason: "sha256_mismatch" });
  }
  return { path, size, sha256 };
}

/** `file.download`: one base64 chunk from `offset`; `sha256` covers the whole file. */
export async function downloadFile(
  params: FileDownloadParams,
  workdir: Workdir,
): Promise<FileDownloadResult> {
  const path = await confined(workdir, params.path);
  const info = await stat(path).catch(() => undefined);
  if (!info?.isFile()) throw new NotFoundError("no such file", { reason: "unknown_file" });
  const offset = Math.min(params.offset ?? 0, info.size);
  const length = Math.min(params.max_bytes ?? DEFAULT_DOWNLOAD_BYTES, info.size - offset);
  const handle = await open(path, "r");
  const bytes = new Uint8Array(length);
  try {
    await handle.read(bytes, 0, length, offset);
  } finally {
    await handle.close();
  }
  return {
    path,
    content: toBase64(bytes),
    offset,
    size: info.size,
    eof: offset + length === info.size,
    sha256: await sha256Of(path),
  };
}

/** `skill.install`: into `<skillsRoot>/<name>`, replacing an older install atomically. */
export async function installSkill(
  params: SkillInstallParams,
  skillsRoot: string,
  fetchFn: typeof fetch = fetch,
): Promise<SkillInstallResult> {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(params.name)) {
    throw new ForbiddenError("invalid skill name", { reason: "invalid_name", field: "name" });
  }
  await mkdir(skillsRoot, { recursive: true });
  const target = join(skillsRoot, params.name);
  const staging = `${target}.installing-${crypto.randomUUID()}`;
  await mkdir(staging, { recursive: true });
  try {
    let files = 0;
    const source = params.source;
    if (source.type === "files") {
      const { Workdir } = await import("./workdir.node.ts");
      const inside = new Workdir(staging);
      for (const file of source.files) {
        const path = await confined(inside, file.path);
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, file.encoding === "base64" ? fromBase64(file.content) : file.content);
        if (file.mode !== undefined) await chmod(path, file.mode);
        files++;
      }
    } else {
      const response = await fetchFn(source.url).catch(() => undefined);
      if (!response?.ok) {
        throw new UnavailableError("skill archive could not be fetched", {
          reason: "backend_unavailable",
        });
      }
      const archive = new Uint8Array(await response.arrayBuffer());
      const sha256 = createHash("sha256").update(archive).digest("hex");
      if (sha256 !== source.sha256) {
        throw new ConflictError("sha256 mismatch", { reason: "sha256_mismatch" });
      }
      files = await extractTarGz(archive, staging);
    }
    await rm(target, { recursive: true, force: true });
    await rename(staging, target);
    return { name: params.name, path: target, files };
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
}

/** Runs `tar` with `input` on stdin; resolves with stdout, stderr and the exit code. */
function tar(
  args: string[],
  input?: Uint8Array,
  cwd?: string,
): Promise<{ out: Uint8Array; err: string; code: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn("tar", args, { cwd, stdio: ["pipe", "pipe", "pipe"] });
    const out: Uint8Array[] = [];
    let err = "";
    child.stdout.on("data", (chunk: Uint8Array) => out.push(chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    child.once("error", reject);
    child.once("close", (code) => {
      const joined = new Uint8Array(out.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const chunk of out) {
        joined.set(chunk, at);
        at += chunk.length;
      }
      resolve({ out: joined, err, code: code ?? 1 });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(input);
  });
}

/** Extracts a tar.gz into `dir`, refusing members that would land outside it. */
async function extractTarGz(archive: Uint8Array, dir: string): Promise<number> {
  const listing = await tar(["-tzf", "-"], archive);
  if (listing.code !== 0) {
    throw new ConflictError("not a tar.gz archive", { reason: "bad_archive" });
  }
  const names = new TextDecoder().decode(listing.out).split("\n").filter(Boolean);
  if (names.some((n) => n.startsWith("/") || n.split("/").includes(".."))) {
    throw new ForbiddenError("archive member outside the skill", {
      reason: "path_outside_workdir",
    });
  }
  const extracted = await tar(["-xzf", "-", "--no-same-owner"], archive, dir);
  if (extracted.code !== 0) {
    throw new ConflictError("archive could not be extracted", { reason: "bad_archive" });
  }
  return names.filter((n) => !n.endsWith("/")).length;
}

/** `workspace.backup`: a tar.gz of the workdir (or a path in it), PUT to `upload_url`. */
export async function backupWorkspace(
  params: WorkspaceBackupParams,
  workdir: Workdir,
  fetchFn: typeof fetch = fetch,
): Promise<WorkspaceBackupResult> {
  const path = await confined(workdir, params.path ?? ".");
  const excludes = (params.exclude ?? []).flatMap((pattern) => [`--exclude=${pattern}`]);
  const archive = await tar(["-czvf", "-", ...excludes, "."], undefined, path);
  if (archive.code !== 0) {
    throw new UnavailableError("backup failed", { reason: "backend_unavailable" });
  }
  const files = archive.err.split("\n").filter((line) => line && !line.endsWith("/")).length;
  const response = await fetchFn(params.upload_url, {
    method: "PUT",
    headers: { "content-type": "application/gzip", ...params.headers },
    body: archive.out as BodyInit,
  }).catch(() => undefined);
  if (!response?.ok) throw new UnavailableError("upload failed", { reason: "backend_unavailable" });
  return {
    format: "tar.gz",
    size: archive.out.byteLength,
    sha256: createHash("sha256").update(archive.out).digest("hex"),
    files,
  };
}
