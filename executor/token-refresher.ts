/**
 * Keeps a connection's token valid: shortly before the JWT expires, fetch a fresh one with the
 * original credential and send it with `executor.token.refresh`, which moves the connection's
 * 4001 deadline. A harness without the method (-32601, or a `bma.executor.v1` connection) makes
 * the refresher stop: the harness closes with 4001 at the deadline and the client reconnects.
 */
import type { Clock, TimerHandle } from "../protocol/clock.ts";
import { ConnectionClosedError, MethodUnavailableError } from "../protocol/errors.ts";
import { MethodNotFoundError } from "../protocol/generated/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Peer } from "../protocol/peer.ts";
import type { Credentials, TokenCache } from "./credentials.ts";
import { CredentialRejectedError, ExecutorConfigError } from "./errors.ts";
import { backoffDelay, type BackoffPolicy, describeError } from "./timing.ts";

/** The least time between two refreshes of one connection. */
const MIN_REFRESH_INTERVAL_MS = 1_000;

/** What the refresher needs. */
export interface TokenRefresherOptions {
  peer: Peer;
  clock: Clock;
  logger: Logger;
  credentials: Credentials;
  /** The current token's expiry, ms since the epoch. */
  expiresAt: number;
  /** Refresh this long before expiry (at most half the remaining lifetime). */
  leadMs: number;
  retry: BackoffPolicy;
  random: () => number;
  /** Where a fresh token goes once the harness has accepted it. */
  tokens: TokenCache;
}

/** Refreshes one connection's token until stopped. */
export class TokenRefresher {
  readonly #options: TokenRefresherOptions;
  #expiresAt: number;
  #timer: TimerHandle | undefined;
  #controller = new AbortController();
  #stopped = false;
  #failures = 0;

  constructor(options: TokenRefresherOptions) {
    this.#options = options;
    this.#expiresAt = options.expiresAt;
  }

  /** The connection's current deadline. */
  get expiresAt(): number {
    return this.#expiresAt;
  }

  /** Schedules the next refresh. */
  start(): void {
    const { clock, leadMs } = this.#options;
    const remaining = this.#expiresAt - clock.now();
    const lead = Math.min(leadMs, remaining / 2);
    // A harness that does not move the deadline (or a skewed clock) must not turn this into a
    // busy loop against the token endpoint.
    this.#at(Math.max(MIN_REFRESH_INTERVAL_MS, remaining - lead));
  }

  /** Stops refreshing (the connection ended). */
  stop(): void {
    this.#stopped = true;
    this.#controller.abort();
    if (this.#timer !== undefined) this.#options.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #at(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = this.#options.clock.setTimeout(() => void this.#refresh(), delayMs);
  }

  async #refresh(): Promise<void> {
    this.#timer = undefined;
    const { peer, credentials, logger, clock } = this.#options;
    try {
      const token = await credentials.fetchToken(this.#controller.signal);
      if (this.#stopped) return;
      if (!token.token) return;
      const result = await peer.call("executor.token.refresh", { token: token.token });
      if (this.#stopped) return;
      const moved = Date.parse(result.expires_at);
      this.#expiresAt = Number.isNaN(moved) ? token.expiresAt ?? this.#expiresAt : moved;
      this.#failures = 0;
      logger.debug("executor token refreshed", {
        expires_at: new Date(this.#expiresAt).toISOString(),
      });
      this.#options.tokens.token = token;
      this.start();
    } catch (error) {
      if (this.#stopped || error instanceof ConnectionClosedError) return;
      if (error instanceof MethodNotFoundError || error instanceof MethodUnavailableError) {
        logger.info("the harness cannot refresh tokens: reconnecting when it closes with 4001");
        this.stop();
        return;
      }
      if (error instanceof ExecutorConfigError) {
        // A token source returning the wrong shape: asking it again would not mend that.
        logger.error("the token source cannot refresh the token", {
          error: describeError(error),
        });
        this.stop();
        return;
      }
      if (error instanceof CredentialRejectedError) {
        logger.warn("the credential was refused while refreshing the token", {
          status: error.status,
        });
        this.stop();
        return;
      }
      // A failed exchange or a refused token: try again while the old token still holds.
      this.#failures++;
      const delay = backoffDelay(this.#options.retry, this.#failures, this.#options.random);
      if (clock.now() + delay >= this.#expiresAt) {
        logger.warn("token refresh failed; the connection will end at its deadline", {
          error: describeError(error),
        });
        return;
      }
      logger.debug("token refresh failed; retrying", { error: describeError(error) });
      this.#at(delay);
    }
  }
}
