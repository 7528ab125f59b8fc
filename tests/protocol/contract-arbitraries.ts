/** Values generated from the contract's schemas (fast-check), per method and per component. */
import fc from "fast-check";
import { methodPairs, namedPairs, openrpc, type Pair } from "./fast-validator-pairs.ts";

/** Values of a contract schema: valid ones, save for the odd out-of-contract extra member. */
export function arbitrary(schema: any, depth = 0): fc.Arbitrary<unknown> {
  if (schema.$ref) {
    const name = schema.$ref.slice("#/components/schemas/".length);
    return arbitrary(openrpc.components.schemas[name], depth + 1);
  }
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.oneOf) return fc.oneof(...schema.oneOf.map((s: any) => arbitrary(s, depth + 1)));
  const types: string[] = schema.type === undefined
    ? []
    : Array.isArray(schema.type)
    ? schema.type
    : [schema.type];
  if (types.length === 0) return depth > 4 ? fc.constant(null) : fc.jsonValue({ maxDepth: 2 });
  return fc.oneof(...types.map((type) => arbitraryOf(schema, type, depth)));
}

export function arbitraryOf(schema: any, type: string, depth: number): fc.Arbitrary<unknown> {
  switch (type) {
    case "string":
      if (schema.pattern !== undefined) return fc.stringMatching(new RegExp(schema.pattern));
      if (schema.format === "date-time") {
        return fc.tuple(
          fc.date({
            min: new Date("1970-01-01T00:00:00Z"),
            max: new Date("2100-01-01T00:00:00Z"),
            noInvalidDate: true,
          }),
          fc.constantFrom("Z", "+01:00", "-05:30", "+00:00", ".5Z", ".123456+02:00"),
        ).map(([date, zone]) => date.toISOString().slice(0, 19) + zone);
      }
      if (schema.format === "uri") return fc.webUrl();
      return fc.string({ minLength: schema.minLength, maxLength: schema.maxLength ?? 12 });
    case "integer":
      return fc.integer({
        min: schema.minimum ?? Number.MIN_SAFE_INTEGER,
        max: schema.maximum ?? Number.MAX_SAFE_INTEGER,
      });
    case "number":
      return fc.double({
        min: schema.minimum,
        max: schema.maximum,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "array":
      return fc.array(schema.items ? arbitrary(schema.items, depth + 1) : fc.jsonValue(), {
        minLength: schema.minItems,
        maxLength: Math.max(schema.minItems ?? 0, Math.min(schema.maxItems ?? 3, 3)),
      });
    case "object": {
      const properties: Record<string, any> = schema.properties ?? {};
      const extra = schema.additionalProperties;
      const members = fc.record(
        Object.fromEntries(
          Object.entries(properties).map(([key, s]) => [key, arbitrary(s, depth + 1)]),
        ),
        { requiredKeys: schema.required ?? [] },
      );
      if (extra === false) return members;
      const extras = fc.dictionary(
        fc.string({ maxLength: 6 }).filter((k) => !(k in properties) && k !== "__proto__"),
        typeof extra === "object" ? arbitrary(extra, depth + 1) : fc.jsonValue({ maxDepth: 1 }),
        { maxKeys: Object.keys(properties).length ? 1 : 3 },
      );
      return fc.tuple(members, extras).map(([m, e]) => ({ ...e, ...m }));
    }
  }
  throw new Error(`unknown type ${type}`);
}

/** Params objects of a method, as the contract describes them (built-in tool inputs typed). */
export function paramsArbitrary(method: any): fc.Arbitrary<unknown> {
  const properties = Object.fromEntries(method.params.map((p: any) => [p.name, p.schema]));
  const required = method.params.filter((p: any) => p.required).map((p: any) => p.name);
  const generic = arbitrary({ type: "object", properties, required });
  const link = method["x-tool-input"];
  if (!link) return generic;
  const tools = Object.entries(openrpc["x-tools"]) as [string, any][];
  const typed = fc.constantFrom(...tools).chain(([tool, spec]) =>
    fc.tuple(generic, arbitrary(spec.input)).map(([params, input]) => ({
      ...(params as object),
      [link.tool]: tool,
      [link.input]: input,
    }))
  );
  return fc.oneof(typed, generic);
}

export const generated: { pair: Pair; values: fc.Arbitrary<unknown> }[] = openrpc.methods.flatMap(
  (method: any) => {
    const pairs = methodPairs.find((p) => p.method === method.name)!;
    return [
      { pair: pairs.params, values: paramsArbitrary(method) },
      ...(pairs.result ? [{ pair: pairs.result, values: arbitrary(method.result.schema) }] : []),
    ];
  },
);
export const generatedNamed: { pair: Pair; values: fc.Arbitrary<unknown> }[] = Object.keys(
  openrpc.components.schemas,
).map((name) => ({
  pair: namedPairs.find((p) => p.name === `is${name}`)!,
  values: arbitrary(openrpc.components.schemas[name]),
}));
