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
  type MessageReceiver,
  type MessageTransport,
  type Transport,
  TransportClosedError,
} from "./transport.ts";

/** Options of {@linkcode createLinkedTransportPair}. */
export interface LinkedPairOptions {
  /** The subprotocol both ends report as negotiated. Default `""`. */
  protocol?: string;
  /**
   * Hand messages over as objects ({@linkcode MessageTransport}): a harness and an executor in
   * one process then skip JSON entirely. Messages are shared, not copied, so nothing may change
   * one after it was sent, and values JSON cannot carry (`undefined`, dates, class instances)
   * arrive as they were sent, not as a socket would deliver them. Default `false`: text frames,
   * exactly as over a socket.
   */
  byReference?: boolean;
}

const RESOLVED: Promise<void> = Promise.resolve();

/** The close of the sending end, queued behind the frames it sent before closing. */
class CloseItem {
  readonly info: CloseInfo;
  constructor(info: CloseInfo) {
    this.info = info;
  }
}

type InboxItem = string | object;

class MemoryTransport implements Transport {
  readonly protocol: string;
  readonly closed: Promise<CloseInfo>;
  other: MemoryTransport | undefined;
  #receiver: MessageReceiver | undefined;
  /** Whether the receiver takes message objects (else objects are delivered as JSON text). */
  #takesObjects = false;
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
    if (typeof frame !== "string") throw new TypeError("a frame is a string");
    this.enqueueOut(frame);
  }

  listen(receiver: (frame: string) => void): void {
    this.attach(receiver as MessageReceiver, false);
  }

  close(code = 1000, reason = ""): void {
    assertSendableCloseCode(code);
    if (this.#closeInfo) return;
    const info = { code, reason: clampCloseReason(reason) };
    this.#closedLocally = true;
    this.#finish(info);
    // Frames this side already sent reach the other end before it sees the close, as on a socket.
    this.other!.#enqueue(new CloseItem(info));
  }

  protected enqueueOut(item: string | object): void {
    if (this.#closeInfo) {
      throw new TransportClosedError(this.#closeInfo.code, this.#closeInfo.reason);
    }
    this.other!.#enqueue(item);
  }

  protected attach(receiver: MessageReceiver, takesObjects: boolean): void {
    if (this.#receiver) throw new Error("listen() may be called once");
    this.#receiver = receiver;
    this.#takesObjects = takesObjects;
    this.#schedule();
  }

  #enqueue(item: InboxItem): void {
    if (this.#closeInfo) return; // arrived after this side closed: dropped, as on a socket
    this.#inbox.push(item);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // A resolved promise, not queueMicrotask: Node wraps every queueMicrotask callback in an
    // async resource, which costs more than the delivery itself.
    RESOLVED.then(() => this.#drain());
  }

  #drain(): void {
    this.#scheduled = false;
    const receiver = this.#receiver;
    if (!receiver) {
      // Nobody listens yet: the close is seen now, its frames wait for listen(): nothing is lost.
      const at = this.#inbox.findIndex((item) => item instanceof CloseItem);
      if (at >= 0) this.#finish((this.#inbox.splice(at, 1)[0] as CloseItem).info);
      return;
    }
    const inbox = this.#inbox;
    let next = 0;
    try {
      while (next < inbox.length) {
        const item = inbox[next];
        if (item instanceof CloseItem) {
          next++;
          this.#finish(item.info);
          continue;
        }
        if (this.#closedLocally) break;
        next++;
        receiver(
          typeof item === "string" || this.#takesObjects ? item : JSON.stringify(item),
        );
      }
    } catch (error) {
      inbox.splice(0, next);
      this.#schedule(); // the rest still arrives; the receiver's bug surfaces to its caller
      throw error;
    }
    // Removed in one go: shifting a message at a time moves the whole array each time.
    inbox.splice(0, next);
  }

  #finish(info: CloseInfo): void {
    if (this.#closeInfo) return;
    this.#closeInfo = info;
    this.#resolveClosed(info);
  }
}

/** The end of a pair made with `byReference`: it hands over message objects. */
class ByReferenceMemoryTransport extends MemoryTransport implements MessageTransport {
  sendMessage(message: object): void {
    this.enqueueOut(message);
  }

  listenMessages(receiver: MessageReceiver): void {
    this.attach(receiver, true);
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
  const End = options.byReference ? ByReferenceMemoryTransport : MemoryTransport;
  const a = new End(protocol);
  const b = new End(protocol);
  a.other = b;
  b.other = a;
  return [a, b];
}
