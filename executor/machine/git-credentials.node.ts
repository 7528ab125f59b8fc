/**
 * `git.credentials`: the Git credentials of each session, kept by the executor for git in the
 * session's commands.
 */
import type {
  GitCredentialsParams,
  GitCredentialsResult,
} from "../../protocol/generated/contract.ts";

/**
 * Git credentials of the sessions, in memory only: handed to git through the environment of
 * the session's commands (a credential helper that reads the secret from an environment
 * variable), dropped when the session ends or at `expires_at`.
 */
export class GitCredentialStore {
  readonly #bySession = new Map<string, Map<string, GitCredentialsParams>>();

  /** `git.credentials`. */
  store(params: GitCredentialsParams): GitCredentialsResult {
    let hosts = this.#bySession.get(params.session_id);
    if (!hosts) this.#bySession.set(params.session_id, hosts = new Map());
    hosts.set(`${params.protocol ?? "https"}://${params.host}`, params);
    return { stored: true, host: params.host };
  }

  /** Drops a session's credentials. */
  drop(sessionId: string): void {
    this.#bySession.delete(sessionId);
  }

  /** Environment variables that let git in the session's commands use its credentials. */
  env(sessionId: string, now: number = Date.now()): Record<string, string> {
    const env: Record<string, string> = {};
    const valid = [...(this.#bySession.get(sessionId)?.entries() ?? [])]
      .filter(([, c]) => !c.expires_at || Date.parse(c.expires_at) > now);
    if (valid.length === 0) return env;
    env.GIT_CONFIG_COUNT = String(valid.length);
    valid.forEach(([url, credential], i) => {
      env[`BMA_GIT_USERNAME_${i}`] = credential.username ?? "x-access-token";
      env[`BMA_GIT_PASSWORD_${i}`] = credential.password;
      env[`GIT_CONFIG_KEY_${i}`] = `credential.${url}.helper`;
      // The helper prints the secret from the environment: it is never written to disk.
      env[`GIT_CONFIG_VALUE_${i}`] =
        `!f() { test "$1" = get && echo "username=$BMA_GIT_USERNAME_${i}" && echo "password=$BMA_GIT_PASSWORD_${i}"; }; f`;
    });
    return env;
  }
}
