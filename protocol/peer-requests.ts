/**
 * The requests a peer has in flight, both ways. One it serves ({@linkcode IncomingRequest}) is
 * its handler's context: its id, its signal (aborted when the connection ends first) and the
 * hooks to run once its response is on the wire. The ones it has sent
 * ({@linkcode PendingRequests}) await their response: each ends exactly once — answered (its
 * result checked against the contract), timed out, aborted, or with the connection — and the
 * ids of those given up on are remembered, so that their late responses are expected rather
 * than reported as unknown.
 */
import { BoundedSet } from "./bounded-set.ts";
import type { Clock, TimerHandle } from "./clock.ts";
import { checked, Refused } from "./contract-check.ts";
import {
  ConnectionClosedError,
  describeError,
  InvalidResultError,
  RequestAbortedError,
  RequestTimeoutError,
} from "./errors.ts";
import type { MethodSpec } from "./generated/contract.ts";
import type { JsonRpcId } from "./jsonrpc.ts";
import type { Logger } from "./logger.ts";
import type { RequestContext } from "./peer-types.ts";

/**
 * The context of one incoming request. Its signal is created only when a handler reads it:
 * most handlers never do, and an AbortSignal is among the costliest objects a frame would
 * otherwise allocate.
 */
export class IncomingRequest implements RequestContext {
  readonly id: JsonRpcId;
  readonly method: string;
  readonly frameLength: number;
  #controller: AbortController | undefined;
  #aborted = false;
  #reason: unknown;
  #hooks: (() => void)[] | undefined;

  constructor(id: JsonRpcId, method: string, frameLength: number) {
    this.id = id;
    this.method = method;
    this.frameLength = frameLength;
  }

  /** Whether a hook waits for the response. */
  get hooked(): boolean {
    return this.#hooks !== undefined;
  }

  afterReply(fn: () => void): void {
    (this.#hooks ??= []).push(fn);
  }

  /** Runs the hooks (the response was sent), each on its own: one failing stops none. */
  runHooks(logger: Logger): void {
    const hooks = this.#hooks!;
    this.#hooks = undefined;
    for (const hook of hooks) {
      try {
        hook();
      } catch (error) {
        logger.error("after-reply hook failed", { error: describeError(error) });
      }
    }
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}

interface Pending {
  readonly method: string;
  readonly spec: MethodSpec;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  /**
   * When a request on the peer's default timeout expires (0: it has its own timer, or none).
   * These deadlines grow with insertion order, so one sweep timer serves them all.
   */
  readonly deadline: number;
  timer: TimerHandle | undefined;
  detach: (() => void) | undefined;
  /** Takes the result of a response that comes after the request was given up on. */
  readonly late: ((result: unknown) => void) | undefined;
}

/** The most abandoned requests remembered at once (their late responses expected). */
const ABANDONED_IDS = 1024;

/** A peer's outgoing requests awaiting their response, by id. */
export class PendingRequests {
  readonly #clock: Clock;
  /** The peer's default timeout, in ms; `0` waits forever. */
  readonly #timeoutMs: number;
  readonly #pending = new Map<JsonRpcId, Pending>();
  /** Ids of requests given up on (timeout, abort), made when the first is. */
  #abandoned: BoundedSet<JsonRpcId> | undefined;
  /** The late-result handlers of abandoned requests that have one, oldest first. */
  #late: Map<JsonRpcId, Pending> | undefined;
  /** The one timer that expires requests on the default timeout (see {@linkcode Pending}). */
  #sweepTimer: TimerHandle | undefined;

  constructor(clock: Clock, timeoutMs: number) {
    this.#clock = clock;
    this.#timeoutMs = timeoutMs;
  }

  /** How many requests await their response. */
  get size(): number {
    return this.#pending.size;
  }

  /** Whether request `id` awaits its response. */
  has(id: JsonRpcId): boolean {
    return this.#pending.has(id);
  }

  /** The method of request `id`, while it awaits its response. */
  method(id: JsonRpcId): string | undefined {
    return this.#pending.get(id)?.method;
  }

  /**
   * Waits for the response to request `id`: `resolve` gets its result, `reject` its error,
   * after `timeoutMs` (`0`: never) a {@linkcode RequestTimeoutError}, and once `signal` aborts a
   * {@linkcode RequestAbortedError}; `late` gets the result of a response that comes after
   * that (see {@linkcode lateResult}).
   */
  add(
    id: JsonRpcId,
    method: string,
    spec: MethodSpec,
    resolve: (value: unknown) => void,
    reject: (error: unknown) => void,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    late?: (result: unknown) => void,
  ): void {
    // A timer per request costs more than the request itself: requests on the default
    // timeout share one sweep; only other timeouts get their own timer.
    const swept = timeoutMs > 0 && timeoutMs === this.#timeoutMs;
    const pending: Pending = {
      method,
      spec,
      resolve,
      reject,
      deadline: swept ? this.#clock.now() + timeoutMs : 0,
      timer: undefined,
      detach: undefined,
      late,
    };
    if (swept) {
      if (this.#sweepTimer === undefined) this.#armSweep(pending.deadline);
    } else if (timeoutMs > 0) {
      pending.timer = this.#clock.setTimeout(
        () => this.settle(id, undefined, new RequestTimeoutError(method, timeoutMs)),
        timeoutMs,
      );
    }
    if (signal) {
      const onAbort = () =>
        this.settle(id, undefined, new RequestAbortedError(method, signal.reason));
      signal.addEventListener("abort", onAbort, { once: true });
      pending.detach = () => signal.removeEventListener("abort", onAbort);
    }
    this.#pending.set(id, pending);
    this.#abandoned?.delete(id);
    this.#late?.delete(id);
  }

  /** Ends a pending request exactly once: with `error`, else with `result` once checked. */
  settle(id: JsonRpcId, result: unknown, error?: unknown): void {
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    if (pending.timer !== undefined) this.#clock.clearTimeout(pending.timer);
    pending.detach?.();
    if (error !== undefined) {
      if (error instanceof RequestTimeoutError || error instanceof RequestAbortedError) {
        this.#abandon(id, pending);
      }
      pending.reject(error);
      return;
    }
    const verdict = checked(pending.spec.acceptsResult!, pending.spec.result!, result);
    if (verdict instanceof Refused) {
      pending.reject(new InvalidResultError(pending.method, verdict.issues));
    } else pending.resolve(verdict);
  }

  /** Whether `id` was given up on (a late response was expected): true once, then forgotten. */
  abandoned(id: JsonRpcId): boolean {
    return this.#abandoned?.delete(id) ?? false;
  }

  /**
   * The late-result handler of abandoned request `id` and its checked result, once (`undefined`
   * when it has none, or the result breaks the contract). Call after {@linkcode abandoned}.
   */
  lateResult(
    id: JsonRpcId,
    result: unknown,
  ): { handler: (result: unknown) => void; result: unknown } | undefined {
    const pending = this.#late?.get(id);
    if (pending === undefined) return undefined;
    this.#late!.delete(id);
    const verdict = checked(pending.spec.acceptsResult!, pending.spec.result!, result);
    return verdict instanceof Refused ? undefined : { handler: pending.late!, result: verdict };
  }

  /** The connection ended: every request rejects with {@linkcode ConnectionClosedError}. */
  end(code: number, reason: string): void {
    this.#late = undefined;
    if (this.#sweepTimer !== undefined) {
      this.#clock.clearTimeout(this.#sweepTimer);
      this.#sweepTimer = undefined;
    }
    for (const id of [...this.#pending.keys()]) {
      this.settle(id, undefined, new ConnectionClosedError(code, reason));
    }
  }

  #armSweep(at: number): void {
    this.#sweepTimer = this.#clock.setTimeout(
      () => this.#sweep(),
      Math.max(0, at - this.#clock.now()),
    );
  }

  /**
   * Expires the requests on the default timeout whose deadline has passed, oldest first, and
   * re-arms for the oldest that has not. Settled requests leave the sweep armed: it finds
   * nothing, which is cheaper than a timer set and cleared per request.
   */
  #sweep(): void {
    this.#sweepTimer = undefined;
    const now = this.#clock.now();
    for (const [id, pending] of this.#pending) {
      if (pending.deadline === 0) continue;
      if (pending.deadline > now) {
        this.#armSweep(pending.deadline);
        return;
      }
      this.settle(id, undefined, new RequestTimeoutError(pending.method, this.#timeoutMs));
    }
  }

  /**
   * Remembers ids whose late responses are expected, so they are not reported as unknown, and
   * the late-result handler of one that has it (as many as the ids, the oldest dropped first).
   */
  #abandon(id: JsonRpcId, pending: Pending): void {
    (this.#abandoned ??= new BoundedSet(ABANDONED_IDS)).add(id);
    if (pending.late === undefined) return;
    const late = this.#late ??= new Map();
    late.set(id, pending);
    if (late.size > ABANDONED_IDS) late.delete(late.keys().next().value!);
  }
}
