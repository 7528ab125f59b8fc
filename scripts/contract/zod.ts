/** The contract's schemas as zod validators (expressions of the generated module). */
import { ContractError, quoteKey, refName, type Schema, type SchemaSet } from "./schema.ts";

export class ZodWriter {
  constructor(private readonly set: SchemaSet) {}

  zod(schema: Schema): string {
    if (schema.$ref) return `${refName(schema.$ref)}_`;
    if (schema.const !== undefined) return `z.literal(${JSON.stringify(schema.const)})`;
    if (schema.enum) return `z.enum(${JSON.stringify(schema.enum)})`;
    if (schema.oneOf) return this.zodUnion(schema.oneOf);
    const types = this.set.types(schema);
    if (types.length === 0) return "z.unknown()";
    const parts = types.map((t) => this.zodOne(schema, t));
    return parts.length === 1 ? parts[0] : `z.union([${parts.join(", ")}])`;
  }

  zodUnion(variants: Schema[]): string {
    const members = variants.map((v) => this.zod(v)).join(", ");
    const tag = this.set.unionTag(variants);
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
    if (typeof extra === "object" && this.set.types(extra).length + (extra.$ref ? 1 : 0) > 0) {
      return `z.object({ ${fields.join(", ")} }).catchall(${this.zod(extra)})`;
    }
    const ctor = extra === false ? "z.strictObject" : "z.looseObject";
    return `${ctor}({ ${fields.join(", ")} })`;
  }
}
