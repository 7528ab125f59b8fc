/**
 * The contract as the generators read it: its shapes (schemas, methods, errors, close codes,
 * tools), the subset of JSON Schema it may use, and the schema set every writer asks (validation,
 * `$ref` resolution, dependency order, tagged unions, a method's params as one object schema).
 */
// deno-lint-ignore no-explicit-any
export type Json = any;
export interface Schema {
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
export interface ContentDescriptor {
  name: string;
  required?: boolean;
  schema: Schema;
  description?: string;
}
export interface Method {
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
export interface ErrorSpec {
  code: number;
  message: string;
  "x-name": string;
  "x-retryable"?: boolean;
  description?: string;
}
export interface CloseSpec {
  code: number;
  name: string;
  reconnect: boolean;
  description?: string;
}
export interface ToolSpec {
  group: string;
  input: Schema;
  result?: Schema;
  description?: string;
}

export const ALLOWED_KEYS = new Set([
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

export class ContractError extends Error {}

/** A fast predicate's check of one value. */
export interface Check {
  /** A boolean JavaScript expression over v (an identifier or a member read, read again freely). */
  test: (v: string) => string;
  /** False ⇒ zod fails as well: the check is never false merely to be conservative. */
  exact: boolean;
  /** It accepts undefined (z.unknown()): a required member must then be tested for presence. */
  any: boolean;
}
export const ANY: Check = { test: () => "true", exact: true, any: true };
/** Left to zod: never accepted by the fast path. */
export const NEVER: Check = { test: () => "false", exact: false, any: false };
export const member = (v: string, key: string): string =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${v}.${key}` : `${v}[${JSON.stringify(key)}]`;

export const pascal = (name: string): string =>
  name.split(/[._\-]/).filter(Boolean).map((p) => p[0].toUpperCase() + p.slice(1)).join("");
export const constName = (name: string): string => name.replace(/[.\-]/g, "_").toUpperCase();
export const refName = (ref: string): string => {
  const prefix = "#/components/schemas/";
  if (!ref.startsWith(prefix)) throw new ContractError(`unsupported $ref ${ref}`);
  return ref.slice(prefix.length);
};
export const quoteKey = (key: string): string =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key);
export const doc = (text: string | undefined, indent = ""): string => {
  if (!text) return "";
  const clean = text.replace(/\*\//g, "*\\/").trim();
  const lines = clean.split("\n");
  if (lines.length === 1) return `${indent}/** ${clean} */\n`;
  return `${indent}/**\n${
    lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")
  }\n${indent} */\n`;
};

/** The contract's schemas, checked and walked: what every writer asks of them. */
export class SchemaSet {
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
}
