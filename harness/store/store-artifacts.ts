/**
 * Artifacts kept in the harness's own store (`openSqliteStore`, PostgreSQL, any `HarnessStore`):
 * what a result points at survives a restart and a failover with the rest of what the harness
 * acknowledged. An artifact is its description (`a/<id>/m`) and its bytes in base64 chunks
 * (`a/<id>/c/<n>`, at most {@linkcode ARTIFACT_CHUNK_BYTES} bytes each), written in batches of a
 * few chunks with the description last: a reader finds a whole artifact or none. Portable: no
 * runtime APIs.
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
import { padded } from "../records.ts";
import { type HarnessStore, keyTextProblem, type StoreOp } from "./store.ts";

/** Most bytes of an artifact one stored value holds (as base64: a third more). */
export const ARTIFACT_CHUNK_BYTES = 512 * 1024;
/** Chunks written in one batch: a transaction of a few MiB, whatever the artifact's size. */
const CHUNKS_PER_BATCH = 8;

/** The description an artifact is stored with. */
interface ArtifactRecord {
  name?: string;
  mime_type?: string;
  size: number;
  environment_id?: string;
  chunks: number;
}

/** The bytes all artifacts hold, kept with each change (ids are `art_…`: no artifact's key). */
const TOTAL = "a/total";
const described = (id: string) => `a/${id}/m`;
const chunkKey = (id: string, n: number) => `a/${id}/c/${padded(n)}`;
const chunkPrefix = (id: string) => `a/${id}/c/`;

/** Options of a {@linkcode StoreArtifactStore}. */
export interface StoreArtifactStoreOptions {
  /**
   * Most bytes its artifacts hold at once; an upload beyond it is refused (HTTP 507) rather than
   * growing the database without end. Default 1 GiB. Free room with `delete`.
   */
  maxBytes?: number;
}

/**
 * Keeps artifacts in a {@linkcode HarnessStore}: the default of a harness given a store that it
 * claims (a Durable Object's storage, whose values are small, keeps them in memory). Written by
 * the store's one writer, so the count of bytes it holds is this object's, read once.
 */
export class StoreArtifactStore implements ArtifactStore {
  readonly #store: HarnessStore;
  readonly #maxBytes: number;
  /** The bytes held, uploads under way included: read from the store at the first use. */
  #held: Promise<{ bytes: number }> | undefined;
  /** Artifacts being deleted: a second delete meanwhile frees nothing twice. */
  readonly #deleting = new Set<string>();

  /** Artifacts in `store`, beside the harness's records. */
  constructor(store: HarnessStore, options: StoreArtifactStoreOptions = {}) {
    this.#store = store;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_STORED_ARTIFACT_BYTES;
  }

  #count(): Promise<{ bytes: number }> {
    this.#held ??= Promise.resolve(this.#store.get<number>(TOTAL)).then(
      (bytes) => ({ bytes: bytes ?? 0 }),
      (error) => {
        this.#held = undefined; // Read again next time.
        throw error;
      },
    );
    return this.#held;
  }

  async put(upload: ArtifactUpload): Promise<Artifact> {
    const bytes = upload.bytes;
    const held = await this.#count();
    if (held.bytes + bytes.byteLength > this.#maxBytes) throw new ArtifactStoreFullError();
    held.bytes += bytes.byteLength;
    try {
      return await this.#put(upload, held);
    } catch (error) {
      held.bytes -= bytes.byteLength;
      throw error;
    }
  }

  async #put(upload: ArtifactUpload, held: { bytes: number }): Promise<Artifact> {
    const id = randomId("art_");
    const bytes = upload.bytes;
    const chunks = Math.ceil(bytes.byteLength / ARTIFACT_CHUNK_BYTES);
    let batch: StoreOp[] = [];
    for (let n = 0; n < chunks; n++) {
      const from = n * ARTIFACT_CHUNK_BYTES;
      const piece = bytes.subarray(from, Math.min(from + ARTIFACT_CHUNK_BYTES, bytes.byteLength));
      batch.push({ put: chunkKey(id, n), value: toBase64(piece) });
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
    };
    // The description last: until it is written, no reader finds the artifact.
    batch.push({ put: described(id), value: record }, { put: TOTAL, value: held.bytes });
    await this.#store.write(batch);
    return {
      artifact_id: id,
      ...(upload.name !== undefined ? { name: upload.name } : {}),
      size: bytes.byteLength,
      ...(upload.mimeType !== undefined ? { mime_type: upload.mimeType } : {}),
    };
  }

  async get(artifactId: string): Promise<StoredArtifact | undefined> {
    // An id no store can hold names no artifact (and is no reason to read the store).
    if (keyTextProblem(artifactId) !== undefined || artifactId.includes("/")) return undefined;
    const record = await this.#store.get<ArtifactRecord>(described(artifactId));
    if (!record) return undefined;
    const bytes = new Uint8Array(record.size);
    let at = 0;
    let after: string | undefined;
    // A few chunks at a time: the artifact's base64 is never all in memory at once.
    for (;;) {
      const page = await this.#store.list<string>(chunkPrefix(artifactId), {
        limit: CHUNKS_PER_BATCH,
        ...(after !== undefined ? { after } : {}),
      });
      for (const [key, text] of page) {
        const piece = fromBase64(text);
        bytes.set(piece, at);
        at += piece.byteLength;
        after = key;
      }
      if (page.length < CHUNKS_PER_BATCH) break;
    }
    if (at !== record.size) {
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
    if (keyTextProblem(artifactId) !== undefined || artifactId.includes("/")) return false;
    if (this.#deleting.has(artifactId)) return false;
    this.#deleting.add(artifactId);
    try {
      return await this.#delete(artifactId);
    } finally {
      this.#deleting.delete(artifactId);
    }
  }

  async #delete(artifactId: string): Promise<boolean> {
    const held = await this.#count();
    const record = await this.#store.get<ArtifactRecord>(described(artifactId));
    if (!record) return false;
    held.bytes -= record.size;
    try {
      await this.#store.write([
        { deletePrefix: `a/${artifactId}/` },
        { put: TOTAL, value: held.bytes },
      ]);
    } catch (error) {
      held.bytes += record.size;
      throw error;
    }
    return true;
  }
}
