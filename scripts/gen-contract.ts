/**
 * Derives the TypeScript side of the wire from the contract, so nothing is written twice:
 *
 *   protocol/contract/openrpc.json  ──►  protocol/generated/contract.ts  (types, zod validators,
 *                                                                          method and tool tables)
 *                                   ──►  protocol/generated/errors.ts    (error classes, codes,
 *                                                                          close codes)
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
      out += doc(prop.description, indent);
      out += `${indent}${quoteKey(key)}${required.has(key) ? "" : "?"}: ${
        this.ts(prop, indent)
      };\n`;
    }
    const extra = schema.additionalProperties;
    if (extra === true || (typeof extra === "object")) {
      out += `${indent}[key: string]: unknown;\n`;
    }
    return out;
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

  /** A tagged union (every variant an object with the same const property) dispatches on it. */
  zodUnion(variants: Schema[]): string {
    const objects = variants.map((v) => this.deref(v));
    const tags = Object.keys(objects[0]?.properties ?? {}).filter((key) =>
      objects.every((o) =>
        o.properties?.[key]?.const !== undefined && (o.required ?? []).includes(key)
      )
    );
    const members = variants.map((v) => this.zod(v)).join(", ");
    if (tags.length > 0) {
      const tag = tags.includes("type") ? "type" : tags[0];
      const values = objects.map((o) => o.properties![tag].const);
      if (new Set(values).size === values.length) {
        return `z.discriminatedUnion(${JSON.stringify(tag)}, [${members}])`;
      }
    }
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
    for (const name of order) out += this.typeDecl(name, this.schemas[name]);
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
    out += `\n`;
    for (const name of order) {
      out += `/** Validates {@linkcode ${name}}. */\n`;
      out += `export const ${name}Schema: z.ZodType<${name}> = ${name}_;\n`;
    }
    for (const m of methods) {
      const n = `${pascal(m.name)}Params`;
      out += `/** Validates {@linkcode ${n}}. */\n`;
      out += `export const ${n}Schema: z.ZodType<${n}> = ${n}_;\n`;
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
      `  readonly name: MethodName;\n  readonly kind: "request" | "notification";\n  readonly direction: MethodDirection;\n`;
    out +=
      `  /** The protocol version that introduced it. */\n  readonly since: ProtocolVersion;\n`;
    out +=
      `  /** The executor capability that gates it (a dotted path into the capabilities object). */\n  readonly capability?: string;\n`;
    out +=
      `  /** What makes a repeat of it harmless (a params member, or "jsonrpc_id"). */\n  readonly idempotencyKey?: string;\n`;
    out +=
      `  readonly params: z.ZodType<unknown>;\n  /** Absent for notifications. */\n  readonly result?: z.ZodType<unknown>;\n  readonly summary: string;\n}\n\n`;
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
        `params: ${pascal(m.name)}Params_`,
        ...(m.result ? [`result: ${refName(m.result.schema.$ref!)}_`] : []),
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
      `/** What the contract says about one built-in tool. */\nexport interface ToolSpec {\n  readonly name: ToolName;\n  /** The capability group that advertises it ("shell", "files"). */\n  readonly group: string;\n  readonly input: z.ZodType<unknown>;\n  readonly result?: z.ZodType<unknown>;\n}\n`;
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
      out += `  /** The JSON-RPC code of this error. */\n  static readonly code = ${e.code};\n`;
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
      `/** What the contract says about a close code. */\nexport interface CloseCodeSpec {\n  readonly code: number;\n  readonly name: string;\n  /** Whether an executor that sees it reconnects (false: it stops for good). */\n  readonly reconnect: boolean;\n  readonly description: string;\n}\n\n`;
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
  try {
    files = formatted({ "contract.ts": gen.contractModule(), "errors.ts": gen.errorsModule() });
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
  if (drift) process.exit(1);
  if (check) console.log("generated files match the contract");
}

main();
