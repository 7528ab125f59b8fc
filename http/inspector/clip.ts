/**
 * Bounded copies of what executors send, for the inspector's page: strings and nested values
 * clipped to a budget, members that name a secret redacted, errors reduced to what the page
 * shows (executors are untrusted, and a page must stay small however much they send).
 *
 * Portable: web-standard APIs only.
 */
import { isSecretField, REDACTED } from "../../protocol/logger.ts";
import type { ErrorView } from "./views.ts";

/**
 * A copy of `value` that a page can show: plain JSON, at most `maxChars` characters of strings
 * in all (the rest marked `…`), at most 12 levels deep and 200 members per object or array.
 * A member whose name names a secret (`token`, `api_key`, `GITHUB_TOKEN`, ... — the logger's
 * rule) shows as `[redacted]` unless it is a flag or a number. Objects have no prototype, so a
 * member named `__proto__` is only a member.
 */
export function clip(value: unknown, maxChars: number): unknown {
  const budget = { left: maxChars };
  return clipInto(value, budget, 0);
}

const MAX_DEPTH = 12;
const MAX_MEMBERS = 200;

function clipInto(value: unknown, budget: { left: number }, depth: number): unknown {
  switch (typeof value) {
    case "string":
      return clipString(value, budget);
    case "number":
      return Number.isFinite(value) ? value : String(value);
    case "boolean":
      return value;
    case "undefined":
      return null;
    case "bigint":
      return clipString(value.toString(), budget);
    case "object":
      break;
    default:
      return clipString(String(value), budget);
  }
  if (value === null) return null;
  if (depth >= MAX_DEPTH) return "…";
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (let i = 0; i < value.length; i++) {
      if (i >= MAX_MEMBERS || budget.left <= 0) {
        out.push(`… ${value.length - i} more`);
        break;
      }
      out.push(clipInto(value[i], budget, depth + 1));
    }
    return out;
  }
  const out: Record<string, unknown> = Object.create(null);
  let members = 0;
  for (const key of Object.keys(value)) {
    if (members >= MAX_MEMBERS || budget.left <= 0) {
      out["…"] = "more";
      break;
    }
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined || typeof item === "function") continue;
    members++;
    budget.left -= Math.min(key.length, 256);
    // A flag (`git_credentials: true`) says nothing secret; a string or an object may.
    const hidden = isSecretField(key) && item !== null && typeof item !== "boolean" &&
      typeof item !== "number";
    out[key.length > 256 ? `${key.slice(0, 256)}…` : key] = hidden
      ? REDACTED
      : clipInto(item, budget, depth + 1);
  }
  return out;
}

function clipString(text: string, budget: { left: number }): string {
  const keep = Math.max(0, budget.left);
  budget.left -= text.length;
  return text.length <= keep ? text : `${text.slice(0, keep)}… (${text.length - keep} more)`;
}

/** An error as the page shows it: its name, message and protocol code, nothing else. */
export function errorView(error: unknown, maxChars = 4096): ErrorView {
  if (!(error instanceof Error)) {
    return { name: "Error", message: String(clip(String(error), maxChars)) };
  }
  const e = error as Error & { code?: unknown; reason?: unknown; issues?: unknown };
  return {
    name: String(clip(e.name, 200)),
    message: String(clip(e.message, maxChars)),
    ...(typeof e.code === "number" || typeof e.code === "string"
      ? { code: typeof e.code === "string" ? String(clip(e.code, 200)) : e.code }
      : {}),
    ...(typeof e.reason === "string" ? { reason: String(clip(e.reason, 200)) } : {}),
    ...(Array.isArray(e.issues) ? { issues: clip(e.issues, maxChars) } : {}),
  };
}
