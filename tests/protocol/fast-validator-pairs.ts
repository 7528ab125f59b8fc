/**
 * What the fast-validator tests check: every generated predicate paired with its zod validator
 * (per method and per exported schema), the property they must keep ({@linkcode agrees}), and the
 * contract's examples and words those tests start from.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { inspect } from "node:util";
import { fileURLToPath } from "node:url";
import * as contract from "../../protocol/generated/contract.ts";
import { isRecord, nodes } from "./json-mutations.ts";

const { METHOD_SPECS } = contract;

export interface ZodLike {
  safeParse(value: unknown): { success: boolean; data?: unknown; error?: { issues: unknown[] } };
}
export interface Pair {
  name: string;
  schema: ZodLike;
  accepts: (value: unknown) => boolean;
}

export const dir = fileURLToPath(new URL("../../protocol/contract/examples/", import.meta.url));
export const openrpc = JSON.parse(
  readFileSync(
    fileURLToPath(new URL("../../protocol/contract/openrpc.json", import.meta.url)),
    "utf8",
  ),
);

export interface Example {
  method?: string;
  valid?: { description: string; frame: any; result?: unknown }[];
  invalid?: { description: string; frame?: any }[];
}
export const examples: Example[] = readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((
  f,
) => JSON.parse(readFileSync(dir + f, "utf8")));

export const show = (value: unknown): string => {
  try {
    return inspect(value, { depth: 8, breakLength: Infinity, showHidden: false });
  } catch {
    // Bun's inspect throws on some values a generator makes (`{ constructor: { name: {} } }`).
    try {
      return JSON.stringify(value, (_, v) => typeof v === "bigint" ? `${v}n` : v) ?? String(value);
    } catch {
      return Object.prototype.toString.call(value);
    }
  }
};

/**
 * The property under test: accepted ⇒ zod succeeds and its output deep-equals the value.
 * Returns whether the fast path accepted it.
 */
export function agrees(pair: Pair, value: unknown, what: string): boolean {
  let accepted: boolean;
  try {
    accepted = pair.accepts(value);
  } catch (error) {
    assert.fail(`${pair.name}: the predicate threw on ${what} ${show(value)}: ${error}`);
  }
  assert.equal(typeof accepted, "boolean", `${pair.name}: the predicate returns a boolean`);
  if (!accepted) return false;
  const parsed = pair.schema.safeParse(value);
  // Each message is made only when it is needed: a value to show is any value at all.
  if (!parsed.success) {
    assert.fail(
      `${pair.name}: the fast path accepted ${what} that zod rejects: ${show(value)} ${
        show(parsed.error?.issues)
      }`,
    );
  }
  try {
    assert.deepStrictEqual(parsed.data, value);
  } catch {
    assert.fail(
      `${pair.name}: the fast path accepted ${what} whose zod output differs: ${show(value)}`,
    );
  }
  return true;
}

// ---- the pairs under test -------------------------------------------------------------------

export const methodPairs: { method: string; params: Pair; result?: Pair }[] = [
  ...METHOD_SPECS.values(),
]
  .map((spec) => ({
    method: spec.name,
    params: {
      name: `${spec.name} params`,
      schema: spec.params as ZodLike,
      accepts: spec.acceptsParams,
    },
    result: spec.result && spec.acceptsResult
      ? { name: `${spec.name} result`, schema: spec.result as ZodLike, accepts: spec.acceptsResult }
      : undefined,
  }));

export const exports = contract as unknown as Record<string, unknown>;
export const namedPairs: Pair[] = Object.keys(exports).filter((key) => /^[A-Z]\w*Schema$/.test(key))
  .map(
    (key) => {
      const name = key.slice(0, -"Schema".length);
      return {
        name: `is${name}`,
        schema: exports[key] as ZodLike,
        accepts: exports[`is${name}`] as (value: unknown) => boolean,
      };
    },
  );

/** Contract words: every enum and const value, every member name, and the tool names. */
export const words = new Set<unknown>();
export const keys = new Set<string>(["extra_key", "__proto__", "constructor"]);
(function walk(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(walk);
  if (node === null || typeof node !== "object") return;
  const schema = node as Record<string, unknown>;
  if (Array.isArray(schema.enum)) schema.enum.forEach((v) => words.add(v));
  if ("const" in schema) words.add(schema.const);
  if (isRecord(schema.properties)) Object.keys(schema.properties).forEach((k) => keys.add(k));
  Object.values(schema).forEach(walk);
})(openrpc);
for (const tool of Object.keys(openrpc["x-tools"] ?? {})) words.add(tool);
words.add("custom_tool");

export interface Valid {
  pair: Pair;
  value: unknown;
  description: string;
}
export const valid: Valid[] = [];
export const invalid: Valid[] = [];
for (const example of examples) {
  const pairs = methodPairs.find((p) => p.method === example.method);
  if (!pairs) continue;
  for (const v of example.valid ?? []) {
    valid.push({ pair: pairs.params, value: v.frame.params ?? {}, description: v.description });
    if (pairs.result && v.result !== undefined) {
      valid.push({ pair: pairs.result, value: v.result, description: `${v.description} (result)` });
    }
  }
  for (const v of example.invalid ?? []) {
    if (isRecord(v.frame) && "params" in v.frame) {
      invalid.push({ pair: pairs.params, value: v.frame.params, description: v.description });
    }
  }
}
/** Every node of every example: the corpus of the named predicates. */
export const corpus: unknown[] = [...valid, ...invalid].flatMap((v) => nodes(v.value));

/** A URL member is left to zod (z.url() may rewrite the value), so such a value may fall back. */
export const hasUrl = (value: unknown): boolean =>
  nodes(value).some((node) => typeof node === "string" && node.includes("://"));
