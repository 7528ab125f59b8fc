/**
 * JSON values taken apart and changed, for the fast-validator tests: every node and path of a
 * value, a copy with one node replaced or dropped, and the single mutations that probe the
 * awkward cases (own __proto__ members, subclasses, undefined members, wrong types).
 */
export const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value));

/** Every node of a JSON value (the value itself included). */
export function nodes(value: unknown, out: unknown[] = []): unknown[] {
  out.push(value);
  if (Array.isArray(value)) { for (const item of value) nodes(item, out); }
  else if (value !== null && typeof value === "object") {
    for (const item of Object.values(value)) nodes(item, out);
  }
  return out;
}

/** Every path to a node of a JSON value. */
export function paths(
  value: unknown,
  at: (string | number)[] = [],
  out: (string | number)[][] = [],
) {
  out.push(at);
  if (Array.isArray(value)) value.forEach((item, i) => paths(item, [...at, i], out));
  else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) paths(item, [...at, key], out);
  }
  return out;
}

export const DELETE = Symbol("delete");
/** A copy of root with the node at path replaced by change(node) (or deleted). */
export function changed(
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

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);
export class Thing {}
export class List extends Array {}
export const withOwnProto = (value: unknown): unknown => {
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
export const MUTATIONS: [string, (node: unknown) => unknown][] = [
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

/** Whether a value survives the JSON copy of changed() unchanged (so a next step may apply). */
export function isJsonSafe(value: unknown): boolean {
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
