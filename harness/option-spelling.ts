/**
 * Options of the harness's handles are camelCase (`toolCallId`, `timeoutMs`, `graceMs`,
 * `terminalId`), mapped by the SDK to the wire's snake_case. An option spelled the wire's way
 * (0.1.0's spelling) would be ignored without a word: a `tool_call_id` lost makes a repeated call
 * run twice. It is refused instead, naming the spelling to use.
 *
 * @module
 */
import { InvalidCallOptionError } from "../protocol/errors.ts";

/** The wire's spelling of each option that has a camelCase one. */
const CAMEL_CASE: Readonly<Record<string, string>> = {
  tool_call_id: "toolCallId",
  timeout_ms: "timeoutMs",
  grace_ms: "graceMs",
  terminal_id: "terminalId",
};

/**
 * Options of `callTool` that belong in its request (the contract's params): in the options they
 * would be ignored, and a `tool_call_id` lost there makes a repeat run twice.
 */
const REQUEST_FIELDS: readonly string[] = ["tool_call_id", "toolCallId", "timeout_ms", "timeoutMs"];

/**
 * Throws {@linkcode InvalidCallOptionError} when `callTool`'s `options` hold what belongs in its
 * request.
 */
export function refuseRequestFieldsInOptions(options: object): void {
  for (const name of REQUEST_FIELDS) {
    if (Object.hasOwn(options, name)) {
      throw new InvalidCallOptionError(
        "callTool",
        name,
        `belongs in the request (${name.includes("_") ? name : CAMEL_TO_WIRE[name]})`,
      );
    }
  }
}

const CAMEL_TO_WIRE: Readonly<Record<string, string>> = {
  toolCallId: "tool_call_id",
  timeoutMs: "timeout_ms",
};

/**
 * Throws {@linkcode InvalidCallOptionError} when `options` (of `method`) holds one of `names` in
 * the wire's spelling.
 */
export function refuseWireSpelling(
  method: string,
  options: object,
  names: readonly (keyof typeof CAMEL_CASE)[],
): void {
  for (const name of names) {
    if (Object.hasOwn(options, name)) {
      throw new InvalidCallOptionError(method, name, `is spelled ${CAMEL_CASE[name]}`);
    }
  }
}
