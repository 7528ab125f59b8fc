/**
 * Artifacts kept in the harness's own store (`openSqliteStore`, PostgreSQL, any `HarnessStore`):
 * what a result points at survives a restart and a failover with the rest of what the harness
 * acknowledged. Keys (`keys.artifact…` in `harness/records.ts`): an artifact's description
 * (`art/<id>/m`), its bytes in base64 chunks (`art/<id>/c/<n>`, at most
 * {@linkcode ARTIFACT_CHUNK_BYTES} bytes each), and its place in the order of uploads
 * (`art/o/<n>`: its id and size, and whether it is whole). The place is written first, the chunks
 * in batches of a few, the description last with the place marked whole: a reader finds a whole
 * artifact or none, and an upload a crash or a drain cut short is found (and deleted) by the next
 * harness on the store, from its place. What they hold is counted from the places, read once:
 * no total is kept that two uploads at once could both write. Portable: no runtime APIs.
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
/** Places read at once (their values are small). */
const PLACES_PER_READ = 256;
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

/** An upload's place in the order (`art/o/<seq>`): which, how large, and whether it is whole. */
interface ArtifactPlace {
  id: string;
  size: number;
  whole: boolean;
}

/** What this store counts: bytes of whole artifacts, uploads under way, the last `seq` used. */
interface ArtifactCount {
  bytes: number;
  reserved: number;
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
 * the store's one writer: what they hold is this object's count, read from the places once.
 */
export class StoreArtifactStore implements ArtifactStore {
  readonly #store: HarnessStore;
  readonly #maxBytes: number;
  #count: Promise<ArtifactCount> | undefined;
  /** Artifacts being deleted: a second delete meanwhile frees nothing twice. */
  readonly #deleting = new Set<string>();

  /** Artifacts in `store`, beside the harness's records. */
  constructor(store: HarnessStore, options: StoreArtifactStoreOptions = {}) {
    this.#store = store;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_STORED_ARTIFACT_BYTES;
  }

  /**
   * The count, read at the first use: the places of whole artifacts summed, and the uploads an
   * earlier harness left unfinished (a crash, a drain, a fence) deleted with what they wrote.
   */
  #counted(): Promise<ArtifactCount> {
    this.#count ??= this.#read().catch((error) => {
      this.#count = undefined; // Read again next time.
      throw error;
    });
    return this.#count;
  }

  async #read(): Promise<ArtifactCount> {
    const count: ArtifactCount = { bytes: 0, reserved: 0, seq: 0 };
    let after: string | undefined;
    for (;;) {
      const page = await this.#store.list<ArtifactPlace>(keys.artifactOrders, {
        limit: PLACES_PER_READ,
        ...(after !== undefined ? { after } : {}),
      });
      const unfinished: StoreOp[] = [];
      for (const [key, place] of page) {
        after = key;
        count.seq = Math.max(count.seq, Number(key.slice(keys.artifactOrders.length)));
        if (place.whole) count.bytes += place.size;
        else unfinished.push({ deletePrefix: keys.artifact(place.id) }, { delete: key });
      }
      if (unfinished.length) await this.#store.write(unfinished);
      if (page.length < PLACES_PER_READ) return count;
    }
  }

  async put(upload: ArtifactUpload): Promise<Artifact> {
    const size = upload.bytes.byteLength;
    if (size > this.#maxBytes) throw new ArtifactStoreFullError();
    const count = await this.#counted();
    while (count.bytes + count.reserved + size > this.#maxBytes) {
      if (!(await this.#deleteOldest())) throw new ArtifactStoreFullError();
    }
    count.reserved += size;
    const id = randomId("art_");
    const seq = ++count.seq;
    try {
      await this.#write(id, seq, upload);
      count.bytes += size;
    } catch (error) {
      // What it wrote is no artifact: it goes, as far as the store lets it (else the next
      // harness on the store finds its place unfinished, and deletes it).
      await Promise.resolve(this.#store.write([
        { deletePrefix: keys.artifact(id) },
        { delete: keys.artifactOrder(seq) },
      ])).catch(() => {});
      throw error;
    } finally {
      count.reserved -= size;
    }
    return {
      artifact_id: id,
      ...(upload.name !== undefined ? { name: upload.name } : {}),
      size,
      ...(upload.mimeType !== undefined ? { mime_type: upload.mimeType } : {}),
    };
  }

  async #write(id: string, seq: number, upload: ArtifactUpload): Promise<void> {
    const bytes = upload.bytes;
    const size = bytes.byteLength;
    const chunks = Math.ceil(size / ARTIFACT_CHUNK_BYTES);
    // Its place first: a harness that stops before the description is written leaves it
    // unfinished, for the next to find.
    const place = keys.artifactOrder(seq);
    let batch: StoreOp[] = [{ put: place, value: { id, size, whole: false } }];
    for (let n = 0; n < chunks; n++) {
      const from = n * ARTIFACT_CHUNK_BYTES;
      const piece = bytes.subarray(from, Math.min(from + ARTIFACT_CHUNK_BYTES, size));
      batch.push({ put: `${keys.artifact(id)}c/${padded(n)}`, value: toBase64(piece) });
      if (batch.length >= CHUNKS_PER_BATCH) {
        await this.#store.write(batch);
        batch = [];
      }
    }
    const record: ArtifactRecord = {
      ...(upload.name !== undefined ? { name: upload.name } : {}),
      ...(upload.mimeType !== undefined ? { mime_type: upload.mimeType } : {}),
      size,
      ...(upload.environmentId !== undefined ? { environment_id: upload.environmentId } : {}),
      chunks,
      seq,
    };
    // The description last: until it is written, no reader finds the artifact.
    batch.push(
      { put: `${keys.artifact(id)}m`, value: record },
      { put: place, value: { id, size, whole: true } },
    );
    await this.#store.write(batch);
  }

  /** Deletes the oldest whole artifact; false when there is none. */
  async #deleteOldest(): Promise<boolean> {
    const places = await this.#store.list<ArtifactPlace>(keys.artifactOrders, {
      limit: PLACES_PER_READ,
    });
    for (const [, place] of places) {
      if (place.whole && !this.#deleting.has(place.id) && await this.delete(place.id)) return true;
    }
    return false;
  }

  async get(artifactId: string): Promise<StoredArtifact | undefined> { // An id this store never gave names no artifact (and is no reason to read the store).
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
      const count = await this.#counted();
      const prefix = keys.artifact(artifactId);
      const record = await this.#store.get<ArtifactRecord>(`${prefix}m`);
      if (!record) return false;
      await this.#store.write([
        { deletePrefix: prefix },
        { delete: keys.artifactOrder(record.seq) },
      ]);
      count.bytes -= record.size;
      return true;
    } finally {
      this.#deleting.delete(artifactId);
    }
  }
}
