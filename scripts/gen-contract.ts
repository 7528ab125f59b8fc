/**
 * Derives the TypeScript side of the wire from the contract, so nothing is written twice:
 *
 *   protocol/contract/openrpc.json  ──►  protocol/generated/contract.ts  (types, zod validators,
 *                                                                          method and tool tables)
 *                                   ──►  protocol/generated/errors.ts    (error classes, codes,
 *                                                                          close codes)
 *                                   ──►  protocol/generated/tool-schemas.ts (the built-in tools'
 *                                                                          input JSON Schemas)
 *                                   ──►  protocol/mod.ts, between its `<generated-names>`
 *                                        markers: the names of contract.ts and errors.ts, listed
 *                                        (the faces name what they export: no `export *`)
 *
 * `tsx scripts/gen-contract.ts` writes the files; `--check` fails when they drift from the
 * contract (run by `npm run check`, so CI catches a contract edited without regenerating).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const argValue = (flag: string): string | undefined => {
  const at = process.argv.indexOf(flag);
  return at >= 0 ? process.argv[at + 1] : undefined;
};
const contractPath = resolve(
  argValue("--contract") ?? join(root, "protocol/contract/openrpc.json"),
);
const outDir = resolve(argValue("--out") ?? join(root, "protocol/generated"));
/** The `/protocol` face, whose generated-names block lists the generated modules' exports. */
const facePath = join(outDir, "../mod.ts");
const BEGIN_NAMES = "// <generated-names>";
const END_NAMES = "// </generated-names>";

// deno-lint-ignore no-explicit-any
type Json = any;
interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: string[];
  const?: Json;
  oneOf?: Schema[];
  $ref?: string;
  description?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  format?: string;
  default?: Json;
}
interface ContentDescriptor {
  name: string;
  required?: boolean;
  schema: Schema;
  description?: string;
}
interface Method {
  name: string;
  summary?: string;
  description?: string;
  params: ContentDescriptor[];
  result?: ContentDescriptor;
  "x-direction": "executor_to_harness" | "harness_to_executor" | "both";
  "x-kind": "request" | "notification";
  "x-since": string;
  "x-capability"?: string;
  /** A notification the receiver can do without (it catches up another way): sent as the link allows. */
  "x-lossy"?: boolean;
  "x-idempotency-key"?: string;
  /** Params members naming a built-in tool and its input: the input is checked against x-tools. */
  "x-tool-input"?: { tool: string; input: string };
}
interface ErrorSpec {
  code: number;
  message: string;
  "x-name": string;
  "x-retryable"?: boolean;
  description?: string;
}
interface CloseSpec {
  code: number;
  name: string;
  reconnect: boolean;
  description?: string;
}
interface ToolSpec {
  group: string;
  input: Schema;
  result?: Schema;
  description?: string;
}

const ALLOWED_KEYS = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "enum",
  "const",
  "oneOf",
  "$ref",
  "description",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
  "format",
  "default",
  "title",
  "examples",
]);

class ContractError extends Error {}

/** A fast predicate's check of one value. */
interface Check {
  /** A boolean JavaScript expression over v (an identifier or a member read, read again freely). */
  test: (v: string) => string;
  /** False ⇒ zod fails as well: the check is never false merely to be conservative. */
  exact: boolean;
  /** It accepts undefined (z.unknown()): a required member must then be tested for presence. */
  any: boolean;
}
const ANY: Check = { test: () => "true", exact: true, any: true };
/** Left to zod: never accepted by the fast path. */
const NEVER: Check = { test: () => "false", exact: false, any: false };
const member = (v: string, key: string): string =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${v}.${key}` : `${v}[${JSON.stringify(key)}]`;

const pascal = (name: string): string =>
  name.split(/[._\-]/).filter(Boolean).map((p) => p[0].toUpperCase() + p.slice(1)).join("");
const constName = (name: string): string => name.replace(/[.\-]/g, "_").toUpperCase();
const refName = (ref: string): string => {
  const prefix = "#/components/schemas/";
  if (!ref.startsWith(prefix)) throw new ContractError(`unsupported $ref ${ref}`);
  return ref.slice(prefix.length);
};
const quoteKey = (key: string): string =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key);
const doc = (text: string | undefined, indent = ""): string => {
  if (!text) return "";
  const clean = text.replace(/\*\//g, "*\\/").trim();
  const lines = clean.split("\n");
  if (lines.length === 1) return `${indent}/** ${clean} */\n`;
  return `${indent}/**\n${
    lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")
  }\n${indent} */\n`;
};

class Generator {
  readonly schemas: Record<string, Schema>;
  constructor(readonly contract: Json) {
    this.schemas = contract.components?.schemas ?? {};
  }

  validate(schema: Schema, where: string): void {
    for (const key of Object.keys(schema)) {
      if (!ALLOWED_KEYS.has(key)) {
        throw new ContractError(`${where}: keyword "${key}" is outside the subset`);
      }
    }
    if (schema.$ref) refName(schema.$ref);
    if (schema.$ref && !this.schemas[refName(schema.$ref)]) {
      throw new ContractError(`${where}: $ref ${schema.$ref} does not resolve`);
    }
    for (const [k, v] of Object.entries(schema.properties ?? {})) this.validate(v, `${where}.${k}`);
    if (schema.items) this.validate(schema.items, `${where}[]`);
    if (typeof schema.additionalProperties === "object") {
      this.validate(schema.additionalProperties, `${where}{}`);
    }
    schema.oneOf?.forEach((s, i) => this.validate(s, `${where}|${i}`));
  }

  deref(schema: Schema): Schema {
    return schema.$ref ? this.deref(this.schemas[refName(schema.$ref)]) : schema;
  }

  refs(schema: Schema, out = new Set<string>()): Set<string> {
    if (schema.$ref) out.add(refName(schema.$ref));
    for (const v of Object.values(schema.properties ?? {})) this.refs(v, out);
    if (schema.items) this.refs(schema.items, out);
    if (typeof schema.additionalProperties === "object") {
      this.refs(schema.additionalProperties, out);
    }
    for (const s of schema.oneOf ?? []) this.refs(s, out);
    return out;
  }

  /** Component names in dependency order; a cycle is a contract error (no recursive types). */
  order(): string[] {
    const done = new Set<string>();
    const visiting = new Set<string>();
    const out: string[] = [];
    const visit = (name: string, path: string[]) => {
      if (done.has(name)) return;
      if (visiting.has(name)) {
        throw new ContractError(`recursive schema: ${[...path, name].join(" -> ")}`);
      }
      visiting.add(name);
      for (const dep of this.refs(this.schemas[name])) visit(dep, [...path, name]);
      visiting.delete(name);
      done.add(name);
      out.push(name);
    };
    for (const name of Object.keys(this.schemas).sort()) visit(name, []);
    return out;
  }

  types(schema: Schema): string[] {
    if (schema.type === undefined) return [];
    return Array.isArray(schema.type) ? schema.type : [schema.type];
  }

  // ---- TypeScript types -------------------------------------------------------------------
  ts(schema: Schema, indent: string): string {
    if (schema.$ref) return refName(schema.$ref);
    if (schema.const !== undefined) return JSON.stringify(schema.const);
    if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
    if (schema.oneOf) return schema.oneOf.map((s) => this.ts(s, indent)).join(" | ");
    const types = this.types(schema);
    if (types.length === 0) return "unknown";
    return types.map((t) => this.tsOne(schema, t, indent)).join(" | ");
  }

  tsOne(schema: Schema, type: string, indent: string): string {
    switch (type) {
      case "string":
        return "string";
      case "number":
      case "integer":
        return "number";
      case "boolean":
        return "boolean";
      case "null":
        return "null";
      case "array": {
        const item = schema.items ? this.ts(schema.items, indent) : "unknown";
        return /[ |]/.test(item) ? `Array<${item}>` : `${item}[]`;
      }
      case "object":
        return this.tsObject(schema, indent);
      default:
        throw new ContractError(`unknown type ${type}`);
    }
  }

  tsObject(schema: Schema, indent: string): string {
    const props = Object.entries(schema.properties ?? {});
    const extra = schema.additionalProperties;
    if (props.length === 0) {
      if (extra === false) return "Record<string, never>";
      const value = typeof extra === "object" ? this.ts(extra, indent) : "unknown";
      return `Record<string, ${value}>`;
    }
    return `{\n${this.tsMembers(schema, indent + "  ")}${indent}}`;
  }

  tsMembers(schema: Schema, indent: string): string {
    const required = new Set(schema.required ?? []);
    let out = "";
    for (const [key, prop] of Object.entries(schema.properties ?? {})) {
      out += doc(prop.description ?? this.memberDoc(prop), indent);
      out += `${indent}${quoteKey(key)}${required.has(key) ? "" : "?"}: ${
        this.ts(prop, indent)
      };\n`;
    }
    const extra = schema.additionalProperties;
    if (extra === true || (typeof extra === "object")) {
      out += doc("Members the contract leaves open, kept as they are.", indent);
      out += `${indent}[key: string]: unknown;\n`;
    }
    return out;
  }

  /**
   * The doc of a member the contract does not describe: a constant's value, or the description
   * of the component it (or its items) refers to.
   */
  memberDoc(prop: Schema): string | undefined {
    if (prop.const !== undefined) return `Always \`${JSON.stringify(prop.const)}\`.`;
    const ref = prop.$ref ?? prop.items?.$ref;
    if (!ref) return undefined;
    const name = refName(ref);
    const text = this.schemas[name]?.description;
    return text ? text : `See {@linkcode ${name}}.`;
  }

  // ---- zod validators ---------------------------------------------------------------------
  zod(schema: Schema): string {
    if (schema.$ref) return `${refName(schema.$ref)}_`;
    if (schema.const !== undefined) return `z.literal(${JSON.stringify(schema.const)})`;
    if (schema.enum) return `z.enum(${JSON.stringify(schema.enum)})`;
    if (schema.oneOf) return this.zodUnion(schema.oneOf);
    const types = this.types(schema);
    if (types.length === 0) return "z.unknown()";
    const parts = types.map((t) => this.zodOne(schema, t));
    return parts.length === 1 ? parts[0] : `z.union([${parts.join(", ")}])`;
  }

  /**
   * The tag of a tagged union (every variant an object with the same required const property,
   * a distinct value each), which zod dispatches on; undefined for a plain union.
   */
  unionTag(variants: Schema[]): string | undefined {
    const objects = variants.map((v) => this.deref(v));
    const tags = Object.keys(objects[0]?.properties ?? {}).filter((key) =>
      objects.every((o) =>
        o.properties?.[key]?.const !== undefined && (o.required ?? []).includes(key)
      )
    );
    if (tags.length === 0) return undefined;
    const tag = tags.includes("type") ? "type" : tags[0];
    const values = objects.map((o) => o.properties![tag].const);
    return new Set(values).size === values.length ? tag : undefined;
  }

  /** A tagged union (every variant an object with the same const property) dispatches on it. */
  zodUnion(variants: Schema[]): string {
    const members = variants.map((v) => this.zod(v)).join(", ");
    const tag = this.unionTag(variants);
    if (tag !== undefined) return `z.discriminatedUnion(${JSON.stringify(tag)}, [${members}])`;
    return `z.union([${members}])`;
  }

  zodOne(schema: Schema, type: string): string {
    switch (type) {
      case "string": {
        let s = schema.format === "uri"
          ? "z.url()"
          : schema.format === "date-time"
          ? "z.iso.datetime({ offset: true })"
          : "z.string()";
        if (schema.minLength !== undefined) s += `.min(${schema.minLength})`;
        if (schema.maxLength !== undefined) s += `.max(${schema.maxLength})`;
        if (schema.pattern !== undefined) {
          s += `.regex(new RegExp(${JSON.stringify(schema.pattern)}))`;
        }
        return s;
      }
      case "number":
      case "integer": {
        let s = type === "integer" ? "z.int()" : "z.number()";
        if (schema.minimum !== undefined) s += `.min(${schema.minimum})`;
        if (schema.maximum !== undefined) s += `.max(${schema.maximum})`;
        return s;
      }
      case "boolean":
        return "z.boolean()";
      case "null":
        return "z.null()";
      case "array": {
        let s = `z.array(${schema.items ? this.zod(schema.items) : "z.unknown()"})`;
        if (schema.minItems !== undefined) s += `.min(${schema.minItems})`;
        if (schema.maxItems !== undefined) s += `.max(${schema.maxItems})`;
        return s;
      }
      case "object":
        return this.zodObject(schema);
      default:
        throw new ContractError(`unknown type ${type}`);
    }
  }

  zodObject(schema: Schema): string {
    const props = Object.entries(schema.properties ?? {});
    const extra = schema.additionalProperties;
    if (props.length === 0) {
      if (extra === false) return "z.strictObject({})";
      return `z.record(z.string(), ${typeof extra === "object" ? this.zod(extra) : "z.unknown()"})`;
    }
    const required = new Set(schema.required ?? []);
    for (const key of required) {
      if (!schema.properties?.[key]) throw new ContractError(`required "${key}" is not a property`);
    }
    const fields = props.map(([key, prop]) =>
      `${quoteKey(key)}: ${this.zod(prop)}${required.has(key) ? "" : ".optional()"}`
    );
    // Unknown members pass through unless the contract forbids them: newer peers may add fields.
    if (typeof extra === "object" && this.types(extra).length + (extra.$ref ? 1 : 0) > 0) {
      return `z.object({ ${fields.join(", ")} }).catchall(${this.zod(extra)})`;
    }
    const ctor = extra === false ? "z.strictObject" : "z.looseObject";
    return `${ctor}({ ${fields.join(", ")} })`;
  }

  // ---- fast predicates -------------------------------------------------------------------
  //
  // Every zod validator above has a plain-JavaScript twin built from the same schema by the same
  // rules (each method below mirrors the zod method of the same name and must change with it):
  // true only when the zod validator would succeed AND its output would deep-equal the input, so
  // a caller may keep the input as is; false when the value is invalid or merely awkward (a z.url
  // string, an object that is not a plain one, an own __proto__ key, ...), and the caller then
  // asks zod, which also produces the issues. The predicates are module-level functions: no
  // closure and no regular expression is made per call. tests/protocol/fast-validators.test.ts
  // holds them to that promise against zod itself.

  /** Module-level helper functions of the predicates (nested objects, arrays, unions). */
  readonly helpers: string[] = [];
  /** Helper body → its name: identical helpers are emitted once. */
  readonly helperByBody: Map<string, string> = new Map();
  readonly helperNames: Set<string> = new Set();
  /** Regular expression source → the module-level constant holding it. */
  readonly patterns: Map<string, string> = new Map();
  usesDatetime = false;
  usesCodePoints = false;

  /**
   * Whether the predicate of a schema is exact: false ⇒ zod fails as well (never false merely
   * to be conservative). A plain union may only try its next option after an exact one.
   */
  exact(schema: Schema, seen: Set<string> = new Set()): boolean {
    if (schema.$ref) {
      const name = refName(schema.$ref);
      if (seen.has(name)) return false;
      return this.exact(this.schemas[name], new Set([...seen, name]));
    }
    if (schema.const !== undefined) {
      return schema.const === null || typeof schema.const !== "object";
    }
    if (schema.enum) return true;
    if (schema.oneOf) {
      return this.unionTag(schema.oneOf) === undefined &&
        schema.oneOf.every((s) => this.exact(s, seen));
    }
    return this.types(schema).every((t) =>
      t === "string" ? schema.format !== "uri" : t !== "array" && t !== "object"
    );
  }

  /** Mirrors zod(): the check of a value, as an expression. */
  check(schema: Schema, hint: string): Check {
    if (schema.$ref) {
      const name = refName(schema.$ref);
      return { test: (v) => `is${name}_(${v})`, exact: this.exact(schema), any: false };
    }
    if (schema.const !== undefined) {
      const c = schema.const;
      if (c !== null && typeof c === "object") return NEVER;
      return { test: (v) => `${v} === ${JSON.stringify(c)}`, exact: true, any: false };
    }
    if (schema.enum) {
      const values = schema.enum;
      return {
        test: (v) => `(${values.map((e) => `${v} === ${JSON.stringify(e)}`).join(" || ")})`,
        exact: true,
        any: false,
      };
    }
    if (schema.oneOf) return this.checkUnion(schema.oneOf, hint);
    const types = this.types(schema);
    if (types.length === 0) return ANY;
    if (types.length === 1) return this.checkOne(schema, types[0], hint);
    return this.firstOf(types.map((t) => ({
      exact: this.exact({ ...schema, type: t }),
      build: () => this.checkOne(schema, t, `${hint}_${t}`),
    })));
  }

  /**
   * Mirrors z.union: zod keeps the output of the first option that succeeds, so an option may
   * accept only when every option before it is exact (refuses only what zod refuses). The
   * options after the first inexact one are left to zod.
   */
  firstOf(options: { exact: boolean; build: () => Check }[]): Check {
    const cut = options.findIndex((o) => !o.exact);
    const used = cut < 0 ? options : options.slice(0, cut + 1);
    const checks = used.map((o) => o.build());
    if (checks.length === 1 && used.length === options.length) return checks[0];
    return {
      test: (v) => `(${checks.map((c) => c.test(v)).join(" || ")})`,
      exact: cut < 0,
      any: checks.some((c) => c.any),
    };
  }

  /** Mirrors zodUnion(): a tagged union dispatches on its tag, like z.discriminatedUnion. */
  checkUnion(variants: Schema[], hint: string): Check {
    const body = this.taggedUnionBody(variants, hint);
    if (body !== undefined) return this.helper(hint, body);
    return this.firstOf(variants.map((s, i) => ({
      exact: this.exact(s),
      build: () => this.check(s, `${hint}_${i}`),
    })));
  }

  taggedUnionBody(variants: Schema[], hint: string): string | undefined {
    const tag = this.unionTag(variants);
    if (tag === undefined) return undefined;
    let body = `  if (typeof v !== "object" || v === null) return false;\n`;
    body += `  switch (${member("v", tag)}) {\n`;
    variants.forEach((s, i) => {
      const value = this.deref(s).properties![tag].const;
      body += `    case ${JSON.stringify(value)}:\n      return ${
        this.check(s, `${hint}_${i}`).test("v")
      };\n`;
    });
    body += `    default:\n      return false;\n  }\n`;
    return body;
  }

  /** Mirrors zodOne(). */
  checkOne(schema: Schema, type: string, hint: string): Check {
    const primitive = (test: (v: string) => string): Check => ({ test, exact: true, any: false });
    switch (type) {
      case "string": {
        // z.url() may rewrite the value (trim, tabs and newlines stripped) and needs a URL
        // parser: never accepted here, zod decides.
        if (schema.format === "uri") return NEVER;
        return primitive((v) => {
          const parts = [`typeof ${v} === "string"`];
          if (schema.format === "date-time") {
            this.usesDatetime = true;
            parts.push(`DATETIME_OFFSET_.test(${v})`);
          }
          // zod measures strings in code points (a surrogate pair is one), counting them only
          // where the UTF-16 length leaves it in doubt; so does the predicate.
          const min = schema.minLength;
          const max = schema.maxLength;
          if (min !== undefined && min <= 1) parts.push(`${v}.length >= ${min}`);
          else if (min !== undefined) {
            this.usesCodePoints = true;
            parts.push(
              `(${v}.length >= ${
                2 * min
              } || (${v}.length >= ${min} && codePoints_(${v}) >= ${min}))`,
            );
          }
          if (max !== undefined) {
            this.usesCodePoints = true;
            parts.push(`(${v}.length <= ${max} || codePoints_(${v}) <= ${max})`);
          }
          if (schema.pattern !== undefined) {
            parts.push(`${this.pattern(schema.pattern)}.test(${v})`);
          }
          return parts.join(" && ");
        });
      }
      case "number":
      case "integer":
        return primitive((v) => {
          // z.int(): a safe integer; z.number(): finite (both reject NaN and ±Infinity).
          const parts = [
            type === "integer" ? `Number.isSafeInteger(${v})` : `Number.isFinite(${v})`,
          ];
          if (schema.minimum !== undefined) parts.push(`${v} >= ${schema.minimum}`);
          if (schema.maximum !== undefined) parts.push(`${v} <= ${schema.maximum}`);
          return parts.join(" && ");
        });
      case "boolean":
        return primitive((v) => `typeof ${v} === "boolean"`);
      case "null":
        return primitive((v) => `${v} === null`);
      case "array":
        return this.helper(this.describe(schema, type) ?? hint, this.arrayBody(schema, hint));
      case "object":
        return this.helper(this.describe(schema, type) ?? hint, this.objectBody(schema, hint));
      default:
        throw new ContractError(`unknown type ${type}`);
    }
  }

  /**
   * A name of a helper that several validators share (ArrayOfStringMinLength1, RecordOfUnknown);
   * undefined for an object with members, which is named after where it is.
   */
  describe(schema: Schema, type?: string): string | undefined {
    if (schema.$ref) return refName(schema.$ref);
    if (schema.const !== undefined || schema.enum || schema.oneOf) return undefined;
    const types = type ? [type] : this.types(schema);
    if (types.length === 0) return "Unknown";
    if (types.length > 1) {
      const parts = types.map((t) => this.describe(schema, t));
      return parts.every((p) => p !== undefined) ? parts.join("Or") : undefined;
    }
    const bounds = (min?: number, max?: number, what = "") =>
      `${min !== undefined ? `Min${what}${min}` : ""}${
        max !== undefined ? `Max${what}${max}` : ""
      }`;
    switch (types[0]) {
      case "string": {
        if (schema.pattern !== undefined) return undefined;
        const base = schema.format === "date-time" ? "DateTime" : "String";
        return base + bounds(schema.minLength, schema.maxLength, "Length");
      }
      case "integer":
      case "number":
        return (types[0] === "integer" ? "Int" : "Number") + bounds(schema.minimum, schema.maximum)
          .replace(/-/g, "Minus").replace(/\./g, "_");
      case "boolean":
        return "Boolean";
      case "null":
        return "Null";
      case "array": {
        const item = schema.items ? this.describe(schema.items) : "Unknown";
        return item && `ArrayOf${item}${bounds(schema.minItems, schema.maxItems, "Items")}`;
      }
      case "object": {
        if (Object.keys(schema.properties ?? {}).length > 0) return undefined;
        const extra = schema.additionalProperties;
        if (extra === false) return "EmptyObject";
        const value = typeof extra === "object" ? this.describe(extra) : "Unknown";
        return value && `RecordOf${value}`;
      }
    }
    return undefined;
  }

  /** Mirrors z.array(): a plain array (holes and undefined items of z.unknown() are refused). */
  arrayBody(schema: Schema, hint: string): string {
    const item = schema.items ? this.check(schema.items, `${hint}_item`) : ANY;
    let body = `  if (!isPlainArray_(v)) return false;\n`;
    if (schema.minItems !== undefined) {
      body += `  if (v.length < ${schema.minItems}) return false;\n`;
    }
    if (schema.maxItems !== undefined) {
      body += `  if (v.length > ${schema.maxItems}) return false;\n`;
    }
    const test = item.test("e");
    const full = item.any
      ? (test === "true" ? "e !== undefined" : `e !== undefined && (${test})`)
      : test;
    body += `  for (let i = 0; i < v.length; i++) {\n    const e = v[i];\n`;
    body += `    if (!(${full})) return false;\n  }\n  return true;\n`;
    return body;
  }

  /** Mirrors zodObject(): z.looseObject, z.strictObject, .catchall() and z.record(z.string()). */
  objectBody(schema: Schema, hint: string, extraCheck = ""): string {
    const props = Object.entries(schema.properties ?? {});
    const extra = schema.additionalProperties;
    // A plain object (Object.prototype, no own __proto__ key): zod's output is one.
    let body = `  if (!isPlain_(v)) return false;\n`;
    if (props.length === 0) {
      if (extra === false) return body + `  for (const _ in v) return false;\n  return true;\n`;
      const value = typeof extra === "object" ? this.check(extra, `${hint}_value`) : ANY;
      const test = value.test("v[k]");
      if (test !== "true") body += `  for (const k in v) if (!(${test})) return false;\n`;
      return body + `  return true;\n`;
    }
    const required = new Set(schema.required ?? []);
    for (const [key, prop] of props) {
      // zod never reads a declared __proto__ member: leave such an object to zod.
      if (key === "__proto__") return `  return false;\n`;
      const c = this.check(prop, `${hint}_${key.replace(/[^A-Za-z0-9_$]/g, "_")}`);
      const at = member("v", key);
      const test = c.test(at);
      // A member Object.prototype has too (toString, constructor, ...): zod reads the inherited
      // one when the value has none of its own, and then fails or copies it; leave that to zod.
      if (key in Object.prototype) {
        body += `  if (!HAS_OWN_.call(v, ${JSON.stringify(key)})) return false;\n`;
      }
      if (required.has(key)) {
        // A required member must be present, even where its schema accepts undefined.
        if (test === "false") return `  return false;\n`;
        if (c.any) body += `  if (!(${JSON.stringify(key)} in v)) return false;\n`;
        if (test !== "true") body += `  if (!(${test})) return false;\n`;
      } else if (test === "false") {
        body += `  if (${at} !== undefined) return false;\n`;
      } else if (test !== "true") {
        // .optional(): absent, or present as undefined (zod keeps the key, undefined).
        body += `  if (${at} !== undefined && !(${test})) return false;\n`;
      }
    }
    const known = props.map(([key]) => `k === ${JSON.stringify(key)}`).join(" || ");
    if (typeof extra === "object" && this.types(extra).length + (extra.$ref ? 1 : 0) > 0) {
      const test = this.check(extra, `${hint}_value`).test("v[k]");
      if (test !== "true") {
        body += `  for (const k in v) {\n    if (${known}) continue;\n`;
        body += `    if (!(${test})) return false;\n  }\n`;
      }
    } else if (extra === false) {
      body += `  for (const k in v) if (!(${known})) return false;\n`;
    }
    return body + extraCheck + `  return true;\n`;
  }

  /** A module-level helper function of the given body (over v); identical bodies share one. */
  helper(hint: string, body: string): Check {
    let name = this.helperByBody.get(body);
    if (name === undefined) {
      const base = `is${hint}_`;
      name = base;
      for (let n = 2; this.helperNames.has(name); n++) name = `${base}${n}`;
      this.helperNames.add(name);
      this.helperByBody.set(body, name);
      this.helpers.push(`function ${name}(v: any): boolean {\n${body}}\n`);
    }
    const fn = name;
    return { test: (v) => `${fn}(${v})`, exact: false, any: false };
  }

  /** The module-level constant holding a pattern (compiled once, as zod compiles it). */
  pattern(source: string): string {
    let name = this.patterns.get(source);
    if (name === undefined) {
      name = `PATTERN_${this.patterns.size}_`;
      this.patterns.set(source, name);
    }
    return name;
  }

  /** The predicate function of a named validator (a component, or a method's params). */
  predicateFunction(name: string, schema: Schema, extraCheck = ""): string {
    const types = this.types(schema);
    const plain = !schema.$ref && !schema.oneOf && !schema.enum && schema.const === undefined &&
      types.length === 1;
    let body: string | undefined;
    if (plain && types[0] === "object") body = this.objectBody(schema, name, extraCheck);
    else if (extraCheck) {
      throw new ContractError(`${name}: x-tool-input on params that are no object`);
    } else if (plain && types[0] === "array") body = this.arrayBody(schema, name);
    else if (schema.oneOf) body = this.taggedUnionBody(schema.oneOf, name);
    body ??= `  return ${this.check(schema, name).test("v")};\n`;
    return `function is${name}_(v: any): v is ${name} {\n${body}}\n`;
  }

  /** The fast predicates of every validator of the module, with their helpers and constants. */
  predicatesSection(order: string[], methods: Method[], tools: Record<string, ToolSpec>): string {
    const roots = [...order, ...methods.map((m) => `${pascal(m.name)}Params`)];
    for (const name of roots) this.helperNames.add(`is${name}_`);
    let functions = "";
    for (const name of order) functions += this.predicateFunction(name, this.schemas[name]);
    const linked = methods.some((m) => m["x-tool-input"]);
    if (linked) {
      functions += `/** checkToolInput's check: a built-in tool's input passes its validator. */\n`;
      functions += `function toolInputAccepted_(tool: unknown, input: unknown): boolean {\n`;
      functions += `  switch (tool) {\n`;
      for (const [name, t] of Object.entries(tools)) {
        functions += `    case ${JSON.stringify(name)}:\n      return ${
          this.check(t.input, `Tool_${name.replace(/[^A-Za-z0-9_$]/g, "_")}_input`).test("input")
        };\n`;
      }
      functions += `    default:\n      return true;\n  }\n}\n`;
    }
    for (const m of methods) {
      const link = m["x-tool-input"];
      const extra = link
        ? `  if (!toolInputAccepted_(${member("v", link.tool)}, ${
          member("v", link.input)
        })) return false;\n`
        : "";
      functions += this.predicateFunction(`${pascal(m.name)}Params`, this.paramsSchema(m), extra);
    }
    let out = `\n// ---- Fast validators ----\n`;
    out +=
      `// One plain predicate per validator above, generated from the same contract: true only when\n`;
    out +=
      `// the validator succeeds and its output deep-equals the input, so the input may be used as\n`;
    out +=
      `// is; false when invalid or not provably so (the caller then parses with zod). Exact for\n`;
    out +=
      `// JSON data; objects must be plain (Object.prototype, no own __proto__ member) and arrays plain\n`;
    out +=
      `// arrays; symbol keys, accessors and non-index members of arrays are not inspected.\n\n`;
    out += `const OBJECT_PROTOTYPE_: object = Object.prototype;\n`;
    out += `const ARRAY_PROTOTYPE_: object = Array.prototype;\n`;
    for (const [source, name] of this.patterns) {
      out += `const ${name}: RegExp = new RegExp(${JSON.stringify(source)});\n`;
    }
    if (this.usesDatetime) {
      out += `/** The pattern of z.iso.datetime({ offset: true }), taken from zod itself. */\n`;
      out +=
        `const DATETIME_OFFSET_: RegExp = z.iso.datetime({ offset: true }).def.pattern ?? /(?!)/;\n`;
    }
    if (this.usesCodePoints) {
      out += `/** The length zod gives a string: its code points (a surrogate pair counts once). */
function codePoints_(s: string): number {
  let count = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    if ((s.charCodeAt(i) & 0xfc00) === 0xd800 && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      count--;
      i++;
    }
  }
  return count;
}
`;
    }
    out +=
      `const HAS_OWN_: (this: unknown, key: PropertyKey) => boolean = Object.prototype.hasOwnProperty;
/**
 * Whether reading __proto__ gives the prototype: on Node and Bun, where one (inlined) read both
 * checks the prototype and sees an own __proto__ member (which shadows the accessor), for a
 * fraction of Object.getPrototypeOf's cost; not in Deno, nor under node --disable-proto.
 */
const READS_PROTO_: boolean = readsProto_();
function readsProto_(): boolean {
  try {
    return ({} as any).__proto__ === OBJECT_PROTOTYPE_ && ([] as any).__proto__ === ARRAY_PROTOTYPE_ &&
      (JSON.parse('{"__proto__":0}') as any).__proto__ === 0;
  } catch {
    return false;
  }
}
/** An object zod's output is a copy of: its prototype Object.prototype, no own __proto__ member. */
function isPlain_(v: any): boolean {
  if (typeof v !== "object" || v === null) return false;
  if (READS_PROTO_) return v.__proto__ === OBJECT_PROTOTYPE_;
  return Object.getPrototypeOf(v) === OBJECT_PROTOTYPE_ && !HAS_OWN_.call(v, "__proto__");
}
/** An array zod's output is a copy of: its prototype Array.prototype. */
function isPlainArray_(v: any): boolean {
  if (!Array.isArray(v)) return false;
  return (READS_PROTO_ ? (v as any).__proto__ : Object.getPrototypeOf(v)) === ARRAY_PROTOTYPE_;
}
`;
    out += functions;
    out += this.helpers.join("");
    return out;
  }

  paramsSchema(method: Method): Schema {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const p of method.params) {
      properties[p.name] = p.description && !p.schema.description
        ? { ...p.schema, description: p.description }
        : p.schema;
      if (p.required) required.push(p.name);
    }
    return { type: "object", properties, required };
  }

  // ---- output -----------------------------------------------------------------------------
  contractModule(): string {
    const methods: Method[] = this.contract.methods;
    const tools: Record<string, ToolSpec> = this.contract["x-tools"] ?? {};
    const names = new Set<string>();
    for (const m of methods) {
      if (names.has(m.name)) throw new ContractError(`duplicate method ${m.name}`);
      names.add(m.name);
      if (m["x-kind"] === "request" && !m.result?.schema.$ref) {
        throw new ContractError(`${m.name}: a request's result must be a $ref`);
      }
      if (m["x-kind"] === "notification" && m.result) {
        throw new ContractError(`${m.name}: a notification has no result`);
      }
      m.params.forEach((p) => this.validate(p.schema, `${m.name}(${p.name})`));
      if (m.result) this.validate(m.result.schema, `${m.name} result`);
    }
    for (const [name, schema] of Object.entries(this.schemas)) this.validate(schema, name);

    let out =
      `// Generated by scripts/gen-contract.ts from protocol/contract/openrpc.json. Do not edit:\n`;
    out += `// change the contract and run \`npm run gen\`.\n`;
    out += `// deno-lint-ignore-file\n`;
    out += `import * as z from "zod";\n\n`;
    out += `/** The contract's version (OpenRPC info.version). */\n`;
    out += `export const CONTRACT_VERSION = ${JSON.stringify(this.contract.info.version)};\n`;
    const protocols: string[] = this.contract.info["x-protocols"];
    out += `/** The WebSocket subprotocols of the contract, newest first. */\n`;
    out += `export const PROTOCOLS: readonly ProtocolVersion[] = ${
      JSON.stringify([...protocols].reverse())
    };\n`;
    out += `/** A subprotocol (protocol version) name. */\n`;
    out += `export type ProtocolVersion = ${
      protocols.map((p) => JSON.stringify(p)).join(" | ")
    };\n\n`;

    out += `// ---- Component types ----\n\n`;
    const order = this.order();
    const resultOf = new Map<string, string>();
    for (const m of methods) if (m.result) resultOf.set(refName(m.result.schema.$ref!), m.name);
    for (const name of order) {
      const method = resultOf.get(name);
      out += this.typeDecl(name, this.schemas[name], method && `The result of \`${method}\`.`);
    }
    out += `\n// ---- Method params ----\n\n`;
    for (const m of methods) {
      out += this.typeDecl(
        `${pascal(m.name)}Params`,
        this.paramsSchema(m),
        m.summary ?? `Params of ${m.name}.`,
      );
    }

    out += `\n// ---- Validators ----\n\n`;
    for (const name of order) out += `const ${name}_ = ${this.zod(this.schemas[name])};\n`;
    out +=
      `/** Input validators of the built-in tools (x-tools), for methods marked x-tool-input. */\n`;
    out +=
      `const TOOL_INPUTS_: ReadonlyMap<string, z.ZodType<unknown>> = new Map<string, z.ZodType<unknown>>([\n`;
    for (const [name, t] of Object.entries(tools)) {
      out += `  [${JSON.stringify(name)}, ${this.zod(t.input)}],\n`;
    }
    out += `]);\n`;
    out += `function checkToolInput(toolKey: string, inputKey: string) {\n`;
    out += `  return (params: Record<string, unknown>, ctx: z.RefinementCtx): void => {\n`;
    out += `    const schema = TOOL_INPUTS_.get(params[toolKey] as string);\n`;
    out += `    if (!schema) return;\n`;
    out += `    const checked = schema.safeParse(params[inputKey]);\n`;
    out += `    if (checked.success) return;\n`;
    out += `    for (const issue of checked.error.issues) {\n`;
    out +=
      `      ctx.addIssue({ code: "custom", message: issue.message, path: [inputKey, ...issue.path] });\n`;
    out += `    }\n  };\n}\n`;
    for (const m of methods) {
      let expr = this.zod(this.paramsSchema(m));
      const link = m["x-tool-input"];
      if (link) {
        expr += `.superRefine(checkToolInput(${JSON.stringify(link.tool)}, ${
          JSON.stringify(link.input)
        }))`;
      }
      out += `const ${pascal(m.name)}Params_ = ${expr};\n`;
    }
    out += this.predicatesSection(order, methods, tools);
    out += `\n`;
    const exported = [...order, ...methods.map((m) => `${pascal(m.name)}Params`)];
    for (const name of exported) {
      out += `/** Validates {@linkcode ${name}}. */\n`;
      out += `export const ${name}Schema: z.ZodType<${name}> = ${name}_;\n`;
      out +=
        `/**\n * Fast check of {@linkcode ${name}Schema}, without zod: true only when the schema accepts\n`;
      out +=
        ` * the value and its output deep-equals it (use the value as is); false when the value is\n`;
      out +=
        ` * invalid or not provably valid (then parse with the schema, which gives the issues).\n */\n`;
      out += `export const is${name}: (value: unknown) => value is ${name} = is${name}_;\n`;
    }

    out += `\n// ---- Methods ----\n\n`;
    out += `/** Method names, as \`methods.TOOL_CALL\` === "tool.call". */\n`;
    out += `export const methods: {\n${
      methods.map((m) => `  readonly ${constName(m.name)}: ${JSON.stringify(m.name)};`).join("\n")
    }\n} = {\n`;
    out += methods.map((m) => `  ${constName(m.name)}: ${JSON.stringify(m.name)},`).join("\n") +
      "\n};\n\n";

    const requests = methods.filter((m) => m["x-kind"] === "request");
    const notes = methods.filter((m) => m["x-kind"] === "notification");
    out += `/** Every request method: its params and result types. */\n`;
    out += `export interface RequestMap {\n`;
    for (const m of requests) {
      out += doc(m.summary, "  ");
      out += `  ${JSON.stringify(m.name)}: { params: ${pascal(m.name)}Params; result: ${
        refName(m.result!.schema.$ref!)
      } };\n`;
    }
    out +=
      `}\n\n/** Every notification method: its params type. */\nexport interface NotificationMap {\n`;
    for (const m of notes) {
      out += doc(m.summary, "  ");
      out += `  ${JSON.stringify(m.name)}: ${pascal(m.name)}Params;\n`;
    }
    out += `}\n\n`;
    const union = (ms: Method[]) =>
      ms.length ? ms.map((m) => JSON.stringify(m.name)).join(" | ") : "never";
    const sentBy = (ms: Method[], dir: string) =>
      ms.filter((m) => m["x-direction"] === dir || m["x-direction"] === "both");
    out += `/** A request method name. */\nexport type RequestMethod = keyof RequestMap;\n`;
    out +=
      `/** A notification method name. */\nexport type NotificationMethod = keyof NotificationMap;\n`;
    out +=
      `/** Any method name. */\nexport type MethodName = RequestMethod | NotificationMethod;\n`;
    out +=
      `/** Requests an executor sends (the harness serves them). */\nexport type ExecutorRequestMethod = ${
        union(sentBy(requests, "executor_to_harness"))
      };\n`;
    out +=
      `/** Requests a harness sends (the executor serves them). */\nexport type HarnessRequestMethod = ${
        union(sentBy(requests, "harness_to_executor"))
      };\n`;
    out += `/** Notifications an executor sends. */\nexport type ExecutorNotificationMethod = ${
      union(sentBy(notes, "executor_to_harness"))
    };\n`;
    out += `/** Notifications a harness sends. */\nexport type HarnessNotificationMethod = ${
      union(sentBy(notes, "harness_to_executor"))
    };\n`;
    out +=
      `/** Params of a method. */\nexport type ParamsOf<M extends MethodName> = M extends RequestMethod ? RequestMap[M]["params"] : M extends NotificationMethod ? NotificationMap[M] : never;\n`;
    out +=
      `/** Result of a request method. */\nexport type ResultOf<M extends RequestMethod> = RequestMap[M]["result"];\n\n`;

    out +=
      `/** Who sends a method. */\nexport type MethodDirection = "executor_to_harness" | "harness_to_executor" | "both";\n\n`;
    out += `/** What the contract says about one method. */\nexport interface MethodSpec {\n`;
    out +=
      `  /** The method's name on the wire. */\n  readonly name: MethodName;\n  /** A request is answered; a notification is not. */\n  readonly kind: "request" | "notification";\n  /** Which end sends it. */\n  readonly direction: MethodDirection;\n`;
    out +=
      `  /** The protocol version that introduced it. */\n  readonly since: ProtocolVersion;\n`;
    out +=
      `  /** The executor capability that gates it (a dotted path into the capabilities object). */\n  readonly capability?: string;\n`;
    out +=
      `  /** What makes a repeat of it harmless (a params member, or "jsonrpc_id"). */\n  readonly idempotencyKey?: string;\n`;
    out +=
      `  /** A lossy notification: the receiver catches up without it, so a congested link drops it. */\n  readonly lossy?: true;\n`;
    out +=
      `  /** Validates its params. */\n  readonly params: z.ZodType<unknown>;\n  /** Validates its result. Absent for notifications. */\n  readonly result?: z.ZodType<unknown>;\n`;
    out += `  /**
   * Fast check of params, generated from the contract with \`params\`: true only when \`params\`
   * accepts the value AND its output deep-equals the value, so the value may be used as is (no
   * parse); false when the value is invalid or not provably so (a URL member, a non-plain object,
   * ...): then parse with \`params\`, which also gives the issues. For tool.call it applies the
   * built-in tool's input check too.
   */
  readonly acceptsParams: (value: unknown) => boolean;
  /** The same fast check for \`result\`. Absent for notifications. */
  readonly acceptsResult?: (value: unknown) => boolean;
  /** The contract's one-line summary of it. */
  readonly summary: string;\n}\n\n`;
    out += `/** Every method of the contract, by name. */\n`;
    out +=
      `export const METHOD_SPECS: ReadonlyMap<string, MethodSpec> = new Map<string, MethodSpec>([\n`;
    for (const m of methods) {
      const fields = [
        `name: ${JSON.stringify(m.name)}`,
        `kind: ${JSON.stringify(m["x-kind"])}`,
        `direction: ${JSON.stringify(m["x-direction"])}`,
        `since: ${JSON.stringify(m["x-since"])}`,
        ...(m["x-capability"] ? [`capability: ${JSON.stringify(m["x-capability"])}`] : []),
        ...(m["x-idempotency-key"]
          ? [`idempotencyKey: ${JSON.stringify(m["x-idempotency-key"])}`]
          : []),
        ...(m["x-lossy"] ? [`lossy: true`] : []),
        `params: ${pascal(m.name)}Params_`,
        ...(m.result ? [`result: ${refName(m.result.schema.$ref!)}_`] : []),
        `acceptsParams: is${pascal(m.name)}Params_`,
        ...(m.result ? [`acceptsResult: is${refName(m.result.schema.$ref!)}_`] : []),
        `summary: ${JSON.stringify(m.summary ?? "")}`,
      ];
      out += `  [${JSON.stringify(m.name)}, { ${fields.join(", ")} }],\n`;
    }
    out += `]);\n\n`;

    out += `// ---- Tools ----\n\n`;
    const toolNames = Object.keys(tools);
    out +=
      `/** Built-in tools with typed slots: input and result types. */\nexport interface ToolMap {\n`;
    for (const [name, t] of Object.entries(tools)) {
      this.validate(t.input, `tool ${name} input`);
      if (t.result) this.validate(t.result, `tool ${name} result`);
      out += doc(t.description, "  ");
      out += `  ${quoteKey(name)}: { input: ${this.ts(t.input, "  ")}; result: ${
        t.result ? this.ts(t.result, "  ") : "unknown"
      } };\n`;
    }
    out += `}\n/** A built-in tool name. */\nexport type ToolName = keyof ToolMap;\n`;
    out +=
      `/** What the contract says about one built-in tool. */\nexport interface ToolSpec {\n  /** The tool's name in \`tool.call\`. */\n  readonly name: ToolName;\n  /** The capability group that advertises it ("shell", "files"). */\n  readonly group: string;\n  /** Validates its input. */\n  readonly input: z.ZodType<unknown>;\n  /** Validates its structured result, when the contract gives one. */\n  readonly result?: z.ZodType<unknown>;\n}\n`;
    out +=
      `/** The built-in tools, by name. */\nexport const TOOL_SPECS: ReadonlyMap<string, ToolSpec> = new Map<string, ToolSpec>([\n`;
    for (const [name, t] of Object.entries(tools)) {
      out += `  [${JSON.stringify(name)}, { name: ${JSON.stringify(name)}, group: ${
        JSON.stringify(t.group)
      }, input: ${this.zod(t.input)}${t.result ? `, result: ${this.zod(t.result)}` : ""} }],\n`;
    }
    out += `]);\n`;
    out += `/** The built-in tool names. */\nexport const TOOL_NAMES: readonly ToolName[] = ${
      JSON.stringify(toolNames)
    };\n`;
    return out;
  }

  typeDecl(name: string, schema: Schema, fallbackDoc?: string): string {
    const text = doc(schema.description ?? fallbackDoc);
    const s = schema.$ref ? schema : schema;
    const types = this.types(s);
    if (
      !s.$ref && !s.oneOf && !s.enum && s.const === undefined && types.length === 1 &&
      types[0] === "object" &&
      Object.keys(s.properties ?? {}).length > 0
    ) {
      return `${text}export interface ${name} {\n${this.tsMembers(s, "  ")}}\n\n`;
    }
    return `${text}export type ${name} = ${this.ts(s, "")};\n\n`;
  }

  errorsModule(): string {
    const errors: Record<string, ErrorSpec> = this.contract.components?.errors ?? {};
    const closes: Record<string, CloseSpec> = this.contract["x-close-codes"] ?? {};
    let out =
      `// Generated by scripts/gen-contract.ts from protocol/contract/openrpc.json. Do not edit:\n`;
    out += `// change the contract and run \`npm run gen\`.\n`;
    out += `import { type JsonRpcErrorObject, ProtocolError } from "../errors.ts";\n\n`;
    const entries = Object.entries(errors).sort((a, b) => b[1].code - a[1].code);
    out += `/** JSON-RPC error codes of the contract. */\nexport const ErrorCode: {\n`;
    out += entries.map(([, e]) => `  readonly ${constName(e["x-name"])}: ${e.code};`).join("\n") +
      "\n} = {\n";
    out += entries.map(([, e]) => `  ${constName(e["x-name"])}: ${e.code},`).join("\n") +
      "\n};\n\n";
    out +=
      `/** Codes after which a request may be sent again unchanged (the contract's x-retryable). */\n`;
    out += `export const RETRYABLE_ERROR_CODES: ReadonlySet<number> = new Set([${
      entries.filter(([, e]) => e["x-retryable"]).map(([, e]) => e.code).join(", ")
    }]);\n\n`;
    const classes: [number, string][] = [];
    for (const [key, e] of entries) {
      const cls = key.endsWith("Error") ? key : `${key}Error`;
      classes.push([e.code, cls]);
      out += doc(`${e.code} ${e["x-name"]}: ${e.description ?? e.message}`);
      out += `export class ${cls} extends ProtocolError {\n`;
      out +=
        `  /** The JSON-RPC code of this error. */\n  static readonly code: ${e.code} = ${e.code};\n`;
      out +=
        `  /** An error to throw from a handler (or received): \`data\` goes on the wire as is. */\n`;
      out += `  constructor(message: string = ${JSON.stringify(e.message)}, data?: unknown) {\n`;
      out += `    super(${e.code}, message, data);\n    this.name = ${
        JSON.stringify(cls)
      };\n  }\n}\n\n`;
    }
    out +=
      `const ERROR_CLASSES: ReadonlyMap<number, new (message?: string, data?: unknown) => ProtocolError> = new Map<number, new (message?: string, data?: unknown) => ProtocolError>([\n`;
    out += classes.map(([code, cls]) => `  [${code}, ${cls}],`).join("\n") + "\n]);\n\n";
    out +=
      `/** Turns a received JSON-RPC error object into the contract's error class for its code. */\n`;
    out += `export function protocolErrorFromWire(error: JsonRpcErrorObject): ProtocolError {\n`;
    out += `  const cls = ERROR_CLASSES.get(error.code);\n`;
    out +=
      `  return cls ? new cls(error.message, error.data) : new ProtocolError(error.code, error.message, error.data);\n}\n\n`;
    const closeEntries = Object.values(closes).sort((a, b) => a.code - b.code);
    out += `/** WebSocket close codes of the contract. */\nexport const CloseCode: {\n`;
    out += closeEntries.map((c) => `  readonly ${constName(c.name)}: ${c.code};`).join("\n") +
      "\n} = {\n";
    out += closeEntries.map((c) => `  ${constName(c.name)}: ${c.code},`).join("\n") + "\n};\n\n";
    out +=
      `/** What the contract says about a close code. */\nexport interface CloseCodeSpec {\n  /** The WebSocket close code. */\n  readonly code: number;\n  /** The contract's name of it. */\n  readonly name: string;\n  /** Whether an executor that sees it reconnects (false: it stops for good). */\n  readonly reconnect: boolean;\n  /** What it means, and who sends it. */\n  readonly description: string;\n}\n\n`;
    out +=
      `/** The close codes of the contract, by code. */\nexport const CLOSE_CODES: ReadonlyMap<number, CloseCodeSpec> = new Map<number, CloseCodeSpec>([\n`;
    out +=
      closeEntries.map((c) =>
        `  [${c.code}, { code: ${c.code}, name: ${
          JSON.stringify(c.name)
        }, reconnect: ${c.reconnect}, description: ${JSON.stringify(c.description ?? "")} }],`
      ).join("\n") + "\n]);\n";
    return out;
  }
}

/** The contract's schema with every `$ref` replaced by the component it names (no cycles). */
function inlined(schema: Json, components: Record<string, Json>, seen: string[] = []): Json {
  if (Array.isArray(schema)) return schema.map((item) => inlined(item, components, seen));
  if (schema === null || typeof schema !== "object") return schema;
  if (typeof schema.$ref === "string") {
    const name = refName(schema.$ref);
    if (seen.includes(name)) throw new ContractError(`${name}: a cycle of $refs`);
    return inlined(components[name], components, [...seen, name]);
  }
  return Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [key, inlined(value, components, seen)]),
  );
}

/**
 * The JSON Schemas of the built-in tools' inputs (x-tools), references resolved: what a form or
 * a model reads, with the contract's descriptions (the zod validators carry none).
 */
function toolSchemasModule(contract: Json): string {
  const tools: Record<string, Json> = contract["x-tools"] ?? {};
  const components = contract.components.schemas;
  let out =
    `// Generated by scripts/gen-contract.ts from protocol/contract/openrpc.json. Do not edit:\n`;
  out += `// change the contract and run \`npm run gen\`.\n`;
  out += `import type { ToolName } from "./contract.ts";\n\n`;
  out +=
    `/** A built-in tool's input as the contract describes it, in JSON Schema (draft 2020-12). */\n`;
  out +=
    `export interface ToolJsonSchema {\n  /** What the tool does. */\n  readonly description: string;\n`;
  out +=
    `  /** The JSON Schema of its input. */\n  readonly input: Readonly<Record<string, unknown>>;\n`;
  out += `}\n\n`;
  out += `/** The built-in tools' JSON Schemas, by name (\`$ref\`s resolved). */\n`;
  out += `export const TOOL_JSON_SCHEMAS: { readonly [N in ToolName]: ToolJsonSchema } = {\n`;
  for (const [name, tool] of Object.entries(tools)) {
    const entry = {
      description: tool.description ?? "",
      input: inlined(tool.input, components),
    };
    out += `  ${JSON.stringify(name)}: ${JSON.stringify(entry)},\n`;
  }
  out += `};\n`;
  return out;
}

/** A generated module's exported names, types and values apart (read from its text). */
function exportedNames(text: string): { types: string[]; values: string[] } {
  const types: string[] = [];
  const values: string[] = [];
  for (
    const [, kind, name] of text.matchAll(/^export (type|interface|const|function|class) (\w+)/gm)
  ) {
    (kind === "type" || kind === "interface" ? types : values).push(name);
  }
  const byName = (a: string, b: string) => a.toLowerCase() < b.toLowerCase() ? -1 : 1;
  return { types: types.sort(byName), values: values.sort(byName) };
}

/**
 * The `/protocol` face with its generated-names block rewritten: one `export type { ... }` and
 * one `export { ... }` per generated module, so that no schema or predicate leaves as a type.
 */
function faceModule(face: string, modules: Record<string, string>): string {
  const begin = face.indexOf(BEGIN_NAMES);
  const end = face.indexOf(END_NAMES);
  if (begin < 0 || end < begin) {
    throw new ContractError(`protocol/mod.ts lacks its ${BEGIN_NAMES} ... ${END_NAMES} block`);
  }
  let block = `${BEGIN_NAMES}\n`;
  for (const [name, text] of Object.entries(modules)) {
    const { types, values } = exportedNames(text);
    if (types.length) block += `export type { ${types.join(", ")} } from "./generated/${name}";\n`;
    if (values.length) block += `export { ${values.join(", ")} } from "./generated/${name}";\n`;
  }
  return face.slice(0, begin) + block + face.slice(end);
}

function formatted(files: Record<string, string>): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), "bma-gen-"));
  try {
    const paths = Object.keys(files).map((name) => {
      const path = join(dir, name);
      writeFileSync(path, files[name]);
      return path;
    });
    const deno = join(root, "node_modules/.bin/deno");
    execFileSync(deno, ["fmt", "--quiet", "--no-config", "--line-width", "100", ...paths], {
      stdio: ["ignore", "inherit", "inherit"],
    });
    return Object.fromEntries(
      Object.keys(files).map((name, i) => [name, readFileSync(paths[i], "utf8")]),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function main(): void {
  const check = process.argv.includes("--check");
  const contract = JSON.parse(readFileSync(contractPath, "utf8"));
  const gen = new Generator(contract);
  let files: Record<string, string>;
  let face: string;
  try {
    files = formatted({
      "contract.ts": gen.contractModule(),
      "errors.ts": gen.errorsModule(),
      "tool-schemas.ts": toolSchemasModule(contract),
    });
    const faceText = faceModule(readFileSync(facePath, "utf8"), {
      "contract.ts": files["contract.ts"],
      "errors.ts": files["errors.ts"],
    });
    face = formatted({ "mod.ts": faceText })["mod.ts"];
  } catch (error) {
    if (error instanceof ContractError) {
      console.error(`contract error: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
  let drift = false;
  for (const [name, text] of Object.entries(files)) {
    const path = join(outDir, name);
    let current = "";
    try {
      current = readFileSync(path, "utf8");
    } catch { /* missing */ }
    if (current === text) continue;
    if (check) {
      console.error(`protocol/generated/${name} is out of date with the contract: run npm run gen`);
      drift = true;
    } else {
      writeFileSync(path, text);
      console.log(`wrote protocol/generated/${name}`);
    }
  }
  if (readFileSync(facePath, "utf8") !== face) {
    if (check) {
      console.error("protocol/mod.ts's generated names are out of date: run npm run gen");
      drift = true;
    } else {
      writeFileSync(facePath, face);
      console.log("wrote protocol/mod.ts (its generated names)");
    }
  }
  if (drift) process.exit(1);
  if (check) console.log("generated files match the contract");
}

main();
