/**
 * A session's typed tool slots, harness side: `session.tools.bash.call({ command: "ls" })`, one
 * slot per tool of the contract's `x-tools`, each a `callTool` with the tool's input and result
 * types (the result's `structured_content` checked against the tool's result schema).
 *
 * @module
 */
import { refuseOptions, wireSpellings } from "./option-spelling.ts";
import { InvalidResultError } from "../protocol/errors.ts";
import {
  TOOL_NAMES,
  TOOL_SPECS,
  type ToolMap,
  type ToolName,
} from "../protocol/generated/contract.ts";
import type { ToolCallOptions, ToolCallRequest, TypedToolCallOptions } from "./handle-options.ts";
import type { ToolCallResult } from "./records.ts";

/** A typed call's options in the wire's spelling. */
const SLOT_OPTIONS = wireSpellings("tool_call_id", "timeout_ms");

/** A typed slot for one built-in tool: `session.tools.bash.call({ command: "ls" })`. */
export interface ToolSlot<N extends ToolName> {
  /** The tool's name. */
  readonly name: N;
  /**
   * Calls the tool. `structured_content` of the result is checked against the tool's result
   * schema (a mismatch rejects with `InvalidResultError`).
   */
  call(
    input: ToolMap[N]["input"],
    options?: TypedToolCallOptions,
  ): Promise<ToolCallResult<ToolMap[N]["result"]>>;
}

/** The typed slots of the built-in tools. */
export type SessionTools = { readonly [N in ToolName]: ToolSlot<N> };

/** How a slot calls its tool: the session's `callTool`. */
export type CallTool = (request: ToolCallRequest, options: ToolCallOptions) => Promise<
  ToolCallResult
>;

/** The typed tool slots of a session whose calls go to `callTool` (internal). */
export function toolSlots(callTool: CallTool): SessionTools {
  const out: Record<string, ToolSlot<ToolName>> = {};
  for (const name of TOOL_NAMES) out[name] = slot(callTool, name);
  return out as unknown as SessionTools;
}

function slot<N extends ToolName>(callTool: CallTool, name: N): ToolSlot<N> {
  const spec = TOOL_SPECS.get(name)!;
  return {
    name,
    call: async (input, options = {}) => {
      refuseOptions(`tools.${name}.call`, options, SLOT_OPTIONS);
      const { toolCallId, timeoutMs, ...callOptions } = options;
      const result = await callTool({
        tool: name,
        input: input as unknown as Record<string, unknown>,
        ...(toolCallId !== undefined ? { tool_call_id: toolCallId } : {}),
        ...(timeoutMs !== undefined ? { timeout_ms: timeoutMs } : {}),
      }, callOptions);
      if (result.structured_content !== undefined && spec.result) {
        const checked = spec.result.safeParse(result.structured_content);
        if (!checked.success) {
          throw new InvalidResultError(
            "tool.result",
            checked.error.issues.map((i) => ({
              path: ["structured_content", ...i.path.map(String)],
              message: i.message,
              code: i.code,
            })),
          );
        }
      }
      return result as unknown as ToolCallResult<ToolMap[N]["result"]>;
    },
  };
}
