/**
 * Artifacts kept in the harness's own store (`openSqliteStore`, PostgreSQL, any `HarnessStore`):
 * what a result points at survives a restart and a failover with the rest of what the harness
 * acknowledged. Keys (`keys.artifact…` in `harness/records.ts`): an artifact's description
 * (`art/<id>/m`), its bytes in base64 chunks (`art/<id>/c/<n>`, at most
 * {@linkcode ARTIFACT_CHUNK_BYTES} bytes each), its place in the order of uploads (`art/o/<n>`),
 * and the bytes all of them hold (`art/total`). Chunks are written in batches of a few, the
 * description last: a reader finds a whole artifact or none. Portable: no runtime APIs.
 */
import type { Artifact } from "../../protocol/generated/contract.ts";
import { fromBase64, toBase64 } from "../../protocol/base64.ts";
import { randomId } from "../../protocol/ids.ts";
import {
  type ArtifactStore,
  ArtifactStoreFullError,
  type ArtifactUpload,
  DEFAULT_MAX_STORED_ARTIFACT_BYTES,
  type StoredArtifact,
} from "../artifacts.ts";
import { keys, padded } from "../records.ts";
import type { HarnessStore, StoreOp } from "./store.ts";

/** Most bytes of an artifact one stored value holds (as base64: a third more). */
export const ARTIFACT_CHUNK_BYTES = 512 * 1024;
/** Chunks written (or read) in one batch: a transaction of a few MiB, whatever the artifact. */
const CHUNKS_PER_BATCH = 8;
/** The ids this store gives (`randomId("art_")`): no other names an artifact. */
const ARTIFACT_ID = /^art_[0-9a-f]{24}$/;

/** The description an artifact is stored with. */
interface ArtifactRecord {
  name?: string;
  mime_type?: string;
  size: number;
  environment_id?: string;
  chunks: number;
  /** Its place in the order of uploads (`art/o/<seq>`): the oldest go first to make room. */
  seq: number;
}

/** What the artifacts hold (`art/total`): bytes described, and the last upload's `seq`. */
interface ArtifactTotal {
  bytes: number;
  seq: number;
}

/** Options of a {@linkcode StoreArtifactStore}. */
export interface StoreArtifactStoreOptions {
  /**
   * Most bytes its artifacts hold at once. Past it the oldest artifacts are deleted to make room
   * for a new one (a database is not to grow without end, nor to refuse every upload once full);
   * one larger than the bound is refused (HTTP 507). Default 1 GiB.
   */
  maxBytes?: number;
}

/**
 * Keeps artifacts in a {@linkcode HarnessStore}: the default of a harness given a store that it
 * claims (a Durable Object's storage, whose values are small, keeps them in memory). Written by
 * the store's one writer: the count of what they hold is this object's, read once.
 */
export class StoreArtifactStore implements ArtifactStore {
  readonly #store: HarnessStore;
  readonly #maxBytes: number;
  /** What is described (read from the store at the first use), and uploads under way. */
  #state: Promise<ArtifactTotal & { reserved: number }> | undefined;
  /** Artifacts being deleted: a second delete meanwhile frees nothing twice. */
  readonly #deleting = new Set<string>();

  /** Artifacts in `store`, beside the harness's records. */
  constructor(store: HarnessStore, options: StoreArtifactStoreOptions = {}) {
    this.#store = store;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_STORED_ARTIFACT_BYTES;
  }

  #count(): Promise<ArtifactTotal & { reserved: number }> {
    this.#state ??= Promise.resolve(this.#store.get<ArtifactTotal>(keys.artifactTotal)).then(
      (total) => ({ bytes: total?.bytes ?? 0, seq: total?.seq ?? 0, reserved: 0 }),
      (error) => {
        this.#state = undefined; // Read again next time.
        throw error;
      },
    );
    return this.#state;
  }

  async put(upload: ArtifactUpload): Promise<Artifact> {
    const size = upload.bytes.byteLength;
    if (size > this.#maxBytes) throw new ArtifactStoreFullError();
    const state = await this.#count();
    while (state.bytes + state.reserved + size > this.#maxBytes) {
      if (!(await this.#deleteOldest())) throw new ArtifactStoreFullError();
    }
    state.reserved += size;
    const id = randomId("art_");
    const seq = ++state.seq;
    try {
      await this.#write(id, seq, upload, state);
    } catch (error) {
      // What it wrote is no artifact (no description): it goes, as far as the store lets it.
      await Promise.resolve(this.#store.write([{ deletePrefix: keys.artifact(id) }]))
        .catch(() => {});
      throw error;
    } finally {
      state.reserved -= size;
    }
    return {
      artifact_id: id,
      ...(upload.name !== undefined ? { name: upload.name } : {}),
      size,
      ...(upload.mimeType !== undefined ? { mime_type: upload.mimeType } : {}),
    };
  }

  async #write(id: string, seq: number, upload: ArtifactUpload, state: ArtifactTotal) {
    const bytes = upload.bytes;
    const chunks = Math.ceil(bytes.byteLength / ARTIFACT_CHUNK_BYTES);
    let batch: StoreOp[] = [];
    for (let n = 0; n < chunks; n++) {
      const from = n * ARTIFACT_CHUNK_BYTES;
      const piece = bytes.subarray(from, Math.min(from + ARTIFACT_CHUNK_BYTES, bytes.byteLength));
      batch.push({ put: `${keys.artifact(id)}c/${padded(n)}`, value: toBase64(piece) });
      if (batch.length === CHUNKS_PER_BATCH) {
        await this.#store.write(batch);
        batch = [];
      }
    }
    const record: ArtifactRecord = {
      ...(upload.name !== undefined ? { name: upload.name } : {}),
      ...(upload.mimeType !== undefined ? { mime_type: upload.mimeType } : {}),
      size: bytes.byteLength,
      ...(upload.environmentId !== undefined ? { environment_id: upload.environmentId } : {}),
      chunks,
      seq,
    };
    // The description last: until it is written, no reader finds the artifact. The total counts
    // what is described once this batch is (uploads still under way are not).
    const total: ArtifactTotal = { bytes: state.bytes + bytes.byteLength, seq: state.seq };
    batch.push(
      { put: `${keys.artifact(id)}m`, value: record },
      { put: keys.artifactOrder(seq), value: id },
      { put: keys.artifactTotal, value: total },
    );
    await this.#store.write(batch);
    state.bytes += bytes.byteLength;
  }

  /** Deletes the oldest artifact; false when there is none. */
  async #deleteOldest(): Promise<boolean> {
    const [oldest] = await this.#store.list<string>(keys.artifactOrders, { limit: 1 });
    if (!oldest) return false;
    if (await this.delete(oldest[1])) return true;
    // Its description is gone (or being deleted meanwhile): its place in the order goes too.
    await this.#store.write([{ delete: oldest[0] }]);
    return true;
  }

  async get(artifactId: string): Promise<StoredArtifact | undefined> {
    // An id this store never gave names no artifact (and is no reason to read the store).
    if (!ARTIFACT_ID.test(artifactId)) return undefined;
    const prefix = keys.artifact(artifactId);
    const record = await this.#store.get<ArtifactRecord>(`${prefix}m`);
    if (!record) return undefined;
    const bytes = new Uint8Array(record.size);
    let at = 0;
    let after: string | undefined;
    // A few chunks at a time: the artifact's base64 is never all in memory at once.
    for (;;) {
      const page = await this.#store.list<string>(`${prefix}c/`, {
        limit: CHUNKS_PER_BATCH,
        ...(after !== undefined ? { after } : {}),
      });
      for (const [key, text] of page) {
        const piece = fromBase64(text);
        if (at + piece.byteLength > bytes.byteLength) break;
        bytes.set(piece, at);
        at += piece.byteLength;
        after = key;
      }
      if (page.length < CHUNKS_PER_BATCH) break;
    }
    if (at !== record.size) {
      // Deleted while it was read: it is gone.
      if (!(await this.#store.get(`${prefix}m`))) return undefined;
      throw new Error(`artifact ${artifactId}: ${at} of its ${record.size} bytes are stored`);
    }
    return {
      artifact_id: artifactId,
      ...(record.name !== undefined ? { name: record.name } : {}),
      size: record.size,
      ...(record.mime_type !== undefined ? { mime_type: record.mime_type } : {}),
      bytes,
      ...(record.environment_id !== undefined ? { environment_id: record.environment_id } : {}),
    };
  }

  async delete(artifactId: string): Promise<boolean> {
    if (!ARTIFACT_ID.test(artifactId) || this.#deleting.has(artifactId)) return false;
    this.#deleting.add(artifactId);
    try {
      const state = await this.#count();
      const prefix = keys.artifact(artifactId);
      const record = await this.#store.get<ArtifactRecord>(`${prefix}m`);
      if (!record) return false;
      const total: ArtifactTotal = { bytes: state.bytes - record.size, seq: state.seq };
      await this.#store.write([
        { deletePrefix: prefix },
        { delete: keys.artifactOrder(record.seq) },
        { put: keys.artifactTotal, value: total },
      ]);
      state.bytes -= record.size;
      return true;
    } finally {
      this.#deleting.delete(artifactId);
    }
  }
}
