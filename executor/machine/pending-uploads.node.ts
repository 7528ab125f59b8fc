/**
 * The uploads of several chunks in progress (`file.upload` with an `upload_id`): each in a private
 * temporary file beside its destination, which only its own last chunk renames over the name.
 * Two uploads to one path therefore never write into each other's bytes, and neither touches the
 * file already there until it is whole and checked.
 *
 * An upload belongs to the session that started it: it is keyed by session, upload id and path,
 * so sessions sharing a workdir never continue, restart or drop each other's uploads whatever ids
 * they pick. An upload not continued for {@linkcode UPLOAD_IDLE_MS} is dropped with its temporary
 * (looked at whenever the workdir takes an upload), a session's end drops its uploads, and at most
 * {@linkcode MAX_PENDING_UPLOADS} are kept per workdir: past that, the least recently continued
 * upload of the same session is dropped first (one session cannot push out another's while it
 * holds older ones of its own), else the least recently continued of all.
 *
 * Temporaries are named `.bma-upload-<16 hex>.tmp`; one below a subdirectory has a record in the
 * workdir's root, a symlink `.bma-upload-<same hex>.ref` to it, made before it. An executor that
 * ended without dropping its uploads (killed, restarted) leaves both behind, and no registry in
 * memory knows them: {@linkcode sweepLeftovers} looks at the root's entries (not the whole tree)
 * when an executor starts serving the workdir and at most every {@linkcode UPLOAD_IDLE_MS} when
 * the workdir takes an upload, and removes a temporary there or recorded there that was not
 * written for {@linkcode UPLOAD_IDLE_MS} and is none of this executor's live uploads. Another
 * executor sharing the workdir writes its live uploads' temporaries within that window, so they
 * stay; only names of that exact form are ever removed. So a sender that gives up leaves nothing.
 */
import type { Hash } from "node:crypto";
import { constants } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { WRITE_FLAGS } from "./confined-dir.node.ts";
import { type ConfinedDir, errorCode, type Workdir } from "./workdir.node.ts";

/** How long an upload may wait for its next chunk before its temporary is removed: 15 min. */
export const UPLOAD_IDLE_MS = 15 * 60_000;
/** Uploads in progress kept per workdir. */
export const MAX_PENDING_UPLOADS = 64;

const PREFIX = ".bma-upload-";
/** A temporary (`tmp`) or a record of one (`ref`), by the random part they share. */
const LEFTOVER = /^\.bma-upload-([0-9a-f]{16})\.(tmp|ref)$/;

/** One upload in progress: where its temporary is and what it holds. */
export interface PendingUpload {
  /** The session that started it. */
  readonly sessionId: string;
  /** The destination as the sender named it. */
  readonly path: string;
  /** The temporary's name in the destination's directory. */
  readonly temp: string;
  /** Its record's name in the workdir's root (a temporary in the root itself has none). */
  readonly ref: string | undefined;
  /** The temporary's device and inode: a file swapped in under its name is not it. */
  readonly dev: number;
  readonly ino: number;
  /** Bytes written so far (the next chunk's offset). */
  size: number;
  /** SHA-256 state of those bytes. */
  state: Hash;
  touchedAt: number;
}

/** The uploads in progress of one workdir, by session, upload id and path. */
export class PendingUploads {
  readonly #uploads = new Map<string, PendingUpload>();
  readonly #queues = new Map<string, Promise<unknown>>();
  readonly #now: () => number;
  #sweptAt = -Infinity;
  #sweeping: Promise<void> | undefined;

  /** `now` measures the idle window (default: the system clock). */
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** The key of an upload: its session, id and destination (another path is another upload). */
  static key(sessionId: string, uploadId: string, path: string): string {
    return `${sessionId}\0${uploadId}\0${path}`;
  }

  /** The time on this registry's clock. */
  now(): number {
    return this.#now();
  }

  /** Runs `work` after every earlier chunk of the same upload (chunks sent at once queue up). */
  serialized<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.#queues.get(key) ?? Promise.resolve();
    const run = before.then(work, work);
    const settled = run.catch(() => {});
    this.#queues.set(key, settled);
    settled.then(() => {
      if (this.#queues.get(key) === settled) this.#queues.delete(key);
    });
    return run;
  }

  get(key: string): PendingUpload | undefined {
    return this.#uploads.get(key);
  }

  /** Records `upload` as continued now; past the bound, returns the uploads to drop. */
  set(key: string, upload: PendingUpload): PendingUpload[] {
    upload.touchedAt = this.#now();
    this.#uploads.delete(key); // most recently continued last
    this.#uploads.set(key, upload);
    const dropped: PendingUpload[] = [];
    while (this.#uploads.size > MAX_PENDING_UPLOADS) {
      const victim = this.#oldest(key, upload.sessionId) ?? this.#oldest(key);
      if (victim === undefined) break;
      dropped.push(this.#uploads.get(victim)!);
      this.#uploads.delete(victim);
    }
    return dropped;
  }

  delete(key: string): void {
    this.#uploads.delete(key);
  }

  /** Forgets the uploads idle for {@linkcode UPLOAD_IDLE_MS} and returns them, to be removed. */
  takeIdle(): PendingUpload[] {
    const before = this.#now() - UPLOAD_IDLE_MS;
    return this.#take((entry) => entry.touchedAt <= before);
  }

  /** Forgets the uploads session `sessionId` started and returns them, to be removed. */
  takeSession(sessionId: string): PendingUpload[] {
    return this.#take((entry) => entry.sessionId === sessionId);
  }

  /** Whether `temp` is the temporary of an upload in progress here. */
  owns(temp: string): boolean {
    for (const entry of this.#uploads.values()) if (entry.temp === temp) return true;
    return false;
  }

  /**
   * Runs `sweep` when none ran for {@linkcode UPLOAD_IDLE_MS} (or joins the one running); its
   * failure is only `onError`'s to see: a sweep is housekeeping, never a reason to refuse.
   */
  sweepIfDue(sweep: () => Promise<void>, onError: (error: unknown) => void): Promise<void> {
    if (this.#sweeping) return this.#sweeping;
    if (this.#now() - this.#sweptAt < UPLOAD_IDLE_MS) return Promise.resolve();
    this.#sweptAt = this.#now();
    const running = sweep().catch(onError).finally(() => (this.#sweeping = undefined));
    this.#sweeping = running;
    return running;
  }

  /** The least recently continued key other than `except` (of session `sessionId` if given). */
  #oldest(except: string, sessionId?: string): string | undefined {
    for (const [key, entry] of this.#uploads) {
      if (key !== except && (sessionId === undefined || entry.sessionId === sessionId)) return key;
    }
    return undefined;
  }

  #take(which: (entry: PendingUpload) => boolean): PendingUpload[] {
    const taken: PendingUpload[] = [];
    for (const [key, entry] of this.#uploads) {
      if (!which(entry)) continue;
      this.#uploads.delete(key);
      taken.push(entry);
    }
    return taken;
  }
}

/** A new temporary (opened for writing) and, below a subdirectory, its record. */
export interface NewTemporary {
  readonly name: string;
  readonly ref: string | undefined;
  readonly file: FileHandle;
}

/**
 * Creates an upload's temporary in `dir` (never through a link, `O_EXCL`). Below a subdirectory
 * its record is made first, so that no temporary ever exists that a later sweep could not find;
 * where no record can be made (the root is read-only) the upload goes on without one.
 */
export async function createTemporary(workdir: Workdir, dir: ConfinedDir): Promise<NewTemporary> {
  for (;;) {
    const hex = randomHex();
    const name = `${PREFIX}${hex}.tmp`;
    let ref: string | undefined;
    if (dir.relativePath !== "") {
      ref = `${PREFIX}${hex}.ref`;
      const made = await makeRecord(workdir, ref, dir.relativeOf(name));
      if (made === "taken") continue;
      if (made === "failed") ref = undefined;
    }
    try {
      const flags = WRITE_FLAGS | constants.O_CREAT | constants.O_EXCL;
      const { file } = await dir.openFile(name, flags);
      return { name, ref, file };
    } catch (error) {
      if (ref !== undefined) await removeRecord(workdir, ref);
      if (errorCode(error) !== "EEXIST") throw error;
    }
  }
}

/**
 * Removes `upload`'s temporary from `dir`, if the name still holds that very file, and its
 * record.
 */
export async function removeTemporary(
  workdir: Workdir,
  dir: ConfinedDir,
  upload: PendingUpload,
): Promise<void> {
  const now = await dir.lstat(upload.temp).catch(() => undefined);
  if (now && now.dev === upload.dev && now.ino === upload.ino) {
    await dir.unlink(upload.temp).catch(() => {});
  }
  await forgetRecord(workdir, upload);
}

/** Removes `upload`'s record (its temporary is renamed over the destination, or gone). */
export async function forgetRecord(
  workdir: Workdir,
  upload: Pick<PendingUpload, "ref">,
): Promise<void> {
  if (upload.ref !== undefined) await removeRecord(workdir, upload.ref);
}

/**
 * Removes the temporaries of dropped uploads (each found again from its destination; one that
 * cannot be keeps its record, for a later sweep).
 */
export async function removeDropped(workdir: Workdir, dropped: PendingUpload[]): Promise<void> {
  for (const upload of dropped) {
    const located = await workdir.parentOf(upload.path).catch(() => undefined);
    if (!located) continue;
    try {
      await removeTemporary(workdir, located.dir, upload);
    } finally {
      await located.dir.close();
    }
  }
}

/**
 * Removes what executors that are gone left of their uploads (see the module comment): the
 * temporaries in the root and those the root's records name, unless written within
 * {@linkcode UPLOAD_IDLE_MS} of `uploads`' clock or live in `uploads`.
 */
export async function sweepLeftovers(workdir: Workdir, uploads: PendingUploads): Promise<void> {
  const stale = uploads.now() - UPLOAD_IDLE_MS;
  const root = await workdir.openRoot();
  try {
    const found: { name: string; hex: string; kind: string }[] = [];
    for await (const entry of root.entries()) {
      const match = LEFTOVER.exec(entry.name);
      if (match) found.push({ name: entry.name, hex: match[1], kind: entry.kind });
    }
    for (const { name, hex, kind } of found) {
      if (name.endsWith(".tmp") && kind === "file") {
        await removeIfStale(root, name, stale, uploads);
      } else if (name.endsWith(".ref") && kind === "symlink") {
        await sweepRecord(workdir, root, name, hex, stale, uploads);
      }
    }
  } finally {
    await root.close();
  }
}

/** The record `ref` in `root` and the temporary it names, removed once both are stale. */
async function sweepRecord(
  workdir: Workdir,
  root: ConfinedDir,
  ref: string,
  hex: string,
  stale: number,
  uploads: PendingUploads,
): Promise<void> {
  const target = await root.readlink(ref).catch(() => undefined);
  const temp = `${PREFIX}${hex}.tmp`;
  // A record names a path below the root ending in its own temporary; anything else is not one
  // of ours, and what it names is not looked at.
  if (target === undefined || !target.endsWith(`/${temp}`) || target.startsWith("/")) return;
  const located = await workdir.parentOf(target).catch(() => undefined);
  let outcome: Staleness = "missing";
  if (located) {
    try {
      outcome = await removeIfStale(located.dir, temp, stale, uploads);
    } finally {
      await located.dir.close();
    }
  }
  if (outcome === "kept") return;
  // A record whose temporary is missing may be one just made, its temporary not yet created.
  const record = await root.lstat(ref).catch(() => undefined);
  if (outcome === "removed" || (record !== undefined && record.mtimeMs <= stale)) {
    await root.unlink(ref).catch(() => {});
  }
}

type Staleness = "removed" | "kept" | "missing";

/** Removes the regular file `name` of `dir` if not written since `stale` and not live. */
async function removeIfStale(
  dir: ConfinedDir,
  name: string,
  stale: number,
  uploads: PendingUploads,
): Promise<Staleness> {
  if (uploads.owns(name)) return "kept";
  const stat = await dir.lstat(name).catch(() => undefined);
  if (stat === undefined) return "missing";
  if (!stat.isFile() || stat.mtimeMs > stale) return "kept";
  await dir.unlink(name).catch(() => {});
  return "removed";
}

/** Makes the record `ref` in the root, a symlink to `target` (relative to the root). */
async function makeRecord(
  workdir: Workdir,
  ref: string,
  target: string,
): Promise<"made" | "taken" | "failed"> {
  try {
    const root = await workdir.openRoot();
    try {
      await root.symlink(target, ref);
      return "made";
    } finally {
      await root.close();
    }
  } catch (error) {
    return errorCode(error) === "EEXIST" ? "taken" : "failed";
  }
}

async function removeRecord(workdir: Workdir, ref: string): Promise<void> {
  try {
    const root = await workdir.openRoot();
    try {
      await root.unlink(ref);
    } finally {
      await root.close();
    }
  } catch {
    // Gone already, or the root cannot be opened: a later sweep removes it.
  }
}

function randomHex(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(8)),
    (byte) => byte.toString(16).padStart(2, "0"),
  ).join("");
}
