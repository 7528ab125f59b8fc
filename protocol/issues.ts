/**
 * The issues of a value a schema refuses, found with bounded work and reported in bounded size:
 * what a -32602 answer carries in `data` (`issues`, `issue_count`, `truncated`). A refusal must
 * not cost more than the frame that caused it: zod collects every issue of a value (70,000 bad
 * items of a 137 KiB frame made an 8 MiB answer and 0.7 s of CPU), so objects, arrays and records
 * are walked here, each leaf checked by its own schema, and the walk stops once more than
 * {@linkcode MAX_COUNTED_ISSUES} are found; only the first {@linkcode MAX_REPORTED_ISSUES} are
 * sent, with `reason` and `field` (a JSON pointer to the first) as the contract's ErrorData says.
 *
 * Portable: no runtime APIs.
 */
import * as z from "zod";
import type * as zc from "zod/v4/core";

/** Most issues a refusal sends (`data.issues`). */
export const MAX_REPORTED_ISSUES = 10;
/** Issues after which a refused value is not looked at further (`data.truncated`). */
export const MAX_COUNTED_ISSUES = 100;

/** The most characters of a peer's own string that a refusal (or a log line) repeats. */
export const MAX_ECHOED_CHARS = 200;

/**
 * `text` (a method or tool name the peer sent) as a refusal repeats it: its first
 * {@linkcode MAX_ECHOED_CHARS} characters, then `…` when there were more. A name of megabytes
 * would otherwise come back as large, or larger, in the answer.
 */
export function echoed(text: string): string {
  return text.length <= MAX_ECHOED_CHARS ? text : `${text.slice(0, MAX_ECHOED_CHARS)}…`;
}

/** One issue as sent in `data.issues` of a -32602 answer. */
export interface ValidationIssue {
  /** Where in the params: member names and array indexes. */
  path: (string | number)[];
  /** What is wrong there. */
  message: string;
  /** The kind of issue (zod's code). */
  code: string;
}

/** Why a value was refused, in bounded size. */
export interface IssueReport {
  /** The first issues found, at most {@linkcode MAX_REPORTED_ISSUES}. */
  readonly issues: ValidationIssue[];
  /** How many issues were found (at most {@linkcode MAX_COUNTED_ISSUES}). */
  readonly count: number;
  /** There are more than {@linkcode MAX_COUNTED_ISSUES} issues: the search stopped. */
  readonly truncated: boolean;
}

/** The `data` of a -32602 answer carrying `report` (ErrorData, the contract's InvalidParams). */
export interface IssueData {
  /** Always `invalid_params`. */
  reason: "invalid_params";
  /** A JSON pointer (RFC 6901) into the params at the first issue, e.g. `/input/command`. */
  field?: string;
  /** The first issues found. */
  issues: ValidationIssue[];
  /** How many issues were found (at most {@linkcode MAX_COUNTED_ISSUES}). */
  issue_count: number;
  /** Present when there are more than {@linkcode MAX_COUNTED_ISSUES} issues. */
  truncated?: true;
}

/**
 * The `data` of a refusal carrying `report`: `reason`, `field` (where the first issue is), and
 * `issues`, `issue_count`, `truncated`.
 */
export function issueData(report: IssueReport): IssueData {
  const data: IssueData = {
    reason: "invalid_params",
    issues: report.issues,
    issue_count: report.count,
  };
  if (report.issues.length > 0) data.field = jsonPointer(report.issues[0].path);
  if (report.truncated) data.truncated = true;
  return data;
}

/** RFC 6901: `/` before each segment, `~` written `~0` and `/` written `~1`. */
function jsonPointer(path: readonly (string | number)[]): string {
  let pointer = "";
  for (const segment of path) {
    pointer += "/" + String(segment).replaceAll("~", "~0").replaceAll("/", "~1");
  }
  return pointer;
}

/** An issue as zod reports it, or as the walk finds it. */
export type ZodIssueLike = { path: readonly PropertyKey[]; message: string; code: string };

/** A report of issues zod already collected (all of them): the first few and the count. */
export function reportOf(
  issues: readonly ZodIssueLike[],
  prefix: readonly (string | number)[] = [],
): IssueReport {
  const counted = Math.min(issues.length, MAX_COUNTED_ISSUES);
  return {
    issues: issues.slice(0, MAX_REPORTED_ISSUES).map((issue) => toIssue(issue, prefix)),
    count: counted,
    truncated: issues.length > MAX_COUNTED_ISSUES,
  };
}

/**
 * Issues the walk looks for before it stops: one more than it counts, so that a report of them
 * ({@linkcode reportOf}) can tell a value with exactly {@linkcode MAX_COUNTED_ISSUES} issues from
 * one with more.
 */
const ISSUES_SOUGHT = MAX_COUNTED_ISSUES + 1;

/**
 * Parses `value` with `schema` for a caller that expects a refusal (a fast check said no):
 * the value's objects, arrays and records are walked first, looking for a bounded number of
 * issues; only a value where the walk finds none is parsed whole by zod, which gives its data (or
 * the issues the walk cannot see, such as an object's own refinements, bounded the same way).
 */
export function parseBounded(
  schema: zc.$ZodType,
  value: unknown,
): { success: true; data: unknown } | { success: false; report: IssueReport } {
  const found: ZodIssueLike[] = [];
  walk(schema, value, [], found);
  if (found.length === 0) {
    const parsed = z.safeParse(schema, value);
    if (parsed.success) return { success: true, data: parsed.data };
    return { success: false, report: reportOf(parsed.error.issues) };
  }
  return { success: false, report: reportOf(found) };
}

/**
 * The issues of `value` under `schema`, found as {@linkcode parseBounded} finds them: none when
 * the schema accepts the value, else at most {@linkcode MAX_COUNTED_ISSUES} + 1 (enough for
 * {@linkcode reportOf} to count them and to tell whether there are more). For a value a fast check
 * or a parse already refused, where zod's own issues would be all of them: a refinement adds these
 * to the parse it runs in, a caller builds its report of them.
 */
export function boundedIssues(schema: zc.$ZodType, value: unknown): ZodIssueLike[] {
  const found: ZodIssueLike[] = [];
  walk(schema, value, [], found);
  if (found.length > 0) return found;
  const parsed = z.safeParse(schema, value);
  return parsed.success ? found : parsed.error.issues.slice(0, ISSUES_SOUGHT);
}

/** Schema types that accept every value: the walk finds no issue in them. */
const ACCEPTS_ANY: ReadonlySet<string> = new Set(["unknown", "any"]);

/** The parts of a zod schema's definition the walk reads. */
interface Def {
  readonly type: string;
  readonly shape?: Record<string, zc.$ZodType>;
  readonly element?: zc.$ZodType;
  readonly innerType?: zc.$ZodType;
  readonly keyType?: zc.$ZodType;
  readonly valueType?: zc.$ZodType;
}

function defOf(schema: zc.$ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Adds the issues of `value` to `found` (paths relative to the root), until it holds
 * {@linkcode ISSUES_SOUGHT}. Mirrors how zod runs an object's members, an array's items and
 * a record's entries; anything else (and a value of the wrong type) is parsed by zod as a leaf.
 */
function walk(
  schema: zc.$ZodType,
  value: unknown,
  path: (string | number)[],
  found: ZodIssueLike[],
): void {
  const def = defOf(schema);
  if (ACCEPTS_ANY.has(def.type)) return;
  switch (def.type) {
    case "optional":
      if (value === undefined) return;
      return walk(def.innerType!, value, path, found);
    case "object":
      if (!isObject(value)) break;
      for (const key in def.shape!) {
        walk(def.shape![key], value[key], [...path, key], found);
        if (found.length >= ISSUES_SOUGHT) return;
      }
      return;
    case "array":
      if (!Array.isArray(value)) break;
      for (let i = 0; i < value.length; i++) {
        walk(def.element!, value[i], [...path, i], found);
        if (found.length >= ISSUES_SOUGHT) return;
      }
      return;
    case "record":
      // Only a record keyed by any string is walked: an enum-keyed one requires its keys.
      if (!isObject(value) || defOf(def.keyType!).type !== "string") break;
      // Values of any kind (tool.call's `input`): nothing to find in them, however many.
      if (ACCEPTS_ANY.has(defOf(def.valueType!).type)) return;
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        walk(def.valueType!, value[key], [...path, key], found);
        if (found.length >= ISSUES_SOUGHT) return;
      }
      return;
  }
  const parsed = z.safeParse(schema, value);
  if (parsed.success) return;
  for (const issue of parsed.error.issues) {
    if (found.length >= ISSUES_SOUGHT) return;
    found.push({ path: [...path, ...issue.path], message: issue.message, code: issue.code });
  }
}

function toIssue(issue: ZodIssueLike, prefix: readonly (string | number)[]): ValidationIssue {
  return {
    path: [...prefix, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))],
    message: issue.message,
    code: issue.code,
  };
}
