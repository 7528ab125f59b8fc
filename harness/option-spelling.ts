/**
 * Options of the harness's handles are camelCase (`toolCallId`, `timeoutMs`, `graceMs`,
 * `terminalId`), mapped by the SDK to the wire's snake_case. An option spelled the wire's way
 * (0.1.0's spelling), or one of `callTool`'s request given in its options, would be ignored
 * without a word: a `tool_call_id` lost makes a repeated call run twice. It is refused instead,
 * saying where it belongs.
 *
 * @module
 */
import { InvalidCallOptionError } from "../protocol/errors.ts";

/** Options a call refuses, each with what is wrong with it. */
export type RefusedOptions = Readonly<Record<string, string>>;

/** The wire's spelling of each option that has a camelCase one. */
const CAMEL_CASE = {
  tool_call_id: "toolCallId",
  timeout_ms: "timeoutMs",
  grace_ms: "graceMs",
  terminal_id: "terminalId",
} as const;

/** The refusals of `names` in the wire's spelling. */
export function wireSpellings(...names: (keyof typeof CAMEL_CASE)[]): RefusedOptions {
  return Object.fromEntries(names.map((name) => [name, `is spelled ${CAMEL_CASE[name]}`]));
}

/** What `callTool` takes in its request (the contract's params), not in its options. */
export const CALL_TOOL_REQUEST_FIELDS: RefusedOptions = {
  tool_call_id: "belongs in the request (tool_call_id)",
  toolCallId: "belongs in the request (tool_call_id)",
  timeout_ms: "belongs in the request (timeout_ms)",
  timeoutMs: "belongs in the request (timeout_ms)",
};

/**
 * Throws {@linkcode InvalidCallOptionError} when `options` (of `method`) hold one of `refused`.
 * It walks the options' own keys, not the table: a call's options are few or none.
 */
export function refuseOptions(method: string, options: object, refused: RefusedOptions): void {
  for (const key in options) {
    if (Object.hasOwn(refused, key) && Object.hasOwn(options, key)) {
      throw new InvalidCallOptionError(method, key, refused[key]);
    }
  }
}
