/**
 * Sending again: the one backoff, wait and retry rule of the SDK. Which failures may be sent
 * again ({@linkcode retryVerdict}), how long to wait ({@linkcode retryDelay}: the peer's
 * `retry_after_ms`, else the backoff), the deliver-until-accepted loop ({@linkcode retrying})
 * and the executor's sending on its registered connection until accepted ({@linkcode deliver}:
 * `tool.result`, `session.ready`, `session.ended`) live here alone, so the executor's
 * deliveries, its event outbox and the agent capability's resent requests on both ends cannot
 * drift apart. Every wait is on the injected clock, so tests
 * drive each delay by hand.
 */
import type { Clock } from "./clock.ts";
import { ConnectionClosedError, ProtocolError, RequestTimeoutError } from "./errors.ts";
import type { ExecutorRequestMethod, RequestMap } from "./generated/contract.ts";
import { RETRYABLE_ERROR_CODES } from "./generated/errors.ts";
import type { Peer } from "./peer.ts";
import { isTimerSpan, MAX_TIMEOUT_MS } from "./timeout-option.ts";

/** Exponential backoff with jitter and a cap. */
export interface BackoffPolicy {
  /** Delay before the first retry, in ms. Default 250. */
  initialDelayMs?: number;
  /** The cap on any delay, in ms. Default 30 000. */
  maxDelayMs?: number;
  /** Growth factor per attempt. Default 2. */
  multiplier?: number;
  /**
   * Fraction of each delay that is randomized, 0..1. Default 0.5: a delay `d` becomes a value in
   * `[d * (1 - jitter), d]`, so executors cut off together do not reconnect together.
   */
  jitter?: number;
}

/**
 * What is wrong with `policy`, if anything (`undefined`: nothing): a delay that is no timer's
 * span, a multiplier under 1, a jitter outside 0..1 (a negative delay retried at once, for good).
 */
export function backoffPolicyProblem(policy: unknown): string | undefined {
  if (policy === undefined) return undefined;
  if (typeof policy !== "object" || policy === null) return "must be an object";
  const { initialDelayMs, maxDelayMs, multiplier, jitter } = policy as BackoffPolicy;
  if (initialDelayMs !== undefined && !isTimerSpan(initialDelayMs)) {
    return `initialDelayMs must be a number of ms from 0 to ${MAX_TIMEOUT_MS}`;
  }
  if (maxDelayMs !== undefined && !isTimerSpan(maxDelayMs)) {
    return `maxDelayMs must be a number of ms from 0 to ${MAX_TIMEOUT_MS}`;
  }
  if (
    multiplier !== undefined &&
    !(typeof multiplier === "number" && multiplier >= 1 && multiplier < Infinity)
  ) {
    return "multiplier must be a number ≥ 1";
  }
  if (jitter !== undefined && !(typeof jitter === "number" && jitter >= 0 && jitter <= 1)) {
    return "jitter must be a number from 0 to 1";
  }
  return undefined;
}

/** The delay before retry number `attempt` (1-based) under `policy`. */
export function backoffDelay(
  policy: BackoffPolicy,
  attempt: number,
  random: () => number,
): number {
  const initial = policy.initialDelayMs ?? 250;
  const max = policy.maxDelayMs ?? 30_000;
  const multiplier = policy.multiplier ?? 2;
  const jitter = Math.min(1, Math.max(0, policy.jitter ?? 0.5));
  const base = Math.min(max, initial * Math.pow(multiplier, Math.max(0, attempt - 1)));
  return Math.max(0, Math.round(base * (1 - jitter * random())));
}

/** Resolves after `ms` on `clock`; rejects with the signal's reason when aborted first. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Whether a failed request may be sent again unchanged: a timeout, or an error code the
 * contract marks retryable (`x-retryable`: -32004, -32009).
 */
export function isRetryable(error: unknown): boolean {
  return error instanceof RequestTimeoutError ||
    (error instanceof ProtocolError && RETRYABLE_ERROR_CODES.has(error.code));
}

/**
 * What a failed attempt means for the next one: `"retry"` after a delay, `"again"` at once, or
 * `"fail"` (give up and reject).
 */
export type RetryVerdict = "retry" | "again" | "fail";

/**
 * The SDK's rule for a request that must be delivered: a lost connection is sent `"again"` at
 * once (the request never got an answer, and the next attempt waits for a new connection, so
 * there is nothing to back off from), a {@linkcode isRetryable} failure is a `"retry"` after the
 * delay, anything else is final. Callers with a stricter rule (the harness's agent platform lets
 * its caller see -32009 and `draining`) decide their exceptions first and defer to this.
 */
export function retryVerdict(error: unknown): RetryVerdict {
  if (error instanceof ConnectionClosedError) return "again";
  return isRetryable(error) ? "retry" : "fail";
}

/**
 * The longest wait a peer's `retry_after_ms` buys: a minute. A hint of days (or 1e308) would
 * hold what waits for good, and the peer that gave it may be gone long before.
 */
export const MAX_RETRY_AFTER_MS = 60_000;

/** The peer's `data.retry_after_ms` on a refusal, when it gives a usable one (at most a minute). */
export function retryAfterMs(error: unknown): number | undefined {
  if (!(error instanceof ProtocolError)) return undefined;
  const hinted = (error.data as { retry_after_ms?: unknown } | undefined)?.retry_after_ms;
  return typeof hinted === "number" && hinted >= 0
    ? Math.min(hinted, MAX_RETRY_AFTER_MS)
    : undefined;
}

/** How long to wait before retry `attempt`: the peer's `data.retry_after_ms`, else the backoff. */
export function retryDelay(
  error: unknown,
  policy: BackoffPolicy,
  attempt: number,
  random: () => number,
): number {
  return retryAfterMs(error) ?? backoffDelay(policy, attempt, random);
}

/** Options of {@linkcode retrying}. */
export interface RetryOptions {
  /** The clock the waits run on. */
  readonly clock: Clock;
  /** The backoff between attempts. */
  readonly policy: BackoffPolicy;
  /** Randomness for the jitter. Default `Math.random`. */
  readonly random?: () => number;
  /**
   * Stops the attempts: once it has aborted, no attempt starts, a wait between attempts ends,
   * and a failure rejects with the signal's reason (the abort is why the attempt failed).
   */
  readonly signal?: AbortSignal;
  /**
   * What an attempt's failure means: `"retry"` after the backoff, `"again"` at once (a lost
   * connection: the next attempt waits for a new one), or `"fail"`. Default: the contract's
   * rule ({@linkcode isRetryable}); {@linkcode retryVerdict} adds the lost connection for an
   * attempt that waits for the next one.
   */
  readonly classify?: (error: unknown) => "retry" | "again" | "fail";
  /**
   * Ends a wait between attempts early when it settles (it gets a signal that aborts when the
   * wait is over): a new connection, whose peer never asked this one to wait.
   */
  readonly wake?: (signal: AbortSignal) => Promise<void>;
}

const contractRule = (error: unknown): RetryVerdict => isRetryable(error) ? "retry" : "fail";

/**
 * Runs `attempt` until it resolves: a failure `classify` calls retryable is tried again after
 * the backoff (or the peer's `retry_after_ms`), one it calls `again` at once; any other
 * failure rejects, and so does the signal. The backoff grows with the `"retry"` failures only:
 * a reconnect in between is not the peer asking to slow down.
 */
export async function retrying<T>(
  attempt: (n: number) => T | Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const { clock, policy, signal } = options;
  const classify = options.classify ?? contractRule;
  const random = options.random ?? Math.random;
  let failures = 0;
  for (let n = 1;; n++) {
    if (signal?.aborted) throw signal.reason;
    try {
      return await attempt(n);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const verdict = classify(error);
      if (verdict === "fail") throw error;
      if (verdict === "again") continue;
      failures++;
      const delay = retryDelay(error, policy, failures, random);
      if (options.wake) await wakeableSleep(clock, delay, options.wake, signal);
      else await sleep(clock, delay, signal);
    }
  }
}

/** Sleeps `ms`, or less when `wake` settles first; rejects when `signal` aborts. */
export async function wakeableSleep(
  clock: Clock,
  ms: number,
  wake: (signal: AbortSignal) => Promise<void>,
  signal: AbortSignal | undefined,
): Promise<void> {
  const over = new AbortController();
  const abort = () => over.abort(signal!.reason);
  signal?.addEventListener("abort", abort, { once: true });
  try {
    // The sleep ends early (rejecting) when the wait is over either way: that is no failure.
    await Promise.race([sleep(clock, ms, over.signal).catch(() => {}), wake(over.signal)]);
  } finally {
    signal?.removeEventListener("abort", abort);
    over.abort();
  }
  if (signal?.aborted) throw signal.reason;
}

/** Gives access to the registered connection (the executor's link to its harness). */
export interface ConnectionLink {
  /**
   * Resolves with the registered connection, waiting for one if there is none; rejects when the
   * signal aborts or the client stops for good.
   */
  whenConnected(signal?: AbortSignal): Promise<Peer>;
  /** The registered connection if there is one now (saves a promise on the common path). */
  connected?(): Peer | undefined;
  /**
   * Resolves when a new connection registers (never, once `signal` aborts): a wait the previous
   * harness asked for (`retry_after_ms`) ends with it.
   */
  nextConnection?(signal: AbortSignal): Promise<void>;
}

/** How {@linkcode deliver} retries. */
export interface DeliveryOptions {
  clock: Clock;
  random: () => number;
  retry: BackoffPolicy;
  timeoutMs: number;
  signal?: AbortSignal;
  /**
   * The signal stops waits and retries only, not a request in flight (which still ends with its
   * connection or its timeout): for a signal shared by many deliveries, where a listener per
   * request would cost more than the request.
   */
  signalBetweenAttempts?: boolean;
}

/**
 * Sends a request until the harness accepts it: across reconnects, and after retryable
 * refusals with backoff (honouring `data.retry_after_ms`): the shared {@linkcode retrying} under
 * the shared {@linkcode retryVerdict}. Rejects with the first final refusal, or when `signal`
 * aborts.
 */
export function deliver<M extends ExecutorRequestMethod>(
  link: ConnectionLink,
  method: M,
  params: RequestMap[M]["params"],
  options: DeliveryOptions,
): Promise<RequestMap[M]["result"]> {
  const callOptions = {
    timeoutMs: options.timeoutMs,
    signal: options.signalBetweenAttempts ? undefined : options.signal,
  };
  return retrying(() => {
    // The live connection at once when there is one: no promise to wait on, on every call.
    const peer = link.connected?.();
    return peer
      ? peer.call(method, params, callOptions)
      : link.whenConnected(options.signal).then((next) => next.call(method, params, callOptions));
  }, {
    clock: options.clock,
    policy: options.retry,
    random: options.random,
    signal: options.signal,
    classify: retryVerdict,
    ...(link.nextConnection ? { wake: (over) => link.nextConnection!(over) } : {}),
  });
}
