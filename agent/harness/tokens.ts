/**
 * The model and tools tokens the platform signs for executors (`model_token.refresh`,
 * `tools_token.refresh`): only for an active turn of a session routed to the asking executor,
 * and tools tokens only for the turn's current epoch; the signing itself is the issuers' of
 * the platform's options.
 */
import type { ExecutorHandle } from "../../harness/handles.ts";
import type {
  ModelTokenRefreshParams,
  ModelTokenRefreshResult,
  ToolsTokenRefreshParams,
  ToolsTokenRefreshResult,
} from "../../protocol/generated/contract.ts";
import { CapabilityMissingError, TurnInactiveError } from "../../protocol/generated/errors.ts";
import type { PlatformParts } from "./parts.ts";
import { turnInfo, type TurnRecord } from "./records.ts";
import type { AgentTurnInfo } from "./types.ts";

/** The token requests of executors. */
export class PlatformTokens {
  readonly #parts: PlatformParts;

  constructor(parts: PlatformParts) {
    this.#parts = parts;
  }

  /** `model_token.refresh`: signed by `modelTokens` for an active turn routed to the executor. */
  async model(
    executor: ExecutorHandle,
    params: ModelTokenRefreshParams,
  ): Promise<ModelTokenRefreshResult> {
    const turn = this.#parts.sessions.activeTurn(executor, params.session_id, params.turn_id);
    const grant = await signed("model", this.#parts.ctx.options.modelTokens, turn);
    return {
      model_token: grant.model_token,
      expires_at: isoDate(grant.expires_at),
      ...(grant.model_base_url !== undefined ? { model_base_url: grant.model_base_url } : {}),
    };
  }

  /** `tools_token.refresh`: signed by `toolsTokens`, for the turn's current epoch only. */
  async tools(
    executor: ExecutorHandle,
    params: ToolsTokenRefreshParams,
  ): Promise<ToolsTokenRefreshResult> {
    const turn = this.#parts.sessions.activeTurn(executor, params.session_id, params.turn_id);
    if (params.epoch !== undefined && params.epoch !== turn.epoch) {
      // Only the turn's current epoch gets tools tokens.
      throw new TurnInactiveError("the turn runs in a newer epoch", { reason: "turn_inactive" });
    }
    const grant = await signed("tools", this.#parts.ctx.options.toolsTokens, turn);
    return {
      tools_mcp_token: grant.tools_mcp_token,
      expires_at: isoDate(grant.expires_at),
      ...(grant.tools_mcp_url !== undefined ? { tools_mcp_url: grant.tools_mcp_url } : {}),
    };
  }
}

/** `turn`'s token signed by the platform's issuer; without one, -32012 `<kind>_token_unavailable`. */
function signed<G>(
  kind: "model" | "tools",
  issue: ((turn: AgentTurnInfo) => G | Promise<G>) | undefined,
  turn: TurnRecord,
): G | Promise<G> {
  if (!issue) {
    throw new CapabilityMissingError(`the platform issues no ${kind} token`, {
      reason: `${kind}_token_unavailable`,
      capability: "agent",
    });
  }
  return issue(turnInfo(turn));
}

function isoDate(value: string | Date | number): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
