/**
 * Requests that must reach the harness: `tool.result` (idempotent by `tool_call_id`) and, through
 * the same {@linkcode deliver} loop, `session.ended`. Each is sent on the registered connection,
 * sent again on the next one if the connection drops first, and retried after a delay on
 * -32009, -32004 (the retryable codes of the contract) or a timeout, until it is accepted. Any
 * other refusal is final: a tool result given up on goes to `onToolResultLost`.
 */
import type { Clock } from "../protocol/clock.ts";
import { FrameTooLargeError } from "../protocol/errors.ts";
import type {
  ExecutorRequestMethod,
  RequestMap,
  ToolResultParams,
} from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Peer } from "../protocol/peer.ts";
import { isRetryable, retrying, retryVerdict } from "../protocol/retry.ts";
import { type BackoffPolicy, describeError } from "./timing.ts";

/** Gives access to the registered connection. */
export interface ConnectionLink {
  /**
   * Resolves with the registered connection, waiting for one if there is none; rejects when the
   * signal aborts or the client stops for good.
   */
  whenConnected(signal?: AbortSignal): Promise<Peer>;
  /** The registered connection if there is one now (saves a promise on the common path). */
  connected?(): Peer | undefined;
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

export { isRetryable };

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
  });
}

/**
 * Every result in flight listens to the outbox's one signal: lift Node's limit of 10 listeners
 * per event target, past which it prints a (here false) leak warning. Feature-detected, so the
 * portable core imports nothing from Node; elsewhere there is no such limit.
 */
function unboundedListeners(signal: AbortSignal): void {
  const events = (globalThis as {
    process?: { getBuiltinModule?: (id: string) => unknown };
  }).process?.getBuiltinModule?.("node:events") as
    | { setMaxListeners?: (n: number, ...targets: EventTarget[]) => void }
    | undefined;
  try {
    events?.setMaxListeners?.(0, signal);
  } catch {
    // A runtime whose events module does not take an AbortSignal has no such limit either.
  }
}

/** Called with a tool result the client gave up on, and why. */
export type ToolResultLostHandler = (result: ToolResultParams, error: unknown) => void;

interface PendingResult {
  readonly params: ToolResultParams;
  readonly accepted: Promise<boolean>;
}

/** Options of {@linkcode ResultOutbox}. */
export interface ResultOutboxOptions {
  link: ConnectionLink;
  clock: Clock;
  random: () => number;
  retry: BackoffPolicy;
  timeoutMs: number;
  logger: Logger;
  /** Who is told of each result given up on (`onToolResultLost`); read at each loss. */
  lostHandlers: ReadonlySet<ToolResultLostHandler>;
}

/** The tool results of one client that are not yet accepted. */
export class ResultOutbox {
  readonly #options: ResultOutboxOptions;
  readonly #pending = new Map<string, PendingResult>();
  /** Aborts every pending delivery on close (one signal for all: a signal per result is costly). */
  readonly #closing = new AbortController();
  #closedWith: unknown;

  constructor(options: ResultOutboxOptions) {
    this.#options = options;
    unboundedListeners(this.#closing.signal);
  }

  /** Results not yet accepted or given up on. */
  get pending(): number {
    return this.#pending.size;
  }

  /**
   * Delivers a result; resolves `true` once accepted, `false` once given up on (after
   * `onToolResultLost` ran). A second send for a call still pending joins the first.
   */
  send(params: ToolResultParams): Promise<boolean> {
    const existing = this.#pending.get(params.tool_call_id);
    if (existing) return existing.accepted;
    if (this.#closedWith !== undefined) {
      this.#lost(params, this.#closedWith);
      return Promise.resolve(false);
    }
    const pending: PendingResult = { params, accepted: this.#deliver(params) };
    this.#pending.set(params.tool_call_id, pending);
    return pending.accepted;
  }

  /**
   * Delivers through {@linkcode deliver}: across reconnects and retryable refusals. A result
   * too large for one frame is reported as a failure instead of being lost (the connection
   * finds it too large when it serializes it: no second walk over every result to measure it).
   */
  #deliver(params: ToolResultParams, tooLarge = false): Promise<boolean> {
    return deliver(this.#options.link, "tool.result", params, {
      clock: this.#options.clock,
      random: this.#options.random,
      retry: this.#options.retry,
      timeoutMs: this.#options.timeoutMs,
      signal: this.#closing.signal,
      // Closing comes with the connection's end, which ends the request in flight anyway.
      signalBetweenAttempts: true,
    }).then(
      () => this.#accepted(params),
      (error) =>
        error instanceof FrameTooLargeError && !tooLarge
          ? this.#deliver(this.#tooLarge(params), true)
          : this.#given(params, error),
    );
  }

  #tooLarge(params: ToolResultParams): ToolResultParams {
    this.#options.logger.warn("tool result too large for one frame", {
      tool_call_id: params.tool_call_id,
    });
    return {
      session_id: params.session_id,
      tool_call_id: params.tool_call_id,
      outcome: "failed",
      error: {
        message: "the result is larger than the frame limit; return large output as an artifact",
        code: "result_too_large",
      },
    };
  }

  #accepted(params: ToolResultParams): boolean {
    this.#pending.delete(params.tool_call_id);
    return true;
  }

  #given(params: ToolResultParams, error: unknown): boolean {
    this.#pending.delete(params.tool_call_id);
    this.#lost(params, error);
    return false;
  }

  /** Resolves once every result pending now is accepted or given up on. */
  async idle(): Promise<void> {
    await Promise.all([...this.#pending.values()].map((p) => p.accepted));
  }

  /** Gives up on every pending result with `error` (the client stopped). */
  close(error: unknown): void {
    this.#closedWith = error;
    this.#closing.abort(error);
  }

  #lost(params: ToolResultParams, error: unknown): void {
    this.#options.logger.warn("tool result lost", {
      session_id: params.session_id,
      tool_call_id: params.tool_call_id,
      error: describeError(error),
    });
    for (const handler of [...this.#options.lostHandlers]) {
      try {
        handler(params, error);
      } catch (handlerError) {
        this.#options.logger.error("onToolResultLost handler failed", {
          error: describeError(handlerError),
        });
      }
    }
  }
}
