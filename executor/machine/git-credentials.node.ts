/**
 * `git.credentials`: the Git credentials of each session, in the executor's memory only, served
 * to git in the session's processes through git's credential-helper protocol.
 *
 * Each session that holds credentials gets a Unix socket of its own, in a private directory
 * (mode 0700) the executor creates, with an unguessable name. The socket speaks the protocol of
 * git's own `credential-cache` daemon, so the helper is git's built-in `git credential-cache
 * --socket <path>` and no program of ours runs in the session: the session's processes get
 * `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` naming that helper for each host (the
 * socket path is in their environment, the password never is). A later call for the same host
 * replaces the credential; the session's end drops them all and removes the socket; `expires_at`
 * drops one when it passes.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { chmod } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {
  GitCredentialsParams,
  GitCredentialsResult,
} from "../../protocol/generated/contract.ts";
import { InvalidParamsError } from "../../protocol/generated/errors.ts";
import type { Logger } from "../../protocol/logger.ts";
import { concatBytes } from "../../transport/bytes.ts";

/** Options of a {@linkcode GitCredentialStore}. */
export interface GitCredentialStoreOptions {
  /** Where the private socket directory is created. Default: the system's temp directory. */
  parentDir?: string;
  logger?: Logger;
}

interface Credential {
  readonly protocol: string;
  readonly host: string;
  /** The repository path it is scoped to, normalized (no slashes around, no `.git`). */
  readonly path: string | undefined;
  readonly username: string;
  readonly password: string;
  readonly expiresAt: number | undefined;
  timer?: ReturnType<typeof setTimeout>;
}

interface SessionCredentials {
  readonly credentials: Map<string, Credential>;
  readonly socketPath: string;
  readonly server: Server;
  readonly listening: Promise<void>;
  readonly connections: Set<Socket>;
}

/** The longest request git sends to a helper that is read (it is a few hundred bytes). */
const MAX_REQUEST_BYTES = 64 * 1024;

/** The Git credentials of the sessions, served to git over per-session sockets. */
export class GitCredentialStore {
  readonly #sessions = new Map<string, SessionCredentials>();
  readonly #options: GitCredentialStoreOptions;
  #dir: string | undefined;

  constructor(options: GitCredentialStoreOptions = {}) {
    this.#options = options;
  }

  /** `git.credentials`: resolves once git in the session can be served. */
  async store(params: GitCredentialsParams): Promise<GitCredentialsResult> {
    const expiresAt = params.expires_at === undefined ? undefined : Date.parse(params.expires_at);
    if (expiresAt !== undefined && Number.isNaN(expiresAt)) {
      throw new InvalidParamsError("expires_at is not a date-time", { field: "/expires_at" });
    }
    if (
      /[\n\0]/.test(params.host + params.password + (params.username ?? "") + (params.path ?? ""))
    ) {
      throw new InvalidParamsError("credential fields cannot hold newlines or NUL");
    }
    const session = this.#session(params.session_id);
    const credential: Credential = {
      protocol: params.protocol ?? "https",
      host: params.host.toLowerCase(),
      path: normalizePath(params.path),
      username: params.username ?? "x-access-token",
      password: params.password,
      expiresAt,
    };
    const key = keyOf(credential.protocol, credential.host, credential.path);
    clearTimeout(session.credentials.get(key)?.timer);
    session.credentials.set(key, credential);
    if (expiresAt !== undefined) {
      const drop = () => {
        if (session.credentials.get(key) === credential) session.credentials.delete(key);
      };
      const delay = expiresAt - Date.now();
      if (delay <= 0) drop();
      // Timers hold at most ~24.8 days; a later expiry is also checked on every request.
      else if (delay < 2 ** 31) {
        credential.timer = setTimeout(drop, delay);
        // An expiry alone keeps no process running.
        (credential.timer as { unref?: () => void }).unref?.();
      }
    }
    await session.listening;
    return { stored: true, host: params.host };
  }

  /** Drops a session's credentials and closes its socket. */
  async drop(sessionId: string): Promise<void> {
    const session = this.#sessions.get(sessionId);
    if (!session) return;
    this.#sessions.delete(sessionId);
    for (const credential of session.credentials.values()) clearTimeout(credential.timer);
    session.credentials.clear();
    for (const socket of session.connections) socket.destroy();
    await session.listening.catch(() => {});
    await new Promise<void>((resolve) => session.server.close(() => resolve()));
    rmSync(session.socketPath, { force: true });
  }

  /** Drops every session's credentials and removes the private directory. */
  async close(): Promise<void> {
    await Promise.all([...this.#sessions.keys()].map((id) => this.drop(id)));
    if (this.#dir) rmSync(this.#dir, { recursive: true, force: true });
    this.#dir = undefined;
  }

  /** Whether `value` contains a password the store holds (for the child environment guard). */
  containsSecret(value: string): boolean {
    for (const session of this.#sessions.values()) {
      for (const credential of session.credentials.values()) {
        if (credential.password.length >= 4 && value.includes(credential.password)) return true;
      }
    }
    return false;
  }

  /**
   * `env` with the session's credential helper configured for each host it holds credentials
   * for, after any `GIT_CONFIG_*` entries `env` has. For each host the helper list is reset
   * first, so that no helper of the user's own configuration answers before the executor.
   */
  configure(sessionId: string, env: Record<string, string>): Record<string, string> {
    const session = this.#sessions.get(sessionId);
    if (!session || session.credentials.size === 0) return env;
    const now = Date.now();
    const hosts = new Map<string, boolean>();
    for (const credential of session.credentials.values()) {
      if (credential.expiresAt !== undefined && credential.expiresAt <= now) continue;
      const url = `${credential.protocol}://${credential.host}`;
      hosts.set(url, (hosts.get(url) ?? false) || credential.path !== undefined);
    }
    if (hosts.size === 0) return env;
    const out = { ...env };
    let count = Number(out.GIT_CONFIG_COUNT ?? 0);
    if (!Number.isInteger(count) || count < 0) count = 0;
    const add = (key: string, value: string) => {
      out[`GIT_CONFIG_KEY_${count}`] = key;
      out[`GIT_CONFIG_VALUE_${count}`] = value;
      count++;
    };
    const helper = `cache --socket ${shellQuote(session.socketPath)}`;
    for (const [url, scoped] of hosts) {
      add(`credential.${url}.helper`, "");
      add(`credential.${url}.helper`, helper);
      // A credential scoped to a repository path needs git to say which repository it wants.
      if (scoped) add(`credential.${url}.useHttpPath`, "true");
    }
    out.GIT_CONFIG_COUNT = String(count);
    return out;
  }

  #session(sessionId: string): SessionCredentials {
    const existing = this.#sessions.get(sessionId);
    if (existing) return existing;
    const socketPath = join(this.#directory(), `${randomBytes(12).toString("hex")}.sock`);
    const connections = new Set<Socket>();
    const credentials = new Map<string, Credential>();
    const server = createServer((socket) => {
      connections.add(socket);
      socket.once("close", () => connections.delete(socket));
      this.#serve(socket, credentials);
    });
    const listening = new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => {
        server.off("error", reject);
        resolve();
      });
    }).then(() => chmod(socketPath, 0o600));
    listening.catch((error) =>
      this.#options.logger?.warn("git credential socket not listening", { error: String(error) })
    );
    const session: SessionCredentials = {
      credentials,
      socketPath,
      server,
      listening,
      connections,
    };
    this.#sessions.set(sessionId, session);
    return session;
  }

  #directory(): string {
    // mkdtemp creates the directory with mode 0700.
    return this.#dir ??= mkdtempSync(join(this.#options.parentDir ?? tmpdir(), "bma-git-"));
  }

  /**
   * One request of git's credential-cache client: `action=<get|store|erase|exit>`,
   * `timeout=<s>`, then the credential's `key=value` lines; the client shuts down its end when
   * done and relays whatever comes back to git.
   */
  #serve(socket: Socket, credentials: Map<string, Credential>): void {
    const chunks: Uint8Array[] = [];
    let size = 0;
    socket.on("error", () => {});
    socket.on("data", (chunk: Uint8Array) => {
      size += chunk.byteLength;
      if (size > MAX_REQUEST_BYTES) socket.destroy();
      else chunks.push(chunk);
    });
    socket.on("end", () => {
      const request = parseRequest(new TextDecoder().decode(concatBytes(chunks, size)));
      let answer = "";
      if (request.get("action") === "get") {
        const found = match(credentials, request);
        if (found) answer = `username=${found.username}\npassword=${found.password}\n`;
      }
      // store/erase/exit: the executor's memory is the only store; nothing to do.
      socket.end(answer);
    });
  }
}

function parseRequest(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0 && !fields.has(line.slice(0, eq))) fields.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return fields;
}

/** The credential for git's request: the one for its repository path first, else the host's. */
function match(
  credentials: Map<string, Credential>,
  request: Map<string, string>,
): Credential | undefined {
  const protocol = request.get("protocol");
  const host = request.get("host")?.toLowerCase();
  if (!protocol || !host) return undefined;
  const path = normalizePath(request.get("path"));
  const now = Date.now();
  const valid = (c: Credential | undefined) =>
    c && (c.expiresAt === undefined || c.expiresAt > now) ? c : undefined;
  return (path !== undefined ? valid(credentials.get(keyOf(protocol, host, path))) : undefined) ??
    valid(credentials.get(keyOf(protocol, host, undefined)));
}

function keyOf(protocol: string, host: string, path: string | undefined): string {
  return `${protocol}://${host}/${path ?? ""}`;
}

function normalizePath(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  const trimmed = path.replace(/^\/+|\/+$/g, "").replace(/\.git$/, "");
  return trimmed || undefined;
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
