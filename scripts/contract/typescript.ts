/** The contract's schemas as TypeScript types: declarations, members and their docs. */
import { ContractError, doc, quoteKey, refName, type Schema, type SchemaSet } from "./schema.ts";

export class TypeScriptWriter {
  constructor(private readonly set: SchemaSet) {}

  ts(schema: Schema, indent: string): string {
    if (schema.$ref) return refName(schema.$ref);
    if (schema.const !== undefined) return JSON.stringify(schema.const);
    if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
    if (schema.oneOf) return schema.oneOf.map((s) => this.ts(s, indent)).join(" | ");
    const types = this.set.types(schema);
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
    const text = this.set.schemas[name]?.description;
    return text ? text : `See {@linkcode ${name}}.`;
  }

  typeDecl(name: string, schema: Schema, fallbackDoc?: string): string {
    const text = doc(schema.description ?? fallbackDoc);
    const s = schema.$ref ? schema : schema;
    const types = this.set.types(s);
    if (
      !s.$ref && !s.oneOf && !s.enum && s.const === undefined && types.length === 1 &&
      types[0] === "object" &&
      Object.keys(s.properties ?? {}).length > 0
    ) {
      return `${text}export interface ${name} {\n${this.tsMembers(s, "  ")}}\n\n`;
    }
    return `${text}export type ${name} = ${this.ts(s, "")};\n\n`;
  }
}
