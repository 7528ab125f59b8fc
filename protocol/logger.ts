/**
 * Logging through an injected sink: library code never writes to the console. Every field set
 * passes through {@linkcode redact}, so secrets (tokens, keys, passwords) never reach a sink.
 */

/** Structured fields attached to a log record. */
export type LogFields = Record<string, unknown>;

/** A log sink. */
export interface Logger {
  /** Detail for debugging. */
  debug(message: string, fields?: LogFields): void;
  /** Something worth knowing happened. */
  info(message: string, fields?: LogFields): void;
  /** Something went wrong and was handled. */
  warn(message: string, fields?: LogFields): void;
  /** Something failed. */
  error(message: string, fields?: LogFields): void;
}

/** Drops everything: the default, so a library never logs unless asked to. */
export const silentLogger: Logger = {
  debug(): void {},
  info(): void {},
  warn(): void {},
  error(): void {},
};

const SECRET_KEY =
  /(^|_)(token|jwt|secret|password|passwd|authorization|cookie|key|credential|credentials|api_key|private)($|_)|token$|Token$|Key$|Secret$/i;

/** The placeholder that replaces a secret value. */
export const REDACTED = "[redacted]";

/** Whether a field name names a secret (`model_token`, `environmentKey`, `authorization`, ...). */
export function isSecretField(name: string): boolean {
  return SECRET_KEY.test(name);
}

/**
 * `text` with the secrets a URL can carry replaced by {@linkcode REDACTED}: the user name and
 * password, every query parameter's value and the fragment of each URL in it (`wss://h/?token=x`
 * becomes `wss://h/?token=[redacted]`). A URL is what starts with a scheme and `://`.
 */
export function redactUrls(text: string): string {
  if (!text.includes("://")) return text;
  return text.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>,]+/gi, (found) => {
    let url: URL;
    try {
      url = new URL(found);
    } catch {
      // Not parseable: keep the scheme, hide the rest (it may be all secret).
      return `${found.slice(0, found.indexOf("://") + 3)}${REDACTED}`;
    }
    if (!url.username && !url.password && !url.search && !url.hash) return found;
    if (url.username) url.username = REDACTED;
    if (url.password) url.password = REDACTED;
    for (const key of [...new Set(url.searchParams.keys())]) url.searchParams.set(key, REDACTED);
    if (url.hash) url.hash = REDACTED;
    // URL encodes the placeholder's brackets: show it as written.
    return url.href.replaceAll(encodeURIComponent(REDACTED), REDACTED);
  });
}

/**
 * What a JSON parser's error says of malformed `text`, without the text: the engines quote what
 * they choke on (V8: `Unexpected token 's', "sk-…" is not valid JSON`; JavaScriptCore:
 * `Unexpected identifier "sk"`), and the text may be a credential list or a config with keys in
 * it. Says where, when the parser said so.
 */
export function jsonSyntaxError(error: unknown): string {
  const at = /position (\d+)/.exec(error instanceof Error ? error.message : "");
  return at ? `not valid JSON (at character ${at[1]})` : "not valid JSON";
}

/**
 * Returns a copy of `value` with every secret-named field replaced by {@linkcode REDACTED},
 * recursively (arrays and plain objects, up to a depth of 8), and the secrets of every URL in a
 * string ({@linkcode redactUrls}).
 */
export function redact<T>(value: T, depth = 0): T {
  if (typeof value === "string") return redactUrls(value) as T;
  if (depth > 8 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    out[key] = isSecretField(key) ? REDACTED : redact(item, depth + 1);
  }
  return out as T;
}

/**
 * Whether `value` has the four methods of a {@linkcode Logger}: one without them would throw
 * where it is first called, often inside an error handler.
 */
export function isLogger(value: unknown): value is Logger {
  if (value === null || (typeof value !== "object" && typeof value !== "function")) return false;
  const methods = value as Record<string, unknown>;
  return typeof methods.debug === "function" && typeof methods.info === "function" &&
    typeof methods.warn === "function" && typeof methods.error === "function";
}

/**
 * Wraps a sink so that every record's fields are redacted before they reach it. A record
 * without fields reaches the sink with the message alone (`logger: console` prints no
 * trailing `undefined`). A sink that throws loses that record; the caller never sees the throw.
 */
export function redactingLogger(sink: Logger): Logger {
  const level = (write: Logger["info"]): Logger["info"] => (message, fields) => {
    try {
      if (fields === undefined) write.call(sink, redactUrls(message));
      else write.call(sink, redactUrls(message), redact(fields));
    } catch {
      // A sink that fails (its file gone, a bug) loses the record, never the work that logged
      // it: logging happens inside error handlers, where a throw would end the process.
    }
  };
  return {
    debug: level(sink.debug),
    info: level(sink.info),
    warn: level(sink.warn),
    error: level(sink.error),
  };
}
