/**
 * The fast predicates: every zod validator (zod.ts) has a plain-JavaScript twin built from the
 * same schema by the same rules (each method here mirrors the zod method of the same name and must
 * change with it): true only when the zod validator would succeed AND its output would deep-equal
 * the input, so a caller may keep the input as is; false when the value is invalid or merely
 * awkward (a z.url string, an object that is not a plain one, an own __proto__ key, ...), and the
 * caller then asks zod, which also produces the issues. The predicates are module-level functions:
 * no closure and no regular expression is made per call. tests/protocol/fast-validators.test.ts
 * holds them to that promise against zod itself.
 */
import {
  ANY,
  type Check,
  ContractError,
  member,
  type Method,
  NEVER,
  pascal,
  refName,
  type Schema,
  type SchemaSet,
  type ToolSpec,
} from "./schema.ts";

export class PredicateWriter {
  constructor(private readonly set: SchemaSet) {}

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
      return this.exact(this.set.schemas[name], new Set([...seen, name]));
    }
    if (schema.const !== undefined) {
      return schema.const === null || typeof schema.const !== "object";
    }
    if (schema.enum) return true;
    if (schema.oneOf) {
      return this.set.unionTag(schema.oneOf) === undefined &&
        schema.oneOf.every((s) => this.exact(s, seen));
    }
    return this.set.types(schema).every((t) =>
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
    const types = this.set.types(schema);
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
    const tag = this.set.unionTag(variants);
    if (tag === undefined) return undefined;
    let body = `  if (typeof v !== "object" || v === null) return false;\n`;
    body += `  switch (${member("v", tag)}) {\n`;
    variants.forEach((s, i) => {
      const value = this.set.deref(s).properties![tag].const;
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
    const types = type ? [type] : this.set.types(schema);
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
    if (typeof extra === "object" && this.set.types(extra).length + (extra.$ref ? 1 : 0) > 0) {
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
    const types = this.set.types(schema);
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
    for (const name of order) functions += this.predicateFunction(name, this.set.schemas[name]);
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
      functions += this.predicateFunction(
        `${pascal(m.name)}Params`,
        this.set.paramsSchema(m),
        extra,
      );
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
/**
 * An object zod's output is a copy of: its prototype Object.prototype, no own __proto__ member,
 * and its constructor Object's (zod refuses one whose own constructor member is a function of
 * another kind: any own constructor member is left to zod to judge).
 */
function isPlain_(v: any): boolean {
  if (typeof v !== "object" || v === null) return false;
  if (READS_PROTO_) return v.__proto__ === OBJECT_PROTOTYPE_ && v.constructor === Object;
  return Object.getPrototypeOf(v) === OBJECT_PROTOTYPE_ && !HAS_OWN_.call(v, "__proto__") &&
    v.constructor === Object;
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
}
