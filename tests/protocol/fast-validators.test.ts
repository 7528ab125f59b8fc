/**
 * The generated fast predicates (METHOD_SPECS acceptsParams / acceptsResult, and isX next to each
 * XSchema) against zod itself: whenever a predicate accepts a value, the zod validator accepts it
 * too and its output deep-equals the value (so a caller may keep the value as is). Checked on the
 * contract's examples, on every single mutation of them, and on random and randomly mutated
 * values; and the fast path does accept the common valid traffic (else it would be useless).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { inspect } from "node:util";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import * as contract from "../../protocol/generated/contract.ts";

const { METHOD_SPECS } = contract;

interface ZodLike {
  safeParse(value: unknown): { success: boolean; data?: unknown; error?: { issues: unknown[] } };
}
interface Pair {
  name: string;
  schema: ZodLike;
  accepts: (value: unknown) => boolean;
}

const dir = fileURLToPath(new URL("../../protocol/contract/examples/", import.meta.url));
const openrpc = JSON.parse(
  readFileSync(
    fileURLToPath(new URL("../../protocol/contract/openrpc.json", import.meta.url)),
    "utf8",
  ),
);

interface Example {
  method?: string;
  valid?: { description: string; frame: any; result?: unknown }[];
  invalid?: { description: string; frame?: any }[];
}
const examples: Example[] = readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((f) =>
  JSON.parse(readFileSync(dir + f, "utf8"))
);

const show = (value: unknown): string =>
  inspect(value, { depth: 8, breakLength: Infinity, showHidden: false });

/**
 * The property under test: accepted ⇒ zod succeeds and its output deep-equals the value.
 * Returns whether the fast path accepted it.
 */
function agrees(pair: Pair, value: unknown, what: string): boolean {
  let accepted: boolean;
  try {
    accepted = pair.accepts(value);
  } catch (error) {
    assert.fail(`${pair.name}: the predicate threw on ${what} ${show(value)}: ${error}`);
  }
  assert.equal(typeof accepted, "boolean", `${pair.name}: the predicate returns a boolean`);
  if (!accepted) return false;
  const parsed = pair.schema.safeParse(value);
  assert.ok(
    parsed.success,
    `${pair.name}: the fast path accepted ${what} that zod rejects: ${show(value)} ${
      show(parsed.error?.issues)
    }`,
  );
  assert.deepStrictEqual(
    parsed.data,
    value,
    `${pair.name}: the fast path accepted ${what} whose zod output differs: ${show(value)}`,
  );
  return true;
}

// ---- the pairs under test -------------------------------------------------------------------

const methodPairs: { method: string; params: Pair; result?: Pair }[] = [...METHOD_SPECS.values()]
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

const exports = contract as unknown as Record<string, unknown>;
const namedPairs: Pair[] = Object.keys(exports).filter((key) => /^[A-Z]\w*Schema$/.test(key)).map(
  (key) => {
    const name = key.slice(0, -"Schema".length);
    return {
      name: `is${name}`,
      schema: exports[key] as ZodLike,
      accepts: exports[`is${name}`] as (value: unknown) => boolean,
    };
  },
);

// ---- values ---------------------------------------------------------------------------------

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value));

/** Every node of a JSON value (the value itself included). */
function nodes(value: unknown, out: unknown[] = []): unknown[] {
  out.push(value);
  if (Array.isArray(value)) { for (const item of value) nodes(item, out); }
  else if (value !== null && typeof value === "object") {
    for (const item of Object.values(value)) nodes(item, out);
  }
  return out;
}

/** Every path to a node of a JSON value. */
function paths(value: unknown, at: (string | number)[] = [], out: (string | number)[][] = []) {
  out.push(at);
  if (Array.isArray(value)) value.forEach((item, i) => paths(item, [...at, i], out));
  else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) paths(item, [...at, key], out);
  }
  return out;
}

const DELETE = Symbol("delete");
/** A copy of root with the node at path replaced by change(node) (or deleted). */
function changed(
  root: unknown,
  path: (string | number)[],
  change: (node: unknown) => unknown,
): unknown {
  if (path.length === 0) {
    const next = change(root);
    return next === DELETE ? undefined : next;
  }
  const copy = clone(root);
  let parent: any = copy;
  for (const key of path.slice(0, -1)) parent = parent[key];
  const last = path[path.length - 1];
  const next = change(parent[last]);
  if (next === DELETE) {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else parent[last] = next;
  return copy;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);
class Thing {}
class List extends Array {}
const withOwnProto = (value: unknown): unknown => {
  const copy: Record<string, unknown> = isRecord(value) ? clone(value) : {};
  Object.defineProperty(copy, "__proto__", {
    value: { polluted: true },
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return copy;
};

/** Single mutations: name and what it makes of a node. */
const MUTATIONS: [string, (node: unknown) => unknown][] = [
  ["drop", () => DELETE],
  ["undefined", () => undefined],
  ["null", () => null],
  ["empty string", () => ""],
  ["a string", () => "x"],
  ["a long string", () => "é".repeat(70)],
  ["64 hex digits", () => "0123456789abcdef".repeat(4)],
  ["64 upper hex digits", () => "0123456789ABCDEF".repeat(4)],
  ["base64 with padding", () => "aGk="],
  ["bad base64", () => "a===b"],
  ["a date-time", () => "2024-02-29T12:00:00.123+01:00"],
  ["a date-time in Z", () => "2024-01-01T00:00:00Z"],
  ["a date-time without offset", () => "2024-01-01T00:00:00"],
  ["a date-time on a bad day", () => "2023-02-29T12:00:00Z"],
  ["a date-time without seconds", () => "2024-01-01T00:00Z"],
  ["a URL", () => "https://example.com/a"],
  ["a padded URL", () => "  https://example.com/a\t"],
  ["not a URL", () => "not a url"],
  ["zero", () => 0],
  ["negative zero", () => -0],
  ["one", () => 1],
  ["negative", () => -1],
  ["a float", () => 1.5],
  ["a tiny float", () => 1e-9],
  ["2^53", () => 2 ** 53],
  ["max safe integer", () => Number.MAX_SAFE_INTEGER],
  ["min safe integer", () => Number.MIN_SAFE_INTEGER],
  ["1e21", () => 1e21],
  ["4096", () => 4096],
  ["1001", () => 1001],
  ["NaN", () => NaN],
  ["Infinity", () => Infinity],
  ["-Infinity", () => -Infinity],
  ["a bigint", () => 1n],
  ["true", () => true],
  ["false", () => false],
  ["a symbol value", () => Symbol("s")],
  ["a function", () => () => 1],
  ["empty array", () => []],
  ["empty object", () => ({})],
  ["array of it", (node) => [node]],
  ["array of empty string", () => [""]],
  ["sparse array", () => new Array(2)],
  ["a Date", () => new Date(0)],
  ["a boxed string", () => new String("x")],
  ["a Map", () => new Map()],
  ["null-prototype copy", (node) => Object.assign(Object.create(null), isRecord(node) ? node : {})],
  ["class instance copy", (node) => Object.assign(new Thing(), isRecord(node) ? node : {})],
  ["own __proto__ key", withOwnProto],
  ["extra key", (node) => (isRecord(node) ? { ...node, extra_key: 1 } : node)],
  ["extra undefined key", (node) => (isRecord(node) ? { ...node, extra_key: undefined } : node)],
  ["extra nested key", (node) => (isRecord(node) ? { ...node, extra_key: { a: [1] } } : node)],
  ["item repeated", (node) => (Array.isArray(node) ? [...node, ...node] : node)],
  ["hole appended", (node) => {
    if (!Array.isArray(node)) return node;
    const copy = [...node];
    copy.length += 1;
    return copy;
  }],
  ["array subclass", (node) => (Array.isArray(node) ? List.from(node) : node)],
  ["undefined item", (node) => (Array.isArray(node) ? [...node, undefined] : node)],
  ["tag changed", (node) => (isRecord(node) && "type" in node ? { ...node, type: "text" } : node)],
  [
    "members undefined",
    (node) =>
      isRecord(node) ? Object.fromEntries(Object.keys(node).map((key) => [key, undefined])) : node,
  ],
];

/** Contract words: every enum and const value, every member name, and the tool names. */
const words = new Set<unknown>();
const keys = new Set<string>(["extra_key", "__proto__", "constructor"]);
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

interface Valid {
  pair: Pair;
  value: unknown;
  description: string;
}
const valid: Valid[] = [];
const invalid: Valid[] = [];
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
const corpus: unknown[] = [...valid, ...invalid].flatMap((v) => nodes(v.value));

/** A URL member is left to zod (z.url() may rewrite the value), so such a value may fall back. */
const hasUrl = (value: unknown): boolean =>
  nodes(value).some((node) => typeof node === "string" && node.includes("://"));

// ---- values generated from the contract ------------------------------------------------------

/** Values of a contract schema: valid ones, save for the odd out-of-contract extra member. */
function arbitrary(schema: any, depth = 0): fc.Arbitrary<unknown> {
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

function arbitraryOf(schema: any, type: string, depth: number): fc.Arbitrary<unknown> {
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
function paramsArbitrary(method: any): fc.Arbitrary<unknown> {
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

const generated: { pair: Pair; values: fc.Arbitrary<unknown> }[] = openrpc.methods.flatMap(
  (method: any) => {
    const pairs = methodPairs.find((p) => p.method === method.name)!;
    return [
      { pair: pairs.params, values: paramsArbitrary(method) },
      ...(pairs.result ? [{ pair: pairs.result, values: arbitrary(method.result.schema) }] : []),
    ];
  },
);
const generatedNamed: { pair: Pair; values: fc.Arbitrary<unknown> }[] = Object.keys(
  openrpc.components.schemas,
).map((name) => ({
  pair: namedPairs.find((p) => p.name === `is${name}`)!,
  values: arbitrary(openrpc.components.schemas[name]),
}));

// ---- tests ----------------------------------------------------------------------------------

describe("fast validators", () => {
  it("exist for every method and every exported schema", () => {
    assert.ok(methodPairs.length > 40, `a pair per method (${methodPairs.length})`);
    for (const spec of METHOD_SPECS.values()) {
      assert.equal(typeof spec.acceptsParams, "function", `${spec.name}: acceptsParams`);
      if (spec.kind === "request") {
        assert.equal(typeof spec.acceptsResult, "function", `${spec.name}: acceptsResult`);
      } else assert.equal(spec.acceptsResult, undefined, `${spec.name}: a notification`);
    }
    assert.ok(namedPairs.length > 100, `a predicate per exported schema (${namedPairs.length})`);
    for (const pair of namedPairs) {
      assert.equal(typeof pair.accepts, "function", `${pair.name} is exported next to its schema`);
    }
    for (
      const name of [
        "ContentBlock",
        "AgentEvent",
        "ToolCallParams",
        "ToolResultParams",
        "SessionEventParams",
        "Ack",
      ]
    ) {
      assert.ok(namedPairs.some((p) => p.name === `is${name}`), `is${name} is exported`);
    }
  });

  it("accept the contract's valid examples (URL members aside) and agree with zod on all", () => {
    let accepted = 0;
    for (const v of valid) {
      const ok = agrees(v.pair, v.value, v.description);
      if (ok) accepted++;
      else {
        assert.ok(hasUrl(v.value), `${v.pair.name}: ${v.description} is accepted by the fast path`);
      }
    }
    assert.ok(accepted >= valid.length * 0.9, `most valid examples accepted (${accepted})`);
    for (const v of invalid) {
      assert.equal(
        agrees(v.pair, v.value, v.description),
        false,
        `${v.pair.name}: ${v.description} is refused`,
      );
    }
  });

  it("accept the common traffic", () => {
    const spec = (method: string) => METHOD_SPECS.get(method)!;
    const bash = {
      session_id: "ses_1",
      tool_call_id: "call_1",
      tool: "bash",
      input: { command: "ls -la", env: { A: "1" } },
      timeout_ms: 30000,
    };
    assert.ok(spec("tool.call").acceptsParams(bash), "tool.call params of bash");
    assert.ok(
      spec("tool.call").acceptsParams({ ...bash, tool: "custom_tool", input: { any: [1, {}] } }),
      "tool.call params of a tool the contract does not type",
    );
    assert.ok(
      !spec("tool.call").acceptsParams({ ...bash, input: { cwd: "/" } }),
      "tool.call params whose built-in tool input is invalid are refused (superRefine)",
    );
    assert.ok(
      !spec("tool.call").acceptsParams({ ...bash, tool: "edit", input: { path: "a" } }),
      "tool.call params of edit without old_string are refused",
    );
    for (const ack of [{ ok: true }, { ok: true, duplicate: true }, { ok: true, extra: 1 }]) {
      assert.ok(spec("tool.call").acceptsResult!(ack), `Ack ${show(ack)}`);
      assert.ok(contract.isAck(ack), `isAck ${show(ack)}`);
    }
    assert.ok(
      spec("tool.result").acceptsResult!({ ok: true, duplicate: undefined }),
      "an Ack with an undefined optional member",
    );
    assert.ok(!contract.isAck({ ok: false }), "isAck refuses ok: false");
    const result = {
      session_id: "ses_1",
      tool_call_id: "call_1",
      outcome: "completed",
      content: [
        { type: "text", text: "hello" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: "aGk=" } },
        { type: "artifact", artifact_id: "art_1", name: "out.txt", size: 12 },
      ],
      is_error: false,
      artifacts: [{ artifact_id: "art_1", size: 0 }],
      structured_content: { stdout: "hello\n", stderr: "", exit_code: 0 },
    };
    assert.ok(spec("tool.result").acceptsParams(result), "tool.result params");
    assert.ok(contract.isToolResultParams(result), "isToolResultParams");
    assert.ok(
      spec("tool.result").acceptsParams({ ...result, outcome: "failed", error: { message: "x" } }),
      "tool.result params of a failure",
    );
    const event = {
      session_id: "ses_1",
      turn_id: "turn_1",
      event_id: "evt_1",
      sequence: 7,
      event: { type: "agent.message", content: [{ type: "text", text: "hi" }] },
    };
    assert.ok(spec("session.event").acceptsParams(event), "session.event params");
    assert.ok(contract.isSessionEventParams(event), "isSessionEventParams");
    assert.ok(contract.isAgentEvent(event.event), "isAgentEvent");
    assert.ok(contract.isContentBlock(event.event.content[0]), "isContentBlock");
    assert.ok(
      spec("session.event").acceptsResult!({ acked_sequence: 7 }),
      "session.event result",
    );
    assert.ok(spec("executor.heartbeat").acceptsParams({}), "heartbeat params, empty");
    assert.ok(
      spec("executor.heartbeat").acceptsParams({ active_sessions: ["ses_1"] }),
      "heartbeat params with sessions",
    );
    assert.ok(
      spec("executor.heartbeat").acceptsResult!({
        drain: false,
        lease_expires_at: "2026-01-01T00:00:30.5Z",
      }),
      "heartbeat result with a date-time",
    );
    assert.ok(
      spec("tool.progress").acceptsParams({
        session_id: "ses_1",
        tool_call_id: "call_1",
        output: { stream: "stdout", text: "x" },
        progress: 0.5,
      }),
      "tool.progress params",
    );
    // Tool-call params are the typed params object, as is.
    const json = JSON.parse(JSON.stringify(bash));
    assert.ok(contract.isToolCallParams(json), "JSON-parsed tool.call params");
  });

  it("follow zod on the awkward cases", () => {
    const params = (method: string) => methodPairs.find((p) => p.method === method)!.params;
    const sparse = new Array(1);
    const cases: [string, unknown, boolean, string][] = [
      ["executor.drain", { deadline_ms: 2 ** 53 }, false, "an unsafe integer"],
      ["executor.drain", { deadline_ms: NaN }, false, "NaN"],
      ["executor.drain", { deadline_ms: 1.5 }, false, "a float for z.int()"],
      ["executor.drain", { deadline_ms: Number.MAX_SAFE_INTEGER }, true, "the largest safe int"],
      ["executor.drain", { deadline_ms: undefined }, true, "an optional member as undefined"],
      ["executor.drain", [], false, "an array for an object"],
      ["executor.heartbeat", { extra: undefined }, true, "an unknown member passes through"],
      [
        "executor.heartbeat",
        JSON.parse('{"__proto__": {"active_sessions": 1}}'),
        false,
        "an own __proto__ member (zod drops it)",
      ],
      ["executor.heartbeat", Object.create(null), false, "a null-prototype object"],
      ["executor.heartbeat", { active_sessions: sparse }, false, "a sparse array"],
      [
        "tool.progress",
        { session_id: "s", tool_call_id: "c", progress: Infinity },
        false,
        "Infinity for z.number()",
      ],
      [
        "fs.mount",
        {
          session_id: "s",
          service_url: "https://files.example/",
          views: [{ view: "v", path: "/p", token: "t" }],
        },
        false,
        "a z.url() member (left to zod)",
      ],
    ];
    for (const [method, value, expected, what] of cases) {
      assert.equal(agrees(params(method), value, what), expected, `${method}: ${what}`);
    }
  });

  it("agree with zod on every single mutation of every example", () => {
    let checked = 0;
    let accepted = 0;
    for (const v of [...valid, ...invalid]) {
      for (const path of paths(v.value)) {
        for (const [name, mutation] of MUTATIONS) {
          const value = changed(v.value, path, mutation);
          checked++;
          if (agrees(v.pair, value, `${v.description}, ${name} at /${path.join("/")}`)) {
            accepted++;
          }
        }
      }
    }
    assert.ok(checked > 10_000, `many mutations checked (${checked})`);
    assert.ok(
      accepted > 1_000,
      `many mutations accepted, so the property is exercised (${accepted})`,
    );
  });

  it("agree with zod on every node of every example, for every exported schema", () => {
    let accepted = 0;
    for (const pair of namedPairs) {
      for (const value of corpus) if (agrees(pair, value, "an example node")) accepted++;
    }
    assert.ok(accepted > 500, `many example nodes accepted (${accepted})`);
  });

  it("agree with zod on random values", () => {
    const leaf = fc.oneof(
      fc.constantFrom(...words),
      fc.constantFrom(...MUTATIONS.map(([, m]) => m("x")).filter((v) => v !== DELETE)),
      fc.constantFrom(...corpus),
      fc.string(),
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
    );
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: "small" }, leaf, tie("object"), tie("array")),
      object: fc.dictionary(fc.constantFrom(...keys), tie("value"), { maxKeys: 8 }),
      array: fc.array(tie("value"), { maxLength: 3 }),
    }));
    const anything = fc.anything({
      withBoxedValues: true,
      withNullPrototype: true,
      withSparseArray: true,
      withDate: true,
      withMap: true,
      withObjectString: true,
      withBigInt: true,
    });
    const pairs = [
      ...methodPairs.flatMap((p) => (p.result ? [p.params, p.result] : [p.params])),
      ...namedPairs,
    ];
    fc.assert(
      fc.property(fc.constantFrom(...pairs), fc.oneof(value, anything), (pair, v) => {
        agrees(pair, v, "a random value");
      }),
      { numRuns: 3000 },
    );
    // Objects made of the members of the method's own params, to get past the first checks.
    fc.assert(
      fc.property(
        fc.constantFrom(...methodPairs),
        fc.dictionary(fc.constantFrom(...keys), value, { maxKeys: 10 }),
        (p, v) => {
          agrees(p.params, v, "a random params object");
          if (p.result) agrees(p.result, v, "a random result object");
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("accept what the contract describes (URL members aside), as zod does", () => {
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...generated, ...generatedNamed).chain((g) =>
          g.values.map((value) => ({ pair: g.pair, value }))
        ),
        ({ pair, value }) => {
          if (agrees(pair, value, "a value generated from the contract")) accepted++;
          else if (pair.schema.safeParse(value).success) {
            assert.ok(
              hasUrl(value),
              `${pair.name}: a valid value without URL is accepted: ${show(value)}`,
            );
          }
        },
      ),
      { numRuns: 6000 },
    );
    assert.ok(accepted > 3000, `generated values accepted (${accepted})`);
  });

  it("agree with zod on values generated from the contract, then mutated", () => {
    const mutation = fc.tuple(
      fc.nat(),
      fc.nat(),
      fc.constantFrom(...keys),
      fc.constantFrom(...words),
    );
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...generated, ...generatedNamed).chain((g) =>
          g.values.map((value) => ({ pair: g.pair, value }))
        ),
        fc.array(mutation, { minLength: 1, maxLength: 3 }),
        ({ pair, value }, steps) => {
          let v = value;
          for (const [at, which, key, word] of steps) {
            if (!isJsonSafe(v)) break;
            const all = paths(v);
            const path = all[at % all.length];
            const pick = which % (MUTATIONS.length + 2);
            v = pick === MUTATIONS.length
              ? changed(v, path, () => word)
              : pick === MUTATIONS.length + 1
              ? changed(v, path, (node) =>
                isRecord(node)
                  ? { ...node, [key]: MUTATIONS[at % MUTATIONS.length][1](word) }
                  : node)
              : changed(v, path, MUTATIONS[pick][1]);
          }
          if (agrees(pair, v, "a generated value, mutated")) accepted++;
        },
      ),
      { numRuns: 8000 },
    );
    assert.ok(
      accepted > 500,
      `mutated values accepted, so the property is exercised (${accepted})`,
    );
  });

  it("agree with zod on examples mutated at random, several times over", () => {
    const mutation = fc.tuple(fc.nat(), fc.nat(), fc.constantFrom(...words, ...corpus));
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...valid),
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        (v, steps) => {
          let value = v.value;
          for (const [at, which, word] of steps) {
            const all = paths(value);
            if (all.length === 0) break;
            const path = all[at % all.length];
            const pick = which % (MUTATIONS.length + 1);
            // changed() copies by JSON: a step that leaves JSON (NaN, a Date, ...) is the last.
            value = pick === MUTATIONS.length
              ? changed(value, path, () => word)
              : changed(value, path, MUTATIONS[pick][1]);
            if (!isJsonSafe(value)) break;
          }
          if (agrees(v.pair, value, `${v.description}, mutated`)) accepted++;
        },
      ),
      { numRuns: 4000 },
    );
    assert.ok(
      accepted > 100,
      `random mutations accepted, so the property is exercised (${accepted})`,
    );
  });
});

/** Whether a value survives the JSON copy of changed() unchanged (so a next step may apply). */
function isJsonSafe(value: unknown): boolean {
  try {
    return JSON.stringify(value) !== undefined &&
      nodes(value).every((node) =>
        node === null || typeof node === "string" || typeof node === "boolean" ||
        (typeof node === "number" && Number.isFinite(node)) ||
        (Array.isArray(node) && Object.getPrototypeOf(node) === Array.prototype &&
          !node.includes(undefined)) ||
        (isRecord(node) && Object.getPrototypeOf(node) === Object.prototype &&
          !Object.hasOwn(node, "__proto__") && !Object.values(node).includes(undefined))
      );
  } catch {
    return false;
  }
}
