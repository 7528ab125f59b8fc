/** The JSON object of an HTTP request's body, as the brain API and the inspector accept it. */

/** Why a body is not a JSON object. */
export type JsonBodyProblem = "the body is not JSON" | "the body must be a JSON object";

/** The object `text` holds (`{}` for an empty body), or why it holds none. */
export function parseJsonObject(text: string): Record<string, unknown> | JsonBodyProblem {
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return "the body is not JSON";
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return "the body must be a JSON object";
  }
  return value as Record<string, unknown>;
}
