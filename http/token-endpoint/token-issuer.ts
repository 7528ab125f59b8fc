/**
 * The self-hosted token endpoint (http.md "Token exchange"): configured environment keys and
 * machine tokens are exchanged for HS256 JWTs valid five minutes, and the same issuer verifies
 * those JWTs on connect, on `executor.token.refresh` and on artifact uploads.
 */
import type { Clock } from "../../protocol/clock.ts";
import { TokenRejectedError } from "../../harness/errors.ts";
import { LocalError } from "../../protocol/errors.ts";
import { HmacJwt, type JwtClaims } from "./jwt.ts";
import { hex } from "../../protocol/ids.ts";
import { sameBytes, sha256 } from "../shared/bearer.ts";
import { isHeaderSafe } from "../../transport/header-safe.ts";
import type { CredentialScope, Principal } from "../../harness/principal.ts";

/** An environment key accepted by the endpoint. */
export interface EnvironmentCredential {
  /** The environment the key belongs to. */
  readonly environmentId: string;
  /** The secret key. */
  readonly environmentKey: string;
  /** Opaque id put in the token's `cred` claim. Default: derived from a hash of the key. */
  readonly id?: string;
}

/** A machine token accepted by the endpoint; its executor id is `exec_<machineId>`. */
export interface MachineCredential {
  /** The machine the token belongs to. */
  readonly machineId: string;
  /** The secret token. */
  readonly machineToken: string;
  /** Opaque id put in the token's `cred` claim. Default: derived from a hash of the token. */
  readonly id?: string;
}

/** A credential the token endpoint exchanges. */
export type ExecutorCredential = EnvironmentCredential | MachineCredential;

/**
 * A credential no request could ever match, refused when the harness is made: an empty id or
 * secret, or a secret with whitespace or a control character, which an `Authorization: Bearer`
 * header cannot carry. The message names the credential by its place and field, never its secret.
 */
export class InvalidCredentialError extends LocalError {
  /** The credential's place in the list, from 1. */
  readonly index: number;
  /** `index` and what is wrong with it. */
  constructor(index: number, problem: string) {
    super(`credential ${index}: ${problem}`);
    this.name = "InvalidCredentialError";
    this.index = index;
  }
}

/** What makes `credential` one no request could match, or `undefined` when it can be used. */
export function credentialProblem(credential: ExecutorCredential): string | undefined {
  const [ownerField, owner, secretField, secret] = "machineId" in credential
    ? ["machineId", credential.machineId, "machineToken", credential.machineToken]
    : ["environmentId", credential.environmentId, "environmentKey", credential.environmentKey];
  if (typeof owner !== "string" || owner === "") return `its ${ownerField} is empty`;
  if (typeof secret !== "string" || secret === "") return `its ${secretField} is empty`;
  if (!isHeaderSafe(secret)) {
    return `its ${secretField} holds whitespace, a control character or one beyond ASCII, ` +
      `which an Authorization header cannot carry`;
  }
  if (credential.id !== undefined && (typeof credential.id !== "string" || credential.id === "")) {
    return "its id is empty";
  }
  return undefined;
}

/** Options of the self-hosted token endpoint (`HarnessOptions.tokens`). */
export interface TokenEndpointOptions {
  /** The HS256 signing secret, at least 32 bytes. Never logged. */
  readonly secret: string | Uint8Array;
  /** The credentials it exchanges. */
  readonly credentials: readonly ExecutorCredential[];
  /** The `iss` claim, checked on verify. Default `"bma-harness"`. */
  readonly issuer?: string;
  /** Token lifetime in seconds. Default 300 (5 minutes). */
  readonly ttlSeconds?: number;
  /**
   * The WebSocket URL returned as `url`. Default: the request's origin with `ws:`/`wss:` and
   * the path `/v1/executors/connect`.
   */
  readonly connectUrl?: string;
}

/** The 200 body of a token exchange (http.md). */
export interface TokenResponse {
  /** The executor JWT. */
  token: string;
  /** When it expires (ISO date-time). */
  expires_at: string;
  /** Its lifetime in seconds. */
  expires_in: number;
  /** The WebSocket URL to connect to with it. */
  url: string;
  /** The executor id a machine token is bound to. */
  executor_id?: string;
}

/** The default token lifetime: five minutes. */
export const DEFAULT_TOKEN_TTL_SECONDS = 300;
const DEFAULT_ISSUER = "bma-harness";

interface StoredCredential {
  readonly scope: CredentialScope;
  /** Environment id or machine id. */
  readonly owner: string;
  readonly digest: Uint8Array;
  readonly id: string;
}

/** Issues and verifies executor tokens. */
export class TokenIssuer {
  readonly #jwt: Promise<HmacJwt>;
  readonly #credentials: Promise<StoredCredential[]>;
  readonly #clock: Clock;
  readonly #issuer: string;
  readonly #ttlSeconds: number;
  readonly #connectUrl: string | undefined;

  /** An issuer of `options.credentials` whose expiry times come from `clock`. */
  constructor(options: TokenEndpointOptions, clock: Clock) {
    this.#clock = clock;
    this.#issuer = options.issuer ?? DEFAULT_ISSUER;
    this.#ttlSeconds = options.ttlSeconds ?? DEFAULT_TOKEN_TTL_SECONDS;
    this.#connectUrl = options.connectUrl;
    const ids = new Set<string>();
    for (const [i, credential] of options.credentials.entries()) {
      const problem = credentialProblem(credential);
      if (problem !== undefined) throw new InvalidCredentialError(i + 1, problem);
      // A token names its credential by id: two credentials of one id would be one principal.
      if (credential.id !== undefined) {
        if (ids.has(credential.id)) {
          throw new InvalidCredentialError(
            i + 1,
            `its id ${credential.id} is used by another credential`,
          );
        }
        ids.add(credential.id);
      }
    }
    this.#jwt = HmacJwt.create(options.secret);
    // Only digests are kept: the comparison below runs on equal-length hashes.
    this.#credentials = Promise.all(options.credentials.map(storeCredential));
    // A bad secret surfaces on first use; keep the rejection from going unhandled meanwhile.
    this.#jwt.catch(() => {});
  }

  /**
   * Exchanges `secret` (an environment key for `scope: "environment"`, a machine token for
   * `"machine"`) of `owner` (environment or machine id). Resolves with `undefined` when the
   * credential is unknown or wrong.
   */
  async exchange(
    scope: CredentialScope,
    owner: string,
    secret: string,
    requestUrl: URL,
  ): Promise<TokenResponse | undefined> {
    const digest = await sha256(`${scope}\u0000${owner}\u0000${secret}`);
    let match: StoredCredential | undefined;
    for (const credential of await this.#credentials) {
      // Every candidate is compared, so the time taken does not reveal which one matched.
      // (Digests of equal length: `sameBytes` looks at every byte.)
      if (sameBytes(credential.digest, digest)) match = credential;
    }
    if (!match) return undefined;
    const now = this.#clock.now();
    const iat = Math.floor(now / 1000);
    const exp = iat + this.#ttlSeconds;
    const executorId = scope === "machine" ? `exec_${owner}` : undefined;
    const claims: JwtClaims = {
      iss: this.#issuer,
      scope,
      cred: match.id,
      iat,
      exp,
      ...(scope === "machine" ? { sub: executorId, mid: owner } : { env: owner }),
    };
    const token = await (await this.#jwt).sign(claims);
    return {
      token,
      expires_at: new Date(exp * 1000).toISOString(),
      expires_in: this.#ttlSeconds,
      url: this.#connectUrl ?? defaultConnectUrl(requestUrl),
      ...(executorId ? { executor_id: executorId } : {}),
    };
  }

  /** Verifies a token this issuer signed; rejects with {@linkcode TokenRejectedError}. */
  async verify(token: string): Promise<Principal> {
    const claims = await (await this.#jwt).verify(token, {
      now: this.#clock.now(),
      issuer: this.#issuer,
    });
    const cred = typeof claims.cred === "string" ? claims.cred : undefined;
    // A token outlives the credential it was issued for only until it expires, unless checked:
    // a harness restarted without a key refuses the tokens that key got (from it or a replica).
    // A harness given no credentials verifies tokens issued elsewhere, and has none to check.
    const known = await this.#credentials;
    const owner = claims.scope === "machine" ? claims.mid : claims.env;
    if (
      known.length > 0 &&
      !known.some((c) => c.id === cred && c.scope === claims.scope && c.owner === owner)
    ) {
      throw new TokenRejectedError("credential");
    }
    if (claims.scope === "machine" && typeof claims.mid === "string" && claims.mid && cred) {
      return {
        scope: "machine",
        machineId: claims.mid,
        executorId: `exec_${claims.mid}`,
        credentialId: cred,
        expiresAt: claims.exp! * 1000,
      };
    }
    if (claims.scope === "environment" && typeof claims.env === "string" && claims.env && cred) {
      return {
        scope: "environment",
        environmentId: claims.env,
        credentialId: cred,
        expiresAt: claims.exp! * 1000,
      };
    }
    throw new TokenRejectedError("claims");
  }
}

async function storeCredential(credential: ExecutorCredential): Promise<StoredCredential> {
  const [scope, owner, secret] = "machineId" in credential
    ? ["machine" as const, credential.machineId, credential.machineToken]
    : ["environment" as const, credential.environmentId, credential.environmentKey];
  const digest = await sha256(`${scope}\u0000${owner}\u0000${secret}`);
  // The default id is a prefix of the digest: stable across restarts, useless to recover the secret.
  const id = credential.id ?? `cred_${hex(digest).slice(0, 16)}`;
  return { scope, owner, digest, id };
}

function defaultConnectUrl(requestUrl: URL): string {
  const scheme = requestUrl.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${requestUrl.host}/v1/executors/connect`;
}
