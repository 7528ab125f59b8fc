/**
 * The model and tools tokens of the agent capability's turns on the executor end: what
 * `turn.start` brought, refreshed from the harness (`model_token.refresh`,
 * `tools_token.refresh`) when less than the lead time remains; a harness without the methods
 * leaves the turn the token it has.
 */
import { ProtocolError } from "../../protocol/errors.ts";
import { ErrorCode } from "../../protocol/generated/errors.ts";
import type { ServiceContext } from "./context.ts";
import { TokenUnavailableError } from "./errors.ts";
import { deliveryVerdict } from "./delivery.ts";
import { TOKEN_REFRESH_LEAD_MS } from "./options.ts";
import {
  ASSUMED_TOKEN_LIFETIME_MS,
  rejected,
  type SessionState,
  type TokenCache,
  type TokenView,
  type TurnRun,
} from "./state.ts";

/** The tokens of every turn the service runs. */
export class TurnTokens {
  readonly #ctx: ServiceContext;
  /** Refresh when less than this remains, in ms. */
  readonly #leadMs: number;

  constructor(ctx: ServiceContext) {
    this.#ctx = ctx;
    this.#leadMs = ctx.options.tokenRefreshLeadMs ?? TOKEN_REFRESH_LEAD_MS;
  }

  /** The turn's model or tools token, refreshed first when less than the lead time remains. */
  token(state: SessionState, run: TurnRun, kind: "model" | "tools"): Promise<TokenView> {
    const cache = kind === "model" ? run.model : run.tools;
    const now = this.#ctx.clock.now();
    if (cache.token !== undefined && cache.expiresAt - now >= this.#leadMs) {
      return Promise.resolve(view(cache));
    }
    if (cache.methodMissing) return this.#keep(cache, kind, "the harness issues no fresh token");
    cache.inflight ??= this.#refresh(state, run, kind, cache).finally(() => {
      cache.inflight = undefined;
    });
    return cache.inflight;
  }

  async #refresh(
    state: SessionState,
    run: TurnRun,
    kind: "model" | "tools",
    cache: TokenCache,
  ): Promise<TokenView> {
    const signal = run.controller.signal;
    try {
      if (kind === "model") {
        const result = await this.#ctx.client.call("model_token.refresh", {
          session_id: state.id,
          turn_id: run.turnId,
        }, { signal });
        this.#store(kind, cache, result.model_token, result.expires_at, result.model_base_url);
      } else {
        const result = await this.#ctx.client.call("tools_token.refresh", {
          session_id: state.id,
          turn_id: run.turnId,
          ...(run.params.metadata?.epoch !== undefined ? { epoch: run.epoch } : {}),
        }, { signal });
        this.#store(kind, cache, result.tools_mcp_token, result.expires_at, result.tools_mcp_url);
      }
      return view(cache);
    } catch (error) {
      if (error instanceof ProtocolError && error.code === ErrorCode.METHOD_NOT_FOUND) {
        // A harness without the method: the executor keeps the token it has.
        cache.methodMissing = true;
        this.#ctx.logger.info("the harness does not refresh tokens: keeping the current one", {
          kind,
          session_id: state.id,
        });
        return this.#keep(cache, kind, "the harness does not refresh tokens (-32601)");
      }
      // The token it has stays valid until it expires (seed 000): a refresh that failed without
      // revoking it (a lost connection, a retryable refusal, the harness's own fault, an answer
      // already expired) leaves the turn that one; a refusal (-32001, -32007, -32012) does not.
      if (
        keepsCurrent(error) && cache.token !== undefined &&
        cache.expiresAt > this.#ctx.clock.now()
      ) {
        return view(cache);
      }
      throw error;
    }
  }

  #store(
    kind: "model" | "tools",
    cache: TokenCache,
    token: string,
    expiresAt: string,
    url: string | undefined,
  ): void {
    this.#ctx.host.addSecret(token);
    const parsed = Date.parse(expiresAt);
    if (Number.isFinite(parsed) && parsed <= this.#ctx.clock.now()) {
      throw new ExpiredAnswerError(kind);
    }
    cache.token = token;
    cache.expiresAt = Number.isFinite(parsed)
      ? parsed
      : this.#ctx.clock.now() + ASSUMED_TOKEN_LIFETIME_MS;
    if (url !== undefined) cache.url = url;
  }

  #keep(cache: TokenCache, kind: "model" | "tools", why: string): Promise<TokenView> {
    if (cache.token !== undefined && cache.expiresAt > this.#ctx.clock.now()) {
      return Promise.resolve(view(cache));
    }
    const missing = cache.token === undefined ? "none came with turn.start" : "it has expired";
    return rejected(new TokenUnavailableError(kind, `${missing}, and ${why}`));
  }
}

/** A refresh answered with a token that had already expired: no fresher than none. */
class ExpiredAnswerError extends TokenUnavailableError {
  constructor(kind: "model" | "tools") {
    super(kind, "the harness answered the refresh with a token that has already expired");
  }
}

/** Whether a failed refresh leaves the turn the token it has (see `#refresh`). */
function keepsCurrent(error: unknown): boolean {
  if (error instanceof ExpiredAnswerError) return true;
  if (error instanceof ProtocolError && error.code === ErrorCode.INTERNAL_ERROR) return true;
  return deliveryVerdict(error) !== "fail";
}

function view(cache: TokenCache): TokenView {
  return {
    token: cache.token!,
    expiresAt: cache.expiresAt,
    ...(cache.url !== undefined ? { url: cache.url } : {}),
  };
}
