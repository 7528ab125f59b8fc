/** Capability gating: which methods an executor's advertised capabilities allow. */

/**
 * Whether `capabilities` (the executor's, as sent in `executor.register`) advertise `path`.
 *
 * `path` is a dotted path into the object (`"agent"`, `"agent.custom_tools"`, `"fs.fuse"`) or
 * `"tool:<name>"` for a served tool. A capability is advertised when every step of the path is
 * `true` or an object without `enabled: false`.
 */
export function hasCapability(capabilities: unknown, path: string): boolean {
  if (path.startsWith("tool:")) return servesTool(capabilities, path.slice(5));
  let value: unknown = capabilities;
  for (const step of path.split(".")) {
    if (typeof value !== "object" || value === null) return false;
    if ((value as { enabled?: unknown }).enabled === false) return false;
    value = (value as Record<string, unknown>)[step];
  }
  if (value === true) return true;
  return typeof value === "object" && value !== null &&
    (value as { enabled?: unknown }).enabled !== false;
}

/** Whether `capabilities` advertise the tool `name` (`hasCapability(c, "tool:" + name)`). */
export function servesTool(capabilities: unknown, name: string): boolean {
  const tools = (capabilities as { tools?: unknown } | undefined)?.tools;
  return Array.isArray(tools) && tools.includes(name);
}
