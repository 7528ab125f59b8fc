/**
 * Checking a tool call's input on the harness before it is sent, against the JSON Schema the
 * executor advertised for a tool of its own (`capabilities.tool_definitions[tool].input_schema`).
 *
 * The executor checks the input again with its own schema before the ack, and decides: this
 * check may only be looser than the executor's, never stricter. So the regular expressions of an
 * advertised schema are left out (an executor-chosen pattern run against model-chosen input
 * could freeze the harness's event loop, and the harness serves many executors), and a schema
 * that zod cannot turn into a validator (`z.fromJSONSchema`) leaves the call unchecked here.
 * Built-in tools are checked against the contract instead, whatever an executor advertises.
 *
 * The validator is built once per advertisement: it is kept with the advertised definition
 * object, which `executor.register` and each `executor.capabilities.update` replace. Runs where
 * `new Function` throws (Cloudflare Workers): zod then validates without its compiled fast path.
 */
import * as z from "zod";
import { TOOL_SPECS } from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import type { ValidationIssue } from "../protocol/peer.ts";

/** Returns the issues of an input the advertised schema refuses, or undefined when it passes. */
export type ToolInputCheck = (input: unknown) => ValidationIssue[] | undefined;

/** Built validators (or `null`: unusable), by the advertised definition object. */
const built = new WeakMap<object, ToolInputCheck | null>();

/** Schemas nested deeper than this are not checked here (the executor still checks them). */
const MAX_SCHEMA_DEPTH = 64;

/**
 * The check of `tool`'s input advertised in `capabilities`, or undefined when there is none to
 * make: a built-in tool, a tool without a definition, or a schema that cannot be used (reported
 * to `logger` once per advertisement).
 */
export function advertisedInputCheck(
  capabilities: unknown,
  tool: string,
  logger?: Logger,
): ToolInputCheck | undefined {
  if (TOOL_SPECS.has(tool)) return undefined;
  const definitions = (capabilities as { tool_definitions?: unknown } | undefined)
    ?.tool_definitions;
  if (typeof definitions !== "object" || definitions === null) return undefined;
  // Own members only: a tool named `constructor` must not find Object.prototype's.
  if (!Object.hasOwn(definitions, tool)) return undefined;
  const definition = (definitions as Record<string, unknown>)[tool];
  if (typeof definition !== "object" || definition === null) return undefined;
  const known = built.get(definition);
  if (known !== undefined) return known ?? undefined;
  const check = buildCheck(tool, (definition as { input_schema?: unknown }).input_schema, logger);
  built.set(definition, check);
  return check ?? undefined;
}

function buildCheck(tool: string, schema: unknown, logger: Logger | undefined) {
  let validator: z.ZodType;
  try {
    const usable = withoutRegexes(schema, 0);
    if (usable === undefined) throw new Error(`nested deeper than ${MAX_SCHEMA_DEPTH} levels`);
    validator = z.fromJSONSchema(usable as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (error) {
    logger?.warn("advertised input schema not usable: calls of the tool go unchecked here", {
      tool,
      error: error instanceof Error ? error.message : String(error),
    });
    return null;
  }
  const check: ToolInputCheck = (input) => {
    let parsed: ReturnType<z.ZodType["safeParse"]>;
    try {
      parsed = validator.safeParse(input);
    } catch {
      return undefined; // a schema zod cannot run synchronously: the executor decides
    }
    if (parsed.success) return undefined;
    return parsed.error.issues.map((issue) => ({
      path: ["input", ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))],
      message: issue.message,
      code: issue.code,
    }));
  };
  return check;
}

/** Keywords whose value is one schema. */
const SCHEMA_KEYWORDS = new Set([
  "additionalProperties",
  "additionalItems",
  "items",
  "contains",
  "not",
  "if",
  "then",
  "else",
  "propertyNames",
  "unevaluatedProperties",
  "unevaluatedItems",
]);
/** Keywords whose value is a list of schemas. */
const SCHEMA_LIST_KEYWORDS = new Set(["allOf", "anyOf", "oneOf", "prefixItems", "items"]);
/** Keywords whose value maps names to schemas. */
const SCHEMA_MAP_KEYWORDS = new Set(["properties", "$defs", "definitions", "dependentSchemas"]);

/**
 * A copy of a JSON Schema without regular expressions: no `pattern`, and no `patternProperties`
 * (and then no `additionalProperties` / `unevaluatedProperties` beside it, which would refuse
 * what the patterns admitted). Only schema positions are rewritten: `const`, `enum`, `default`
 * and `examples` values, and the names in `properties`, are data. Undefined when too deep.
 */
function withoutRegexes(schema: unknown, depth: number): unknown {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return schema;
  if (depth > MAX_SCHEMA_DEPTH) return undefined;
  const source = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const patterned = "patternProperties" in source;
  for (const [key, value] of Object.entries(source)) {
    if (key === "pattern" || key === "patternProperties") continue;
    if (patterned && (key === "additionalProperties" || key === "unevaluatedProperties")) continue;
    let copy: unknown = value;
    if (SCHEMA_LIST_KEYWORDS.has(key) && Array.isArray(value)) {
      copy = value.map((item) => withoutRegexes(item, depth + 1));
      if ((copy as unknown[]).includes(undefined)) return undefined;
    } else if (SCHEMA_KEYWORDS.has(key)) {
      copy = withoutRegexes(value, depth + 1);
      if (copy === undefined) return undefined;
    } else if (SCHEMA_MAP_KEYWORDS.has(key) && typeof value === "object" && value !== null) {
      const entries: [string, unknown][] = [];
      for (const [name, item] of Object.entries(value)) {
        const sub = withoutRegexes(item, depth + 1);
        if (sub === undefined) return undefined;
        entries.push([name, sub]);
      }
      copy = Object.fromEntries(entries);
    }
    // Defined as members: a key `__proto__` stays data, as JSON.parse made it.
    Object.defineProperty(out, key, { value: copy, enumerable: true, writable: true });
  }
  return out;
}
