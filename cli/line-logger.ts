/**
 * The loggers of `bma-harness serve`: one line per record, as text for a terminal or as one
 * JSON object for a log collector (`--log-format json`). Every record's fields pass through
 * `redact` (secrets never reach a line), and the ids a reader filters by (executor, session,
 * tool call, trace) are lifted to fixed top-level keys whichever spelling the library used.
 *
 * @module
 */
import { type LogFields, type Logger, redact, redactUrls } from "../protocol/logger.ts";

type Level = "debug" | "info" | "warn" | "error";

/** The ids lifted to the top level of a JSON line, and the field names they come under. */
const IDS: Readonly<Record<string, string>> = {
  executorId: "executor_id",
  executor_id: "executor_id",
  executor: "executor_id",
  sessionId: "session_id",
  session_id: "session_id",
  toolCallId: "tool_call_id",
  tool_call_id: "tool_call_id",
  callId: "tool_call_id",
  traceId: "trace_id",
  trace_id: "trace_id",
};

/** Options of the line loggers. */
export interface LineLoggerOptions {
  /** Writes one line (with its newline). */
  readonly write: (line: string) => void;
  /** Records below this level are dropped. Default `info`. */
  readonly level?: Level;
  /** The time of a record. Default: now. */
  readonly now?: () => Date;
}

const RANK: Readonly<Record<Level, number>> = { debug: 0, info: 1, warn: 2, error: 3 };

/** A logger writing one JSON object per line: `time`, `level`, `message`, the ids, the rest. */
export function jsonLineLogger(options: LineLoggerOptions): Logger {
  return lineLogger(options, (level, message, fields, time) => {
    const line: Record<string, unknown> = { time: time.toISOString(), level, message };
    const rest: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(fields)) {
      const id = IDS[key];
      if (id !== undefined && (typeof value === "string" || typeof value === "number")) {
        line[id] = value;
      } else rest[key] = value;
    }
    return JSON.stringify({ ...line, ...rest });
  });
}

/** A logger writing `time level message key=value …` lines for a person. */
export function textLineLogger(options: LineLoggerOptions): Logger {
  return lineLogger(options, (level, message, fields, time) => {
    const pairs = Object.entries(fields).map(([key, value]) =>
      `${key}=${
        typeof value === "string" && BARE.test(value)
          ? value
          : escapeControls(JSON.stringify(value) ?? String(value))
      }`
    );
    return [time.toISOString(), level, escapeControls(message), ...pairs].join(" ");
  });
}

/**
 * A value written without quotes: no space, quote, `=` or control character. Anything else is
 * written as a JSON string, so a value a client chose (a path segment, a header) can neither end
 * the line and forge the next record nor pass for another field.
 */
// deno-lint-ignore no-control-regex
const BARE = /^[^\s"'=\\\u0000-\u001f\u007f-\u009f\u2028\u2029]+$/;

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/**
 * `text` with its control characters as `\u` escapes: the line breaks among them, and those
 * `JSON.stringify` leaves as they are (U+007F–U+009F, U+2028, U+2029).
 */
function escapeControls(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function lineLogger(
  options: LineLoggerOptions,
  format: (level: Level, message: string, fields: LogFields, time: Date) => string,
): Logger {
  const min = RANK[options.level ?? "info"];
  const now = options.now ?? (() => new Date());
  const log = (level: Level) => (message: string, fields?: LogFields) => {
    if (RANK[level] < min) return;
    const safe = fields === undefined ? {} : redact(errorsAsText(fields));
    options.write(`${format(level, redactUrls(message), safe, now())}\n`);
  };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

/** Each `Error` among the fields as its name and message (JSON.stringify writes `{}` for one). */
function errorsAsText(fields: LogFields): LogFields {
  const out: LogFields = {};
  for (const [key, value] of Object.entries(fields)) {
    out[key] = value instanceof Error ? `${value.name}: ${value.message}` : value;
  }
  return out;
}
