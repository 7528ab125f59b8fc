/** Who is connecting: the request `authenticate` judges and the principal it returns. */

/** The scope of an executor credential (http.md): an environment key or a machine token. */
export type CredentialScope = "environment" | "machine";

/**
 * What `authenticate` established about a connection. Every member is optional: a harness
 * used in-process or on a private socket authenticates nobody and gets `{}`.
 */
export interface Principal {
  /** The credential's scope. An environment principal must register with its environment id. */
  readonly scope?: CredentialScope;
  /** The environment the credential belongs to (environment scope). */
  readonly environmentId?: string;
  /** The machine the credential belongs to (machine scope): the executor id is `exec_<machineId>`. */
  readonly machineId?: string;
  /** An opaque id of the exchanged credential; a refreshed token must name the same one. */
  readonly credentialId?: string;
  /** The executor id the credential is bound to (machine tokens: `exec_<machineId>`). */
  readonly executorId?: string;
  /**
   * When the token expires (ms since the epoch, or a Date): the connection closes with 4001
   * then, unless `executor.token.refresh` moves the deadline. Absent: no deadline.
   */
  readonly expiresAt?: number | Date;
}

/** What a connection attempt (or a token refresh, or an artifact upload) presents. */
export interface ConnectRequest {
  /** `connect`: a WebSocket upgrade; `refresh`: `executor.token.refresh`; `artifact`: an upload. */
  readonly kind: "connect" | "refresh" | "artifact";
  /** The bearer token (`authorization: Bearer ...` or the `access_token` query parameter). */
  readonly token: string | undefined;
  /** The request URL (for `refresh`, the URL the connection was opened with). Never log it whole. */
  readonly url: URL;
  /** The request headers. */
  readonly headers: Headers;
  /** The subprotocols the client offered (connect only). */
  readonly protocols: readonly string[];
}

/**
 * Decides on a connection: returns its principal, or throws (or rejects) to refuse it — HTTP 401
 * before the upgrade, or -32001 `token_invalid` for a refresh.
 */
export type Authenticate = (request: ConnectRequest) => Principal | Promise<Principal>;

/** The bearer token of a request: the `authorization` header, else `?access_token=`. */
export function bearerToken(headers: Headers, url: URL): string | undefined {
  const header = headers.get("authorization");
  if (header) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match ? match[1] : undefined;
  }
  return url.searchParams.get("access_token") ?? undefined;
}

/** A principal's expiry in ms since the epoch, if any. */
export function expiryOf(principal: Principal): number | undefined {
  const at = principal.expiresAt;
  if (at === undefined) return undefined;
  return at instanceof Date ? at.getTime() : at;
}
