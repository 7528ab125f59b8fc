/**
 * Artifacts uploaded by executors (http.md "Artifacts"): large tool output goes here first and
 * `tool.result` references it with an artifact content block.
 */
import type { Artifact } from "../protocol/generated/contract.ts";
import { randomId } from "../protocol/ids.ts";

/** An artifact to store. */
export interface ArtifactUpload {
  /** File name (from `x-artifact-name`). */
  readonly name?: string;
  /** MIME type (from `content-type`). */
  readonly mimeType?: string;
  /** The bytes. */
  readonly bytes: Uint8Array;
  /** The environment it was uploaded for (path of the upload), if any. */
  readonly environmentId?: string;
}

/** A stored artifact with its bytes. */
export interface StoredArtifact extends Artifact {
  /** The uploaded bytes. */
  readonly bytes: Uint8Array;
  /** The environment it was uploaded for, if any. */
  readonly environment_id?: string;
}

/** Where uploaded artifacts go. */
export interface ArtifactStore {
  /**
   * Stores an artifact; resolves with its description (the members of an `ArtifactBlock`).
   * Throwing {@linkcode ArtifactStoreFullError} refuses it with HTTP 507 (the executor then
   * reports its result with the preview only); any other error is HTTP 500.
   */
  put(upload: ArtifactUpload): Promise<Artifact>;
  /** Looks an artifact up by id. */
  get(artifactId: string): Promise<StoredArtifact | undefined>;
  /**
   * Forgets an artifact, freeing its room; resolves with whether it was stored. Optional: the
   * brain API's `DELETE /artifacts/{id}` answers 501 without it.
   */
  delete?(artifactId: string): Promise<boolean>;
}

/** The store has no room for an artifact: the upload is refused with HTTP 507. */
export class ArtifactStoreFullError extends Error {
  /** An error with `message` (default: the store is full). */
  constructor(message = "the artifact store is full") {
    super(message);
    this.name = "ArtifactStoreFullError";
  }
}

/** The default most bytes a {@linkcode MemoryArtifactStore} holds: 1 GiB. */
export const DEFAULT_MAX_STORED_ARTIFACT_BYTES = 1024 * 1024 * 1024;

/** Options of a {@linkcode MemoryArtifactStore}. */
export interface MemoryArtifactStoreOptions {
  /**
   * Most bytes held at once; an upload beyond it is refused (HTTP 507) rather than evicting
   * what earlier results point at. Default 1 GiB. Free room with `delete`.
   */
  maxBytes?: number;
}

/**
 * Keeps artifacts in memory (the default): for tests, local brains and small deployments. What
 * it holds stays readable until deleted; beyond `maxBytes` new uploads are refused.
 */
export class MemoryArtifactStore implements ArtifactStore {
  readonly #artifacts = new Map<string, StoredArtifact>();
  readonly #maxBytes: number;
  #bytes = 0;

  /** An empty store holding at most `options.maxBytes`. */
  constructor(options: MemoryArtifactStoreOptions = {}) {
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_STORED_ARTIFACT_BYTES;
  }

  put(upload: ArtifactUpload): Promise<Artifact> {
    if (this.#bytes + upload.bytes.byteLength > this.#maxBytes) {
      return Promise.reject(new ArtifactStoreFullError());
    }
    this.#bytes += upload.bytes.byteLength;
    const artifact: Artifact = {
      artifact_id: randomId("art_"),
      ...(upload.name !== undefined ? { name: upload.name } : {}),
      size: upload.bytes.byteLength,
      ...(upload.mimeType !== undefined ? { mime_type: upload.mimeType } : {}),
    };
    this.#artifacts.set(artifact.artifact_id, {
      ...artifact,
      bytes: upload.bytes,
      ...(upload.environmentId !== undefined ? { environment_id: upload.environmentId } : {}),
    });
    return Promise.resolve(artifact);
  }

  get(artifactId: string): Promise<StoredArtifact | undefined> {
    return Promise.resolve(this.#artifacts.get(artifactId));
  }

  /** Forgets an artifact (its room is free again); resolves with whether it was stored. */
  delete(artifactId: string): Promise<boolean> {
    const artifact = this.#artifacts.get(artifactId);
    if (!artifact) return Promise.resolve(false);
    this.#artifacts.delete(artifactId);
    this.#bytes -= artifact.bytes.byteLength;
    return Promise.resolve(true);
  }

  /** How many artifacts are stored. */
  get size(): number {
    return this.#artifacts.size;
  }

  /** How many bytes they hold. */
  get bytes(): number {
    return this.#bytes;
  }
}
