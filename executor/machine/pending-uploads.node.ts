/**
 * The uploads of several chunks in progress (`file.upload` with an `upload_id`): each in a private
 * temporary file beside its destination, which only its own last chunk renames over the name.
 * Two uploads to one path therefore never write into each other's bytes, and neither touches the
 * file already there until it is whole and checked.
 *
 * An upload not continued for {@linkcode UPLOAD_IDLE_MS} is dropped with its temporary (looked at
 * whenever the workdir takes an upload), and at most {@linkcode MAX_PENDING_UPLOADS} are kept per
 * workdir (the least recently continued dropped first): a sender that gives up leaves nothing.
 */
import type { Hash } from "node:crypto";
import type { ConfinedDir, Workdir } from "./workdir.node.ts";

/** How long an upload may wait for its next chunk before its temporary is removed: 15 min. */
export const UPLOAD_IDLE_MS = 15 * 60_000;
/** Uploads in progress kept per workdir. */
export const MAX_PENDING_UPLOADS = 64;

/** One upload in progress: where its temporary is and what it holds. */
export interface PendingUpload {
  /** The destination as the sender named it. */
  readonly path: string;
  /** The temporary's name in the destination's directory. */
  readonly temp: string;
  /** The temporary's device and inode: a file swapped in under its name is not it. */
  readonly dev: number;
  readonly ino: number;
  /** Bytes written so far (the next chunk's offset). */
  size: number;
  /** SHA-256 state of those bytes. */
  state: Hash;
  touchedAt: number;
}

/** The uploads in progress of one workdir, by upload id and path. */
export class PendingUploads {
  readonly #uploads = new Map<string, PendingUpload>();
  readonly #queues = new Map<string, Promise<unknown>>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** The key of an upload: its id and its destination (another path is another upload). */
  static key(uploadId: string, path: string): string {
    return `${uploadId}\0${path}`;
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
    for (const [oldest, entry] of this.#uploads) {
      if (this.#uploads.size <= MAX_PENDING_UPLOADS) break;
      this.#uploads.delete(oldest);
      dropped.push(entry);
    }
    return dropped;
  }

  delete(key: string): void {
    this.#uploads.delete(key);
  }

  /** Forgets the uploads idle for {@linkcode UPLOAD_IDLE_MS} and returns them, to be removed. */
  takeIdle(): PendingUpload[] {
    const before = this.#now() - UPLOAD_IDLE_MS;
    const idle: PendingUpload[] = [];
    for (const [key, entry] of this.#uploads) {
      if (entry.touchedAt > before) continue;
      this.#uploads.delete(key);
      idle.push(entry);
    }
    return idle;
  }
}

/** Removes `upload`'s temporary from `dir`, if the name still holds that very file. */
export async function removeTemporary(dir: ConfinedDir, upload: PendingUpload): Promise<void> {
  const now = await dir.lstat(upload.temp).catch(() => undefined);
  if (!now || now.dev !== upload.dev || now.ino !== upload.ino) return;
  await dir.unlink(upload.temp).catch(() => {});
}

/** Removes the temporaries of dropped uploads (each found again from its destination). */
export async function removeDropped(workdir: Workdir, dropped: PendingUpload[]): Promise<void> {
  for (const upload of dropped) {
    const located = await workdir.parentOf(upload.path).catch(() => undefined);
    if (!located) continue;
    try {
      await removeTemporary(located.dir, upload);
    } finally {
      await located.dir.close();
    }
  }
}
