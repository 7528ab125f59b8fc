/**
 * Who is connecting: the request `authenticate` judges, the principal it returns, and the rules
 * that bind a registration to its principal (pure functions: the harness and the edge apply
 * them the same way).
 */
import { bearer } from "../http/shared/bearer.ts";

/** The scope of an executor credential (http.md): an environment key or a machine token. */
export type CredentialScope = "environment" | "machine";

/**
 * What `authenticate` established about a connection: the identity of its credential. The
 * executor's identity comes from here, never from what the peer sends: `executor.register`'s
 * `environment_id`, `machine_id` and `resume.executor_id` are claims the principal must allow
 * ({@linkcode registrationClaim}).
 *
 * - `machineId` binds the principal to one machine: it registers machine-scoped (empty
 *   `environment_id`, `machine_id` absent or equal) as `exec_<machineId>`, and nothing else.
 * - `environmentId` (without `machineId`) binds it to one environment: it registers there only.
 * - Neither: it registers in any environment under an id the harness generates, and may claim
 *   no machine (a machine-scoped register naming a `machine_id` is -32001 `forbidden`).
 * - An executor id (`exec_<machineId>`, `executorId`, or the generated id a `resume` asks to
 *   keep) belongs to the principal that registered it for as long as the harness holds that
 *   executor: another principal's registration for it is -32001 `forbidden` (machine ids) or
 *   gets a new id (resume), and the holder's connection stays. The same principal registering
 *   again replaces the older connection (close 4004).
 * - Two principals are the same identity when `scope`, `environmentId`, `machineId`,
 *   `credentialId` and `executorId` are all equal ({@linkcode samePrincipal}): return a distinct
 *   `credentialId` per credential, or every peer the function admits is one identity.
 *
 * Every member is optional. A harness that authenticates nobody (no `authenticate`: `serveUnix`,
 * `accept` without it, `insecureNoAuth`, and executors the harness dials) gives every
 * connection the empty principal and trusts what they register as, `machine_id` included: who
 * may connect decides (socket permissions, the process that called `accept`).
 */
export interface Principal {
  /** The credential's scope: `environment` registers in `environmentId`, `machine` as `machineId`. */
  readonly scope?: CredentialScope;
  /** The environment the credential belongs to: the only one it may register in. */
  readonly environmentId?: string;
  /** The machine the credential belongs to: the executor registers as `exec_<machineId>`. */
  readonly machineId?: string;
  /**
   * An opaque id of the credential (e.g. a key's id or a hash of it): tells principals apart,
   * and a refreshed token must name the same one.
   */
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
 * before the upgrade, or -32001 `token_invalid` for a refresh. The principal is the identity the
 * executor gets (see {@linkcode Principal}): bind a machine token to its machine with
 * `machineId`, an environment key to its environment with `environmentId`, and give each
 * credential its own `credentialId`.
 *
 * ```ts
 * const machines = new Map([["token-of-m1", "m1"]]); // your credential store
 * const harness = new Harness({
 *   authenticate: ({ token }) => {
 *     const machineId = token === undefined ? undefined : machines.get(token);
 *     if (!machineId) throw new Error("unknown credential"); // HTTP 401, no socket
 *     return { scope: "machine", machineId, credentialId: `machine:${machineId}` };
 *   },
 * });
 * ```
 *
 * `kind: "refresh"` (`executor.token.refresh`) must return the same identity for the same
 * credential; `kind: "artifact"` judges an artifact upload (its `environmentId`, when set, must
 * match the upload's environment).
 */
export type Authenticate = (request: ConnectRequest) => Principal | Promise<Principal>;

/**
 * Whether two principals are the same identity (scope, environment, machine, credential and
 * executor id all equal): only the same identity may refresh a connection's token, resume an
 * executor id, or replace its connection (4004).
 */
export function samePrincipal(a: Principal, b: Principal): boolean {
  return a === b ||
    (a.scope === b.scope && a.environmentId === b.environmentId &&
      a.machineId === b.machineId && a.credentialId === b.credentialId &&
      a.executorId === b.executorId);
}

/** The members of `executor.register` a principal is judged against. */
export interface RegistrationClaim {
  readonly environment_id: string;
  readonly machine_id?: string;
}

/**
 * What a registration may be, given its principal ({@linkcode registrationClaim}):
 * - `refused`: -32001 `forbidden`, with why;
 * - `fixed`: exactly this executor id (a machine's, or the principal's `executorId`);
 * - `assigned`: an id the harness generates, or the `resume.executor_id` the same principal
 *   registered before.
 */
export type RegistrationVerdict =
  | { readonly kind: "refused"; readonly why: string }
  | { readonly kind: "fixed"; readonly executorId: string }
  | { readonly kind: "assigned" };

/**
 * Judges what `executor.register` claims against the connection's principal. `trusted` is true
 * when no `authenticate` ran (a local harness: the socket decided who may connect), where a
 * `machine_id` is believed; otherwise only the principal names a machine.
 */
export function registrationClaim(
  principal: Principal,
  params: RegistrationClaim,
  trusted: boolean,
): RegistrationVerdict {
  const machineScoped = params.environment_id === "";
  const machineId = principal.machineId;
  if (principal.scope === "machine" || machineId !== undefined) {
    if (!machineId) return { kind: "refused", why: "the credential names no machine" };
    if (!machineScoped || (params.machine_id !== undefined && params.machine_id !== machineId)) {
      return { kind: "refused", why: "machine does not match the credential" };
    }
    return { kind: "fixed", executorId: principal.executorId ?? `exec_${machineId}` };
  }
  if (principal.scope === "environment" || principal.environmentId !== undefined) {
    if (!principal.environmentId || params.environment_id !== principal.environmentId) {
      return { kind: "refused", why: "environment does not match the credential" };
    }
  }
  if (machineScoped && params.machine_id) {
    if (!trusted) return { kind: "refused", why: "the credential names no machine" };
    return { kind: "fixed", executorId: principal.executorId ?? `exec_${params.machine_id}` };
  }
  if (principal.executorId) return { kind: "fixed", executorId: principal.executorId };
  return { kind: "assigned" };
}

/** The bearer token of a request: the `authorization` header, else `?access_token=`. */
export function bearerToken(headers: Headers, url: URL): string | undefined {
  const presented = bearer(headers);
  // A header decides alone: a malformed one ("") presents no token, whatever the query says.
  if (presented !== null) return presented || undefined;
  return url.searchParams.get("access_token") ?? undefined;
}

/** A principal's expiry in ms since the epoch, if any. */
export function expiryOf(principal: Principal): number | undefined {
  const at = principal.expiresAt;
  if (at === undefined) return undefined;
  return at instanceof Date ? at.getTime() : at;
}
