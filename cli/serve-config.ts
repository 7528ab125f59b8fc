/**
 * What `bma-harness serve` runs with, read from three places: its flags, the `BMA_*` environment
 * (the same variables the edge harness reads, `harness/workers/config.ts`) and a JSON config
 * file (`--config`, keys spelled as the flags). A flag wins over the environment, the
 * environment over the file. Every secret comes from a file or the environment, never from a
 * flag's value, so it is not in the process list or a shell's history.
 *
 * Pure: the files are read through an injected function, so the rules are tested without a disk.
 *
 * @module
 */
import { argOptions, shownValue } from "./argv.ts";
import { MAX_TIMER_MS } from "../protocol/clock.ts";
import { jsonSyntaxError } from "../protocol/logger.ts";
import { isConnectUrl, positiveInteger } from "../http/env-options.ts";
import { MIN_TOKEN_LENGTH } from "../http/shared/bearer.ts";

/** A configuration `bma-harness serve` cannot run with: exit code 2 and this message. */
export class ServeConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ServeConfigError";
  }
}

/** Where the harness keeps its state. */
export type StoreSpec =
  | { readonly kind: "memory" }
  | { readonly kind: "sqlite"; readonly path: string }
  | { readonly kind: "postgres"; readonly url: string; readonly table?: string };

/** What `serve` runs with. */
export interface ServeConfig {
  readonly host: string;
  readonly port: number;
  readonly unix: string | undefined;
  readonly store: StoreSpec;
  /**
   * The store's password was given in `--store`'s URL: every user of the machine reads it in
   * `ps` (the environment, a config file or PostgreSQL's own `PGPASSWORD`/`PGPASSFILE` do not).
   */
  readonly storePasswordInFlag: boolean;
  /** Wait while another harness holds the store, then take it over once that one is gone. */
  readonly standby: boolean;
  /** Claim the store even from a live holder (it is fenced). */
  readonly takeover: boolean;
  readonly logFormat: "text" | "json";
  /** How long a drain (the first SIGTERM or SIGINT) may take before the process exits. */
  readonly shutdownGraceMs: number;
  /** How often the holder renews its claim on the store (the lease is three times that). */
  readonly storeRenewMs: number | undefined;
  /** Most bytes the artifacts hold at once (in the store: the oldest make room). */
  readonly maxStoredArtifactBytes: number | undefined;
  readonly ui: boolean;
  readonly uiPort: number;
  /**
   * The `BMA_*` variables the edge harness reads (`harnessOptionsFromEnv`), with the secrets
   * read from their files: the one description of the harness's options both hosts share.
   */
  readonly env: Readonly<Record<string, string>>;
  /** Executors connect without a token (only what the loopback rule allows). */
  readonly insecureNoAuth: boolean;
  /**
   * Where each secret of `env` came from, as an error names it: `BMA_CREDENTIALS`, or
   * `the file ./creds.json (--credentials-file)`.
   */
  readonly secretSources: Readonly<Record<string, string>>;
}

/** The flags of `bma-harness serve`, for `parseArgs`. */
export const SERVE_FLAGS = argOptions({
  values: [
    "config",
    "host",
    "port",
    "unix",
    "store",
    "store-table",
    "store-renew-ms",
    "max-stored-artifact-bytes",
    "log-format",
    "shutdown-grace",
    "jwt-secret-file",
    "credentials-file",
    "brain-token-file",
    "metrics-token-file",
    "heartbeat-ms",
    "request-timeout-ms",
    "max-frame-bytes",
    "token-ttl-seconds",
    "token-issuer",
    "connect-url",
    "ui-port",
  ],
  switches: ["standby", "takeover", "insecure-no-auth", "ui", "help"],
});

type Flag = keyof typeof SERVE_FLAGS;
type FlagValues = { readonly [K in Flag]?: string | boolean };

/** A secret: its file's flag, its variable, and the variable naming its file. */
const SECRETS = [
  { flag: "jwt-secret-file", variable: "BMA_JWT_SECRET" },
  { flag: "credentials-file", variable: "BMA_CREDENTIALS" },
  { flag: "brain-token-file", variable: "BMA_BRAIN_TOKEN" },
  { flag: "metrics-token-file", variable: "BMA_METRICS_TOKEN" },
] as const satisfies readonly { flag: Flag; variable: string }[];

/** The settings that take a positive integer. */
const NUMBERS = new Set<Flag>([
  "heartbeat-ms",
  "request-timeout-ms",
  "max-frame-bytes",
  "token-ttl-seconds",
]);

/** The tokens that admit a bearer: under the faces' minimum length they admit nobody. */
const BEARER_TOKENS = new Set<string>(["BMA_BRAIN_TOKEN", "BMA_METRICS_TOKEN"]);

/** Plain settings the edge harness reads too: the flag and its variable. */
const SETTINGS = [
  { flag: "heartbeat-ms", variable: "BMA_HEARTBEAT_INTERVAL_MS" },
  { flag: "request-timeout-ms", variable: "BMA_REQUEST_TIMEOUT_MS" },
  { flag: "max-frame-bytes", variable: "BMA_MAX_FRAME_BYTES" },
  { flag: "token-ttl-seconds", variable: "BMA_TOKEN_TTL_SECONDS" },
  { flag: "token-issuer", variable: "BMA_TOKEN_ISSUER" },
  { flag: "connect-url", variable: "BMA_CONNECT_URL" },
] as const satisfies readonly { flag: Flag; variable: string }[];

/** The serve-only settings' variables. */
const SERVE_VARIABLES: Partial<Record<Flag, string>> = {
  config: "BMA_HARNESS_CONFIG",
  host: "BMA_HARNESS_HOST",
  port: "BMA_HARNESS_PORT",
  unix: "BMA_HARNESS_UNIX",
  store: "BMA_HARNESS_STORE",
  "store-table": "BMA_HARNESS_STORE_TABLE",
  "store-renew-ms": "BMA_HARNESS_STORE_RENEW_MS",
  "max-stored-artifact-bytes": "BMA_HARNESS_MAX_STORED_ARTIFACT_BYTES",
  standby: "BMA_HARNESS_STANDBY",
  takeover: "BMA_HARNESS_TAKEOVER",
  "log-format": "BMA_LOG_FORMAT",
  "shutdown-grace": "BMA_SHUTDOWN_GRACE",
  "insecure-no-auth": "BMA_INSECURE_NO_AUTH",
  ui: "BMA_HARNESS_UI",
  "ui-port": "BMA_HARNESS_UI_PORT",
};

/** The flags a config file may set: all but `config` itself and `help`. */
const FILE_KEYS = new Set<string>(
  Object.keys(SERVE_FLAGS).filter((flag) => flag !== "config" && flag !== "help"),
);

/**
 * Reads a file as text; throws (a Node `ENOENT` error, say) when it cannot, and an error with
 * `code` `NOT_UTF8` when its bytes are not UTF-8 text ({@linkcode NotUtf8Error}).
 */
export type ReadText = (path: string) => string;

/**
 * A file read as text whose bytes are not UTF-8: decoded leniently, each bad byte would become
 * U+FFFD, and a secret of random bytes the same predictable key whatever the file held.
 */
export class NotUtf8Error extends Error {
  /** For the message the settings' reader writes. */
  readonly code = "NOT_UTF8";
  /** `path` is not named: the reader names it with its flag. */
  constructor() {
    super("not UTF-8 text");
    this.name = "NotUtf8Error";
  }
}

/** Decodes `bytes` as UTF-8, throwing {@linkcode NotUtf8Error} at the first bad sequence. */
export function strictUtf8Text(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new NotUtf8Error();
  }
}

/** The default drain: as long as a load balancer's usual deregistration delay. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

/**
 * Reads `serve`'s configuration from its flags, the environment and the config file. Throws
 * {@linkcode ServeConfigError} for anything it cannot run with, naming the setting, never a
 * secret's value.
 */
export function readServeConfig(
  flags: FlagValues,
  env: Readonly<Record<string, string | undefined>>,
  readText: ReadText,
): ServeConfig {
  const configPath = text(flags.config) ?? env.BMA_HARNESS_CONFIG;
  const file = configPath === undefined ? {} : readConfigFile(configPath, readText);
  const setting = (flag: Flag): string | boolean | undefined => {
    const fromFlag = flags[flag];
    if (fromFlag !== undefined) return fromFlag;
    const variable = SERVE_VARIABLES[flag] ??
      SETTINGS.find((s) => s.flag === flag)?.variable;
    const fromEnv = variable === undefined ? undefined : env[variable];
    if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
    return file[flag];
  };
  /** Where a setting's value came from, as an error names it. */
  const origin = (flag: Flag): string => {
    if (flags[flag] !== undefined) return `--${flag}`;
    const variable = SERVE_VARIABLES[flag] ??
      SETTINGS.find((s) => s.flag === flag)?.variable;
    if (variable !== undefined && (env[variable] ?? "") !== "") return variable;
    return `the config file's "${flag}"`;
  };
  const str = (flag: Flag) => {
    const value = setting(flag);
    if (value === undefined) return undefined;
    if (typeof value !== "string") throw new ServeConfigError(`${origin(flag)} takes a value`);
    return value;
  };
  const bool = (flag: Flag) => {
    const value = setting(flag);
    if (value === undefined || typeof value === "boolean") return value === true;
    if (value === "true" || value === "1") return true;
    if (value === "false" || value === "0" || value === "") return false;
    throw new ServeConfigError(`${origin(flag)} is true or false, not ${shownValue(value)}`);
  };

  const host = str("host") ?? "127.0.0.1";
  const port = integer(origin("port"), str("port") ?? "7700", 0, 65535);
  const uiPortText = str("ui-port");
  const uiPort = integer(origin("ui-port"), uiPortText ?? "0", 0, 65535);
  const format = str("log-format") ?? "text";
  // `pretty` as bma-executor spells it.
  const logFormat = format === "pretty" ? "text" : format;
  if (logFormat !== "text" && logFormat !== "json") {
    throw new ServeConfigError(
      `${origin("log-format")} is text or json, not ${shownValue(format)}`,
    );
  }
  const renew = str("store-renew-ms");
  const artifactBytes = str("max-stored-artifact-bytes");
  const outEnv: Record<string, string> = {};
  for (const { flag, variable } of SETTINGS) {
    const value = str(flag);
    if (value === undefined) continue;
    if (NUMBERS.has(flag) && positiveInteger(value) === undefined) {
      throw new ServeConfigError(
        `${origin(flag)} takes a positive integer, not ${shownValue(value)}`,
      );
    }
    if (flag === "connect-url" && !isConnectUrl(value)) {
      throw new ServeConfigError(
        `${origin(flag)} takes a ws:// or wss:// URL, not ${shownValue(value)}`,
      );
    }
    outEnv[variable] = value;
  }
  const secretSources: Record<string, string> = {};
  for (const { flag, variable } of SECRETS) {
    const found = secret(flag, variable, flags, env, file, readText);
    if (found === undefined) continue;
    // Never the value: its length says what is wrong.
    if (BEARER_TOKENS.has(variable) && found.value.length < MIN_TOKEN_LENGTH) {
      throw new ServeConfigError(
        `${found.source} holds ${found.value.length} characters: a bearer token needs at least ` +
          `${MIN_TOKEN_LENGTH} (a random one: openssl rand -hex 32)`,
      );
    }
    outEnv[variable] = found.value;
    secretSources[variable] = found.source;
  }
  const insecureNoAuth = bool("insecure-no-auth");
  if (insecureNoAuth) outEnv.BMA_INSECURE_NO_AUTH = "true";
  const standby = bool("standby");
  const takeover = bool("takeover");
  if (standby && takeover) {
    throw new ServeConfigError(
      `${origin("standby")} waits for the holder to go, ${origin("takeover")} fences it: one`,
    );
  }
  return {
    host,
    port,
    unix: str("unix"),
    store: storeSpec(str("store"), str("store-table"), origin),
    storePasswordInFlag: flags.store !== undefined && hasUrlPassword(str("store")),
    standby,
    takeover,
    logFormat,
    shutdownGraceMs: duration(origin("shutdown-grace"), str("shutdown-grace")) ??
      DEFAULT_SHUTDOWN_GRACE_MS,
    storeRenewMs: renew === undefined
      ? undefined
      : integer(origin("store-renew-ms"), renew, 1, 3_600_000),
    maxStoredArtifactBytes: artifactBytes === undefined
      ? undefined
      : positiveInteger(artifactBytes) ?? refuse(
        `${origin("max-stored-artifact-bytes")} takes a positive integer (bytes), not ${
          shownValue(artifactBytes)
        }`,
      ),
    ui: bool("ui") || uiPortText !== undefined,
    uiPort,
    env: outEnv,
    insecureNoAuth,
    secretSources,
  };
}

/** Throws the refusal `message`. */
function refuse(message: string): never {
  throw new ServeConfigError(message);
}

/** Whether `value` is a URL with a password in it. */
function hasUrlPassword(value: string | undefined): boolean {
  try {
    return value !== undefined && new URL(value).password !== "";
  } catch {
    return false;
  }
}

/**
 * The store a `--store` value names: `sqlite:PATH`, `postgres://…` (or `postgresql://…`),
 * `memory` or nothing (memory).
 */
export function storeSpec(
  value: string | undefined,
  table: string | undefined,
  origin: (flag: "store" | "store-table") => string = (flag) => `--${flag}`,
): StoreSpec {
  const tableNeedsPostgres = () =>
    new ServeConfigError(`${origin("store-table")} needs a PostgreSQL store (${origin("store")})`);
  if (value === undefined || value === "" || value === "memory" || value === "memory:") {
    if (table !== undefined) throw tableNeedsPostgres();
    return { kind: "memory" };
  }
  if (value.startsWith("sqlite:")) {
    const path = value.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") {
      throw new ServeConfigError(`${origin("store")} sqlite: needs a path (sqlite:./h.db)`);
    }
    if (table !== undefined) throw tableNeedsPostgres();
    return { kind: "sqlite", path };
  }
  if (/^postgres(ql)?:\/\//.test(value)) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ServeConfigError(`${origin("store")} is not a valid postgres:// URL`);
    }
    const fromQuery = url.searchParams.get("table") ?? undefined;
    const chosen = table ?? fromQuery;
    if (chosen !== undefined && !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(chosen)) {
      throw new ServeConfigError(
        `the store's table is a plain SQL name (letters, digits, _), not ${shownValue(chosen)}`,
      );
    }
    // The table is the harness's, not the client's: the client sees the URL without it.
    url.searchParams.delete("table");
    return {
      kind: "postgres",
      url: url.href,
      ...(chosen !== undefined ? { table: chosen } : {}),
    };
  }
  // The value may be a URL with a password: shown without it.
  throw new ServeConfigError(
    `${origin("store")} takes sqlite:PATH or postgres://…, not ${shownValue(value)}`,
  );
}

function readConfigFile(path: string, readText: ReadText): Record<string, string | boolean> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFile(path, "--config", readText));
  } catch (error) {
    if (error instanceof ServeConfigError) throw error;
    throw new ServeConfigError(`the config file ${path} is ${jsonSyntaxError(error)}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ServeConfigError(`the config file ${path} holds a JSON object of flags`);
  }
  const out: Record<string, string | boolean> = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (!FILE_KEYS.has(key)) {
      throw new ServeConfigError(
        `the config file ${path} names "${key}", which is no flag of bma-harness serve`,
      );
    }
    if (typeof value === "number") out[key] = String(value);
    else if (typeof value === "string" || typeof value === "boolean") out[key] = value;
    else throw new ServeConfigError(`the config file's "${key}" is a string, number or boolean`);
  }
  return out;
}

/**
 * A secret: from its file flag, else its variable (`BMA_JWT_SECRET`), else the variable naming
 * its file (`BMA_JWT_SECRET_FILE`), else the config file's flag; with where it came from. A
 * file's trailing newline is not part of it.
 */
function secret(
  flag: Flag,
  variable: string,
  flags: FlagValues,
  env: Readonly<Record<string, string | undefined>>,
  file: Record<string, string | boolean>,
  readText: ReadText,
): { value: string; source: string } | undefined {
  const fromFile = (path: string, what: string) => ({
    value: readFile(path, what, readText).replace(/\r?\n$/, ""),
    source: `the file ${path} (${what})`,
  });
  const path = text(flags[flag]);
  if (path !== undefined) return fromFile(path, `--${flag}`);
  const value = env[variable];
  if (value !== undefined && value !== "") return { value, source: variable };
  const envPath = env[`${variable}_FILE`];
  if (envPath !== undefined && envPath !== "") return fromFile(envPath, `${variable}_FILE`);
  const filePath = text(file[flag]);
  if (filePath !== undefined) return fromFile(filePath, `the config file's ${flag}`);
  return undefined;
}

function readFile(path: string, what: string, readText: ReadText): string {
  try {
    return readText(path);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const why = code === "ENOENT"
      ? "no such file"
      : code === "EACCES"
      ? "permission denied"
      : code === "EISDIR"
      ? "it is a directory"
      : code === "NOT_UTF8"
      ? "it is not UTF-8 text (write a secret as text: openssl rand -hex 32)"
      : "it cannot be read";
    throw new ServeConfigError(`${what}: cannot read ${path}: ${why}`);
  }
}

function text(value: string | boolean | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** `value` as a whole number from `min` to `max`; `what` names where it came from. */
function integer(what: string, value: string, min: number, max: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new ServeConfigError(
      `${what} takes a whole number ${min}-${max}, not ${shownValue(value)}`,
    );
  }
  return n;
}

/** `30`, `30s`, `500ms`, `2m` as milliseconds. */
function duration(what: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(value.trim());
  if (!match) {
    throw new ServeConfigError(
      `${what} takes a duration (30s, 500ms, 2m), not ${shownValue(value)}`,
    );
  }
  const n = Number(match[1]);
  const unit = match[2] ?? "s";
  const ms = Math.round(unit === "ms" ? n : unit === "s" ? n * 1000 : n * 60_000);
  // A timer cannot wait longer (it would fire at once), and 0 would give no drain at all.
  if (ms < 1 || ms > MAX_TIMER_MS) {
    throw new ServeConfigError(
      `${what} takes a duration from 1ms to ${Math.floor(MAX_TIMER_MS / 60_000)}m, not ${
        shownValue(value)
      }`,
    );
  }
  return ms;
}
