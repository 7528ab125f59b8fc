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
import type { PlatformContext } from "./context.ts";
import { turnInfo } from "./records.ts";
import type { PlatformSessions } from "./sessions.ts";

/** The token requests of executors. */
export class PlatformTokens {
  readonly #ctx: PlatformContext;
  readonly #sessions: PlatformSessions;

  constructor(ctx: PlatformContext, sessions: PlatformSessions) {
    this.#ctx = ctx;
    this.#sessions = sessions;
  }

  /** `model_token.refresh`: signed by `modelTokens` for an active turn routed to the executor. */
  async model(
    executor: ExecutorHandle,
    params: ModelTokenRefreshParams,
  ): Promise<ModelTokenRefreshResult> {
    const turn = this.#sessions.activeTurn(executor, params.session_id, params.turn_id);
    const issue = this.#ctx.options.modelTokens;
    if (!issue) {
      throw new CapabilityMissingError("the platform issues no model token", {
        reason: "model_token_unavailable",
        capability: "agent",
      });
    }
    const grant = await issue(turnInfo(turn));
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
    const turn = this.#sessions.activeTurn(executor, params.session_id, params.turn_id);
    if (params.epoch !== undefined && params.epoch !== turn.epoch) {
      // Only the turn's current epoch gets tools tokens.
      throw new TurnInactiveError("the turn runs in a newer epoch", { reason: "turn_inactive" });
    }
    const issue = this.#ctx.options.toolsTokens;
    if (!issue) {
      throw new CapabilityMissingError("the platform issues no tools token for this turn", {
        reason: "tools_token_unavailable",
        capability: "agent",
      });
    }
    const grant = await issue(turnInfo(turn));
    return {
      tools_mcp_token: grant.tools_mcp_token,
      expires_at: isoDate(grant.expires_at),
      ...(grant.tools_mcp_url !== undefined ? { tools_mcp_url: grant.tools_mcp_url } : {}),
    };
  }
}

function isoDate(value: string | Date | number): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
