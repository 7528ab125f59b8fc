/**
 * What the executor advertises in `executor.register`, derived from what it actually serves:
 * only tools with a handler are listed; the `shell`/`files` groups are enabled while a handler of
 * the group exists unless configured `enabled: false`; tools of your own defined by schemas are
 * described in `tool_definitions`; a capability request served through `onRequest` advertises
 * the capability that gates it. Explicit configuration wins, but for `tools` and
 * `tool_definitions`, which only what is served decides.
 */
import type { Capabilities, ToolDefinition } from "../protocol/generated/contract.ts";
import { METHOD_SPECS, TOOL_SPECS } from "../protocol/generated/contract.ts";

/** Computes the capabilities object. */
export function computeCapabilities(
  servedTools: readonly string[],
  servedMethods: Iterable<string>,
  configured: Capabilities | undefined,
  definitions: ReadonlyMap<string, ToolDefinition> = new Map(),
): Capabilities {
  const explicit = (configured ?? {}) as Record<string, unknown>;
  const caps: Record<string, unknown> = {};
  for (const method of servedMethods) {
    const path = METHOD_SPECS.get(method)?.capability;
    if (!path || path.startsWith("tool:")) continue;
    setPath(caps, path);
  }
  const groupEnabled = (group: string) =>
    (explicit[group] as { enabled?: unknown } | undefined)?.enabled !== false;
  const tools: string[] = [];
  const groups = new Set<string>();
  for (const name of servedTools) {
    const group = TOOL_SPECS.get(name)?.group;
    if (group && !groupEnabled(group)) continue;
    if (group) groups.add(group);
    tools.push(name);
  }
  for (const group of groups) caps[group] = { enabled: true };
  for (const [key, value] of Object.entries(explicit)) {
    if (key === "tools" || key === "tool_definitions") continue;
    caps[key] = value;
  }
  caps.tools = tools;
  const described = [...definitions].filter(([name]) => tools.includes(name));
  // fromEntries defines members: a tool named __proto__ stays a member, not a prototype.
  if (described.length > 0) caps.tool_definitions = Object.fromEntries(described);
  return caps as Capabilities;
}

/** Capabilities whose value is an object in the contract (an empty one advertises them). */
const OBJECT_CAPABILITIES: ReadonlySet<string> = new Set(["mcp", "agent", "fs", "shell", "files"]);

/** Sets a dotted capability path to `true` unless something more specific is there already. */
function setPath(target: Record<string, unknown>, path: string): void {
  const steps = path.split(".");
  let node = target;
  for (let i = 0; i < steps.length - 1; i++) {
    const next = node[steps[i]];
    if (typeof next !== "object" || next === null) node[steps[i]] = {};
    node = node[steps[i]] as Record<string, unknown>;
  }
  const last = steps[steps.length - 1];
  if (node[last] === undefined) {
    node[last] = steps.length === 1 && OBJECT_CAPABILITIES.has(last) ? {} : true;
  }
}

/** Whether two capability objects are the same (for sending an update only on change). */
export function sameCapabilities(a: Capabilities, b: Capabilities): boolean {
  return stableJson(a) === stableJson(b);
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
