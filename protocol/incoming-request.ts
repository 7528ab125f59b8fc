/**
 * One request a peer serves, as its handler sees it ({@linkcode RequestContext}): its id, its
 * signal (aborted when the connection ends first) and the hooks to run once its response is on
 * the wire.
 */
import { describeError } from "./errors.ts";
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
