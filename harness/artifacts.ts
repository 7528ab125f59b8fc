/**
 * Artifacts uploaded by executors (http.md "Artifacts"): large tool output goes here first and
 * `tool.result` references it with an artifact content block.
 */
import type { Artifact } from "../protocol/generated/contract.ts";
import { randomId } from "./token-endpoint.ts";

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
  /** Stores an artifact; resolves with its description (the members of an `ArtifactBlock`). */
  put(upload: ArtifactUpload): Promise<Artifact>;
  /** Looks an artifact up by id. */
  get(artifactId: string): Promise<StoredArtifact | undefined>;
}

/** Keeps artifacts in memory (the default): for tests, local brains and small deployments. */
export class MemoryArtifactStore implements ArtifactStore {
  readonly #artifacts = new Map<string, StoredArtifact>();

  put(upload: ArtifactUpload): Promise<Artifact> {
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

  /** How many artifacts are stored. */
  get size(): number {
    return this.#artifacts.size;
  }
}
