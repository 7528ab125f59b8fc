/**
 * Keeps the client's secrets (the environment key or machine token, and every executor JWT it
 * obtained) out of logs and out of error text sent to the harness.
 *
 * Field-name redaction (`redactingLogger`) catches `token: ...`; this catches the same values
 * wherever they turn up: inside a message, an error's text, a URL.
 */
import { type LogFields, type Logger, REDACTED, redactingLogger } from "../protocol/logger.ts";

/** The most recent JWTs remembered for scrubbing; older ones have expired long ago. */
const MAX_REMEMBERED = 16;

/** A set of secret values and the means to scrub them from text. */
export class SecretScrubber {
  readonly #fixed: string[];
  readonly #recent: string[] = [];

  constructor(secrets: readonly (string | undefined)[]) {
    this.#fixed = secrets.filter((s): s is string => typeof s === "string" && s.length >= 4);
  }

  /** Remembers one more secret value (a freshly issued JWT). */
  add(secret: string): void {
    if (secret.length < 4 || this.#recent.includes(secret)) return;
    this.#recent.push(secret);
    if (this.#recent.length > MAX_REMEMBERED) this.#recent.shift();
  }

  /** `text` with every known secret replaced by `[redacted]`. */
  scrub(text: string): string {
    let out = text;
    for (const secret of [...this.#fixed, ...this.#recent]) {
      if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    }
    return out;
  }

  /** A deep copy of `value` with every string scrubbed. */
  scrubValue<T>(value: T, depth = 0): T {
    if (typeof value === "string") return this.scrub(value) as T;
    if (depth > 8 || value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return value.map((v) => this.scrubValue(v, depth + 1)) as T;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      out[key] = this.scrubValue(item, depth + 1);
    }
    return out as T;
  }

  /** Wraps a sink: secret-named fields redacted, known secret values scrubbed everywhere. */
  logger(sink: Logger): Logger {
    const redacted = redactingLogger(sink);
    const clean = (fields?: LogFields) => (fields ? this.scrubValue(fields) : undefined);
    return {
      debug: (message, fields) => redacted.debug(this.scrub(message), clean(fields)),
      info: (message, fields) => redacted.info(this.scrub(message), clean(fields)),
      warn: (message, fields) => redacted.warn(this.scrub(message), clean(fields)),
      error: (message, fields) => redacted.error(this.scrub(message), clean(fields)),
    };
  }
}
