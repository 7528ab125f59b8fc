/**
 * The executor listens, the brain dials (seed 003: "Local socket (brain dials bmad)").
 *
 * The executor serves a local socket (`unix:///path.sock`, or a Windows named pipe through the
 * same code path) and a harness dials it. Only the direction of the socket changes: the
 * executor negotiates the subprotocol from the harness's offered list, then stays the client of
 * the JSON-RPC conversation (it sends `executor.register` first, heartbeats, reconnects by
 * accepting the harness's next dial, sends `resume`).
 *
 * {@linkcode InboundConnections} turns accepted sockets into a `Dialer` for the client's
 * connection loop, so the loop runs unchanged: "dialing" means waiting for the next harness.
 * One harness connection is served at a time; a second dial while one is in use is refused
 * before the upgrade (HTTP 409), and the harness tries again.
 *
 * A listening executor outlives its harnesses: a harness that closes (1001), restarts, or closes
 * its link normally (1000) leaves it listening, its sessions kept for the next dial's `resume`
 * ({@linkcode harnessSideClose}). It stops for good on what the seeds make stop: `executor.close`,
 * a refused registration, and the refusal codes 1008, 4002, 4003 and 4004.
 *
 * There is no authentication on this socket: who may connect is decided by the socket file's
 * permissions (or the pipe's ACL), as for any local daemon socket.
 */
import { PROTOCOLS } from "../protocol/generated/contract.ts";
import { CloseCode } from "../protocol/generated/errors.ts";
import type { UpgradeDecision } from "../transport/server.ts";
import {
  type CloseInfo,
  DialError,
  type DialOptions,
  type Transport,
} from "../transport/transport.ts";
import type { ExecutorRegisterResult } from "../protocol/generated/contract.ts";

/** A listening executor, as {@linkcode ExecutorClient.listen} returns it. */
export interface ExecutorListener {
  /** Where the executor listens: `unix:///path.sock` (or the named pipe path). */
  readonly url: string;
  /**
   * Settles with the first registration, once a harness has dialed in and accepted
   * `executor.register`; rejects if the client stops first or the registration is refused.
   */
  readonly registered: Promise<ExecutorRegisterResult>;
}

interface Waiter {
  resolve(transport: Transport): void;
  reject(error: unknown): void;
}

/** Accepted harness connections, handed one at a time to the connection loop as its dialer. */
export class InboundConnections {
  #waiter: Waiter | undefined;
  #queued: Transport | undefined;
  /** The connection handed to the loop; released when the loop asks for the next one. */
  #current: Transport | undefined;
  /** Upgrades accepted whose socket has neither opened nor been abandoned yet. */
  #opening = 0;
  #closed = false;

  /** Decides on a harness's upgrade: one connection at a time, subprotocol from its offer. */
  upgrade(_request: Request, protocols: string[]): Promise<UpgradeDecision> {
    if (this.#closed) return Promise.resolve(refuse(503, "unavailable"));
    const protocol = PROTOCOLS.find((p) => protocols.includes(p));
    if (!protocol) return Promise.resolve(refuse(400, "unsupported_subprotocol"));
    if (this.#busy()) return Promise.resolve(refuse(409, "busy"));
    this.#opening++;
    // Counted down once, whichever comes: an upgrade the server accepted may still fail (a
    // request the WebSocket library refuses, a peer that leaves before the 101), and one left
    // counted would answer every later dial 409.
    let counted = true;
    const settle = () => {
      if (counted) this.#opening--;
      counted = false;
    };
    return Promise.resolve({
      accept: true,
      protocol,
      onOpen: (transport) => {
        settle();
        this.#arrived(harnessSideClose(transport));
      },
      onAbandoned: settle,
    });
  }

  /** The loop's dialer: resolves with the next harness connection (the URL is the listener's). */
  readonly dial = (_url: string, options: DialOptions = {}): Promise<Transport> => {
    // The loop asks again only once it is done with the previous connection.
    this.#current = undefined;
    if (this.#closed) return Promise.reject(new DialError("the listener is closed"));
    const signal = options.signal;
    if (signal?.aborted) {
      return Promise.reject(new DialError("dial aborted", undefined, { cause: signal.reason }));
    }
    const queued = this.#queued;
    if (queued) {
      this.#queued = undefined;
      this.#handOut(queued);
      return Promise.resolve(queued);
    }
    return new Promise<Transport>((resolve, reject) => {
      const onAbort = () => {
        if (this.#waiter === waiter) this.#waiter = undefined;
        reject(new DialError("dial aborted", undefined, { cause: signal?.reason }));
      };
      const waiter: Waiter = {
        resolve: (transport) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(transport);
        },
        reject: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      };
      this.#waiter = waiter;
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  };

  /** Refuses further connections; a pending dial fails. */
  close(): void {
    this.#closed = true;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(new DialError("the listener is closed"));
    const queued = this.#queued;
    this.#queued = undefined;
    try {
      queued?.close(1001, "executor shutting down");
    } catch {
      // Already closed.
    }
  }

  #busy(): boolean {
    return this.#current !== undefined || this.#queued !== undefined || this.#opening > 0;
  }

  #handOut(transport: Transport): void {
    this.#current = transport;
    // A closed connection frees the socket for the harness's next dial even while the loop
    // still waits out its backoff: that dial is then held for it.
    transport.closed.then(() => {
      if (this.#current === transport) this.#current = undefined;
    });
  }

  #arrived(transport: Transport): void {
    if (this.#closed) {
      transport.close(1001, "executor shutting down");
      return;
    }
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      this.#handOut(transport);
      waiter.resolve(transport);
      return;
    }
    // The loop is between connections (backoff after a close): hold this one for it.
    this.#queued = transport;
    transport.closed.then(() => {
      if (this.#queued === transport) this.#queued = undefined;
    });
  }
}

/**
 * `transport` as the client's connection loop sees it: a normal close (1000) arrives as 1001.
 * The contract's "1000: do not reconnect" tells a dialing executor not to dial back; a listening
 * one never dials, and whether it is dialed again is the harness's choice. Stopping on it would
 * remove the socket under every later harness (the restarted one too) and drop the sessions it
 * could resume. `executor.close` before the 1000 still stops the client (the loop checks it
 * first); the refusal codes pass through unchanged and stop it.
 */
function harnessSideClose(transport: Transport): Transport {
  const closed = transport.closed.then((info): CloseInfo =>
    info.code === CloseCode.NORMAL
      ? {
        code: CloseCode.GOING_AWAY,
        reason: info.reason ? `${info.reason} (closed with 1000)` : "closed with 1000",
      }
      : info
  );
  return {
    get protocol() {
      return transport.protocol;
    },
    get bufferedAmount() {
      return transport.bufferedAmount;
    },
    closed,
    send: (frame) => transport.send(frame),
    listen: (receiver) => transport.listen(receiver),
    close: (code, reason) => transport.close(code, reason),
    ...(transport.abort ? { abort: transport.abort.bind(transport) } : {}),
  };
}

function refuse(status: number, error: string): UpgradeDecision {
  return {
    accept: false,
    response: new Response(JSON.stringify({ error }), {
      status,
      headers: { "content-type": "application/json" },
    }),
  };
}
