/**
 * A {@linkcode Transport} its owner feeds: frames are handed to `deliver` one at a time, the
 * end to `end`, and what the peer sends goes to the owner's `send`. For sockets whose frames
 * arrive through a callback of the runtime rather than an event listener — a Durable Object's
 * hibernatable WebSocket (`webSocketMessage`, `webSocketClose`), where the object that listens
 * may be a new one after an eviction while the socket lives on.
 */
import {
  assertSendableCloseCode,
  clampCloseReason,
  type CloseInfo,
  type Transport,
  TransportClosedError,
  type TransportReceiver,
} from "./transport.ts";

/** Where a {@linkcode FedTransport} sends. */
export interface FedTransportSink {
  /** The negotiated subprotocol. */
  readonly protocol: string;
  /** Sends one text frame on the socket. */
  send(frame: string): void;
  /** Closes the socket with a code and reason. */
  close(code: number, reason: string): void;
}

/** A transport fed by its owner. */
export interface FedTransport extends Transport {
  /** One frame that arrived on the socket. */
  deliver(frame: string): void;
  /** The socket ended (the peer closed it, or it broke). */
  end(code: number, reason: string): void;
}

/** A transport over `sink`, fed with {@linkcode FedTransport.deliver}. */
export function fedTransport(sink: FedTransportSink): FedTransport {
  let receiver: TransportReceiver | undefined;
  let buffer: string[] | undefined = [];
  let info: CloseInfo | undefined;
  let resolveClosed!: (info: CloseInfo) => void;
  const closed = new Promise<CloseInfo>((resolve) => (resolveClosed = resolve));
  const finish = (code: number, reason: string) => {
    if (info) return;
    info = { code, reason };
    buffer = undefined;
    resolveClosed(info);
  };
  return {
    protocol: sink.protocol,
    closed,
    send(frame) {
      if (info) throw new TransportClosedError(info.code, info.reason);
      sink.send(frame);
    },
    listen(next) {
      if (receiver) throw new Error("listen may be called once");
      receiver = next;
      const waiting = buffer;
      buffer = undefined;
      for (const frame of waiting ?? []) next(frame);
    },
    close(code = 1000, reason = "") {
      assertSendableCloseCode(code);
      if (info) return;
      const clamped = clampCloseReason(reason);
      finish(code, clamped);
      sink.close(code, clamped);
    },
    deliver(frame) {
      if (info) return;
      if (receiver) receiver(frame);
      else buffer!.push(frame);
    },
    end(code, reason) {
      finish(code, reason);
    },
  };
}
