/**
 * The handler table many peers share ({@linkcode PeerHandlers}): a server registers each method
 * once for all its connections, where handlers registered per peer would cost a closure and a
 * map entry per method per connection.
 */
import { requireSpec } from "./contract-check.ts";
import type { ProtocolError } from "./errors.ts";
import type { NotificationMethod, RequestMethod } from "./generated/contract.ts";
import type {
  AnyNotificationHandler,
  AnyRequestHandler,
  HandlerTable,
  ReplyHooks,
  RequestContext,
  SharedNotificationHandler,
  SharedRequestHandler,
} from "./peer-types.ts";

/**
 * Request and notification handlers shared by many peers (e.g. every connection of a server):
 * one table, where handlers registered per peer cost a closure and a map entry per method per
 * connection. Each handler receives the `owner` its peer was given ({@linkcode PeerOptions}).
 * A peer's own handlers take precedence over the table's.
 */
export class PeerHandlers<O> implements HandlerTable {
  /** Optional gate run after the peer's own {@linkcode Peer.admit} has admitted a message. */
  admit:
    | ((
      owner: O,
      method: string,
      kind: "request" | "notification",
      reply?: ReplyHooks,
    ) => ProtocolError | undefined)
    | undefined;
  /**
   * Optional: told of each refusal a peer makes, after it is sent: an error answered (its code),
   * or a notification or response dropped as invalid (-32600, or the code it would have had).
   * A server counts what a connection that has not registered sends it for nothing.
   */
  refused: ((owner: O, code: number) => void) | undefined;
  readonly #requests = new Map<string, AnyRequestHandler>();
  readonly #notifications = new Map<string, AnyNotificationHandler>();

  /** Serves a request method on every peer of the table. Registering again replaces it. */
  onRequest<M extends RequestMethod>(method: M, handler: SharedRequestHandler<M, O>): this {
    requireSpec(method, "request");
    this.#requests.set(method, handler as AnyRequestHandler);
    return this;
  }

  /** Receives a notification method on every peer of the table. Registering again replaces it. */
  onNotification<M extends NotificationMethod>(
    method: M,
    handler: SharedNotificationHandler<M, O>,
  ): this {
    requireSpec(method, "notification");
    this.#notifications.set(method, handler as AnyNotificationHandler);
    return this;
  }

  /** The handler of a request method, if the table serves it. */
  request(
    method: string,
  ): ((params: unknown, context: RequestContext, owner?: unknown) => unknown) | undefined {
    return this.#requests.get(method);
  }

  /** The handler of a notification method, if the table serves it. */
  notification(method: string): ((params: unknown, owner?: unknown) => unknown) | undefined {
    return this.#notifications.get(method);
  }
}
