/**
 * Artifact upload (protocol/contract/http.md): `POST {base}/v1/environments/{environment_id}/artifacts`,
 * falling back to the legacy alias `POST {base}/v1/executors/artifacts`, with the executor JWT.
 */
import type { Artifact } from "../protocol/generated/contract.ts";
import type { TokenCache } from "./credentials.ts";
import { ArtifactUploadError, ExecutorConfigError } from "./errors.ts";
import type { FetchFunction } from "./options.ts";
import type { Clock } from "../protocol/clock.ts";
import { backoffDelay, type BackoffPolicy, sleep, wakeableSleep } from "../protocol/retry.ts";
import type { SecretScrubber } from "./secrets.ts";

/**
 * Bytes read as they are sent (a file streamed rather than held): a function that opens a fresh
 * stream of them for each attempt, since an upload may be sent twice (to the environment's path,
 * then the legacy alias).
 */
export type ArtifactByteStream = () => ReadableStream<Uint8Array>;

/** What to upload. */
export interface ArtifactUpload {
  /** File name shown to users (sent URI-encoded in `x-artifact-name`). */
  name: string;
  /** The bytes, text sent as UTF-8, or a stream of the bytes opened for each attempt. */
  data: Uint8Array | ArrayBuffer | Blob | string | ArtifactByteStream;
  /** MIME type. Default `text/plain; charset=utf-8` for text, else `application/octet-stream`. */
  mimeType?: string;
  /** Aborts the upload: it rejects with `RequestAbortedError`. */
  signal?: AbortSignal;
}

/**
 * Attempts of one upload: a failure that may pass (no answer, HTTP 408, 429 or 5xx but 501 and
 * 507: a harness restarting, a standby answering 503 while the holder takes over) is tried again
 * after the client's backoff (with the default, about 45 s of attempts: a restart or a failover
 * takes seconds), at once when the client has registered again meanwhile, before the result goes
 * without its artifact.
 */
export const UPLOAD_ATTEMPTS = 10;

/** Whether an upload that failed with `error` may succeed when sent again. */
function mayPass(error: unknown): boolean {
  if (!(error instanceof ArtifactUploadError)) return false;
  const status = error.status;
  if (status === undefined) return true;
  return status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 507);
}

/** How an upload that may pass is waited out. */
interface UploadRetry {
  clock: Clock;
  random: () => number;
  policy: BackoffPolicy;
  /** Ends a wait when it settles: the client registered again (the harness is back). */
  wake?: (signal: AbortSignal) => Promise<void>;
}

/** Uploads artifacts for one client. */
export class ArtifactUploader {
  readonly #baseUrl: string | undefined;
  readonly #environmentId: string;
  readonly #fetch: FetchFunction | undefined;
  readonly #tokens: Pick<TokenCache, "current">;
  readonly #scrubber: SecretScrubber;
  readonly #retry: UploadRetry | undefined;
  #legacyOnly = false;

  constructor(deps: {
    baseUrl: string | undefined;
    environmentId: string;
    fetch: FetchFunction | undefined;
    tokens: Pick<TokenCache, "current">;
    scrubber: SecretScrubber;
    /** How a failure that may pass is waited out; without it, an upload is tried once. */
    retry?: UploadRetry;
  }) {
    this.#baseUrl = deps.baseUrl;
    this.#environmentId = deps.environmentId;
    this.#fetch = deps.fetch ??
      (globalThis.fetch?.bind(globalThis) as FetchFunction | undefined);
    this.#tokens = deps.tokens;
    this.#scrubber = deps.scrubber;
    this.#retry = deps.retry;
    // A machine-scoped executor has no environment path.
    this.#legacyOnly = !deps.environmentId;
  }

  /** Whether an artifact endpoint is configured at all. */
  get available(): boolean {
    return this.#baseUrl !== undefined && this.#fetch !== undefined;
  }

  /** Uploads one artifact and returns its record, trying again what may pass. */
  async upload(upload: ArtifactUpload): Promise<Artifact> {
    for (let attempt = 1;; attempt++) {
      try {
        return await this.#uploadOnce(upload);
      } catch (error) {
        const retry = this.#retry;
        if (!retry || attempt >= UPLOAD_ATTEMPTS || !mayPass(error)) throw error;
        const delay = backoffDelay(retry.policy, attempt, retry.random);
        if (retry.wake) await wakeableSleep(retry.clock, delay, retry.wake, upload.signal);
        else await sleep(retry.clock, delay, upload.signal);
      }
    }
  }

  async #uploadOnce(upload: ArtifactUpload): Promise<Artifact> {
    if (!this.#baseUrl || !this.#fetch) {
      throw new ExecutorConfigError("artifact upload needs baseUrl (and a fetch function)");
    }
    const data = upload.data;
    const text = typeof data === "string";
    const fixed: BodyInit | undefined = typeof data === "function"
      ? undefined
      : text
      ? new TextEncoder().encode(data)
      : data as BodyInit;
    // A stream of our own opening is read through a reader kept here, so that an attempt
    // answered without it being read (a 404, a 503) lets go of it (a file left open otherwise).
    let opened: ReadableStreamDefaultReader<Uint8Array> | undefined;
    const body = (): BodyInit => {
      if (fixed !== undefined) return fixed;
      const reader = opened = (data as ArtifactByteStream)().getReader();
      return new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        },
        cancel: (reason) => reader.cancel(reason),
      });
    };
    const letGo = () => {
      void opened?.cancel().catch(() => {});
      opened = undefined;
    };
    const mimeType = upload.mimeType ??
      (text ? "text/plain; charset=utf-8" : "application/octet-stream");
    const token = await this.#tokens.current(upload.signal);
    const headers: Record<string, string> = {
      "content-type": mimeType,
      "x-artifact-name": encodeURIComponent(upload.name),
      accept: "application/json",
    };
    if (token) headers.authorization = `Bearer ${token}`;
    const post = async (path: string) => {
      const response = await this.#post(`${this.#baseUrl}${path}`, headers, body, upload);
      if (response.status !== 200 && response.status !== 201) letGo();
      return response;
    };
    try {
      if (!this.#legacyOnly) {
        const response = await post(
          `/v1/environments/${encodeURIComponent(this.#environmentId)}/artifacts`,
        );
        if (response.status !== 404) return await this.#read(response, upload.name);
        await response.body?.cancel().catch(() => {});
        this.#legacyOnly = true;
      }
      return await this.#read(await post("/v1/executors/artifacts"), upload.name);
    } catch (error) {
      letGo();
      throw error;
    }
  }

  async #post(
    url: string,
    headers: Record<string, string>,
    body: () => BodyInit,
    upload: ArtifactUpload,
  ): Promise<Response> {
    try {
      // Never redirected: a redirect would take the bytes (and the token) elsewhere; and Node's
      // fetch, unless told a redirect is an error, clones the request to be able to follow one,
      // which keeps a copy of every byte of the body until the upload ends (a 1 GiB output held
      // whole while it was sent).
      const init = {
        method: "POST",
        headers,
        body: body(),
        signal: upload.signal,
        redirect: "error" as const,
      };
      // A stream is sent as it is read: fetch takes it only as a half-duplex body.
      if (init.body instanceof ReadableStream) Object.assign(init, { duplex: "half" });
      return await this.#fetch!(url, init);
    } catch (error) {
      if (upload.signal?.aborted) throw upload.signal.reason;
      throw new ArtifactUploadError("the artifact endpoint is unreachable", undefined, {
        cause: new Error(this.#scrubber.scrub(String((error as Error)?.message ?? error))),
      });
    }
  }

  async #read(response: Response, name: string): Promise<Artifact> {
    if (response.status !== 200 && response.status !== 201) {
      await response.body?.cancel().catch(() => {});
      throw new ArtifactUploadError(
        `the artifact endpoint answered HTTP ${response.status}`,
        response.status,
      );
    }
    let parsed: Record<string, unknown>;
    try {
      parsed = await response.json() as Record<string, unknown>;
    } catch {
      throw new ArtifactUploadError("the artifact endpoint sent a body that is not JSON", 201);
    }
    if (typeof parsed?.artifact_id !== "string" || !parsed.artifact_id) {
      throw new ArtifactUploadError("the artifact endpoint sent no artifact_id", response.status);
    }
    const artifact: Artifact = { artifact_id: parsed.artifact_id, name };
    if (typeof parsed.name === "string") artifact.name = parsed.name;
    if (typeof parsed.size === "number" && Number.isInteger(parsed.size) && parsed.size >= 0) {
      artifact.size = parsed.size;
    }
    if (typeof parsed.mime_type === "string") artifact.mime_type = parsed.mime_type;
    if (typeof parsed.url === "string" && isUrl(parsed.url)) artifact.url = parsed.url;
    return artifact;
  }
}

function isUrl(text: string): boolean {
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}
