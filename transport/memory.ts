/**
 * An in-memory linked pair of transports that behaves like the two ends of a WebSocket:
 * asynchronous in-order delivery, close codes and reasons seen by both ends, a negotiated
 * subprotocol, and frames sent before the other end listens are buffered, not lost.
 *
 * For unit tests of the protocol core and for in-process harness/executor pairs.
 */
import {
  assertSendableCloseCode,
  clampCloseReason,
  type CloseInfo,
  type Transport,
  TransportClosedError,
  type TransportReceiver,
} from "./transport.ts";

/** Options of {@linkcode createLinkedTransportPair}. */
export interface LinkedPairOptions {
  /** The subprotocol both ends report as negotiated. Default `""`. */
  protocol?: string;
}

type InboxItem = string | { close: CloseInfo };

class MemoryTransport implements Transport {
  readonly protocol: string;
  readonly closed: Promise<CloseInfo>;
  other: MemoryTransport | undefined;
  #receiver: TransportReceiver | undefined;
  #inbox: InboxItem[] = [];
  #scheduled = false;
  #closeInfo: CloseInfo | undefined;
  #closedLocally = false;
  #resolveClosed!: (info: CloseInfo) => void;

  constructor(protocol: string) {
    this.protocol = protocol;
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
  }

  send(frame: string): void {
    if (this.#closeInfo) {
      throw new TransportClosedError(this.#closeInfo.code, this.#closeInfo.reason);
    }
    if (typeof frame !== "string") throw new TypeError("a frame is a string");
    this.other!.#enqueue(frame);
  }

  listen(receiver: TransportReceiver): void {
    if (this.#receiver) throw new Error("listen() may be called once");
    this.#receiver = receiver;
    this.#schedule();
  }

  close(code = 1000, reason = ""): void {
    assertSendableCloseCode(code);
    if (this.#closeInfo) return;
    const info = { code, reason: clampCloseReason(reason) };
    this.#closedLocally = true;
    this.#finish(info);
    // Frames this side already sent reach the other end before it sees the close, as on a socket.
    this.other!.#enqueue({ close: info });
  }

  #enqueue(item: InboxItem): void {
    if (this.#closeInfo) return; // arrived after this side closed: dropped, as on a socket
    this.#inbox.push(item);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => this.#drain());
  }

  #drain(): void {
    this.#scheduled = false;
    if (!this.#receiver) {
      // Nobody listens yet: the close is seen now, its frames wait for listen(): nothing is lost.
      const at = this.#inbox.findIndex((item) => typeof item !== "string");
      if (at >= 0) this.#finish((this.#inbox.splice(at, 1)[0] as { close: CloseInfo }).close);
      return;
    }
    while (this.#inbox.length > 0) {
      const item = this.#inbox[0];
      if (typeof item !== "string") {
        this.#inbox.shift();
        this.#finish(item.close);
        continue;
      }
      if (this.#closedLocally) return;
      this.#inbox.shift();
      try {
        this.#receiver(item);
      } catch (error) {
        this.#schedule(); // the rest still arrives; the receiver's bug surfaces to its caller
        throw error;
      }
    }
  }

  #finish(info: CloseInfo): void {
    if (this.#closeInfo) return;
    this.#closeInfo = info;
    this.#resolveClosed(info);
  }
}

/**
 * Creates two transports linked to each other: what one sends, the other receives.
 *
 * ```ts
 * const [executorSide, harnessSide] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
 * ```
 */
export function createLinkedTransportPair(
  options: LinkedPairOptions = {},
): [Transport, Transport] {
  const protocol = options.protocol ?? "";
  const a = new MemoryTransport(protocol);
  const b = new MemoryTransport(protocol);
  a.other = b;
  b.other = a;
  return [a, b];
}
