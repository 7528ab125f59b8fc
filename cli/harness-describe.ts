/**
 * What `bma-harness` prints about errors, schemas and results, as text: an error with its
 * JSON-RPC code and the contract's issue paths, a tool call's refused input, a tool's input
 * schema, a result's text. Pure functions of the values (no output of their own), so the
 * commands (`harness-commands.node.ts`) decide where each line goes.
 */
import * as z from "zod";
import { TOOL_SPECS } from "../protocol/generated/contract.ts";
import { InvalidOutgoingParamsError, ProtocolError } from "../protocol/errors.ts";
import type { ToolCallResult } from "../harness/mod.ts";

/** An error as one line: its message, the JSON-RPC code, and the contract's issue paths. */
export function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  let text = error.message;
  if (error instanceof ProtocolError) {
    text += ` (${error.code}${error.reason ? ` ${error.reason}` : ""})`;
  }
  const issues = (error as { issues?: unknown }).issues ??
    (error as { data?: { issues?: unknown } }).data?.issues;
  if (Array.isArray(issues) && issues.length) {
    text += `: ${issues.slice(0, 8).map(describeIssue).join("; ")}`;
  }
  return text;
}

/** One issue of the contract's: `input.content: Invalid input: expected string, ...`. */
function describeIssue(issue: unknown): string {
  const { path, message } = (issue ?? {}) as { path?: unknown; message?: unknown };
  const where = Array.isArray(path) && path.length
    ? path.map((part, i) =>
      typeof part === "number" || /^\d+$/.test(String(part))
        ? `[${part}]`
        : `${i ? "." : ""}${String(part)}`
    ).join("")
    : "(params)";
  return `${where}: ${typeof message === "string" ? message : "invalid"}`;
}

/** A tool's input schema as JSON Schema: the contract's for a built-in tool. */
export function builtInInputSchema(tool: string): Record<string, unknown> | undefined {
  const spec = TOOL_SPECS.get(tool);
  if (!spec) return undefined;
  return tidySchema(z.toJSONSchema(spec.input, { io: "input" })) as Record<string, unknown>;
}

/**
 * A JSON Schema without what says nothing to a reader: the bounds of a safe integer, and the
 * empty `additionalProperties` of an object that accepts members beyond its own.
 */
export function tidySchema(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(tidySchema);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (key === "$schema") continue;
    if (key === "maximum" && item === Number.MAX_SAFE_INTEGER) continue;
    if (key === "minimum" && item === Number.MIN_SAFE_INTEGER) continue;
    if (key === "additionalProperties" && typeof item === "object" && item !== null) {
      if (Object.keys(item).length === 0) continue;
    }
    out[key] = tidySchema(item);
  }
  return out;
}

/** The text blocks of a result, joined. */
export function textOf(result: ToolCallResult): string {
  return (result.content ?? []).filter((b) => b.type === "text").map((b) =>
    (b as { text: string }).text
  ).join("");
}

/**
 * A tool call's failure in words. Input refused before it was sent names the tool, and whose
 * schema refused it (the contract's for a built-in tool, the executor's own for its tools),
 * with each refused field.
 */
export function describeCallError(
  error: unknown,
  call: { readonly tool: string; readonly sessionId: string },
): string {
  if (error instanceof InvalidOutgoingParamsError && error.method === "tool.call") {
    const inputIssues = error.issues.filter((issue) => {
      const path = (issue as { path?: unknown }).path;
      return Array.isArray(path) && path[0] === "input";
    });
    if (inputIssues.length === error.issues.length && inputIssues.length) {
      const whose = TOOL_SPECS.has(call.tool)
        ? "the contract's input schema of this built-in tool"
        : "the input schema its executor advertised (see tools " + call.sessionId + ")";
      return `the input of tool ${call.tool} does not match ${whose}: ${
        inputIssues.slice(0, 8).map(describeIssue).join("; ")
      }`;
    }
  }
  return describe(error);
}
