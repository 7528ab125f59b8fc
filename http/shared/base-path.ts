/** The base path an HTTP app (the brain API, the inspector) is mounted under. */

/** `/v1/harness` from `v1/harness/`, `""` for the root. */
export function normalizeBasePath(path: string | undefined): string {
  if (!path) return "";
  const trimmed = path.replace(/\/+$/, "");
  if (trimmed === "") return "";
  return trimmed.startsWith("/") ? trimmed : `/${trimmed}`;
}
