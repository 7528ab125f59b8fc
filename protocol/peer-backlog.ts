/**
 * What a peer does about the other end not reading what it is sent: how such a connection is
 * ended, and the peer's transport as a holder in its server's budget of unsent bytes
 * (transport/unsent-budget.ts).
 */
import type { Transport } from "../transport/transport.ts";
import type { UnsentHolder } from "../transport/unsent-budget.ts";
import { CloseCode } from "./generated/errors.ts";
import type { Logger } from "./logger.ts";

/**
 * Ends a connection whose peer does not read what it is sent, with 1011 (the contract's
 * transient fault: the peer reconnects and resumes, where 1008 would stop an executor for good
 * whose only fault may be a slow link while others filled the budget). At once where the
 * transport can (its close frame would wait behind the backlog and hold it meanwhile).
 */
export function dropUnread(transport: Transport, reason: string): void {
  if (transport.abort) transport.abort(CloseCode.INTERNAL_ERROR, reason);
  else transport.close(CloseCode.INTERNAL_ERROR, reason);
}

/** A peer's transport as a holder of unsent bytes in its server's budget. */
export class PeerHolder implements UnsentHolder {
  readonly #transport: Transport;
  readonly #logger: Logger;
  constructor(transport: Transport, logger: Logger) {
    this.#transport = transport;
    this.#logger = logger;
  }
  unsentBytes(): number {
    return this.#transport.bufferedAmount ?? 0;
  }
  shed(): void {
    this.#logger.warn("unsent budget exceeded: closing the connection that holds the most", {
      unsent_bytes: this.unsentBytes(),
    });
    dropUnread(this.#transport, "unsent budget exceeded");
  }
}
