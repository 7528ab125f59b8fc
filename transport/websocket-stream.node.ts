/**
 * The byte-stream WebSocket client (`websocket-stream.ts`) over `node:net`: TCP (Nagle off) or a
 * Unix socket / Windows named pipe path. The frames of a turn leave in one write, where `ws`
 * runs each through its own sender and two stream writes.
 *
 * `wss://` is left to `ws` (`transport/node.ts` chooses).
 */
import { connect, type Socket } from "node:net";
import type { DialOptions, Transport } from "./transport.ts";
import {
  type ByteSocket,
  type ByteSocketEvents,
  type ByteSocketTarget,
  dialByteWebSocket,
} from "./websocket-stream.ts";

/** Opens a WebSocket over `node:net`: `ws://host:port/path`, `unix:///path.sock`, a pipe. */
export function dialNetSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  return dialByteWebSocket(url, options, connectNet);
}

/** A Node socket as the byte stream of `websocket-stream.ts`. */
class NetByteSocket implements ByteSocket {
  readonly #socket: Socket;
  constructor(socket: Socket) {
    this.#socket = socket;
  }
  write(data: Uint8Array, offset: number, length: number): number {
    // Node keeps what it cannot write at once; the caller never reuses `data`.
    this.#socket.write(
      offset === 0 && length === data.length ? data : data.subarray(offset, offset + length),
    );
    return length;
  }
  get bufferedAmount(): number {
    return this.#socket.writableLength;
  }
  end(): void {
    // Ends once written, without waiting for the other side's end.
    this.#socket.destroySoon();
  }
  allocate(size: number): Uint8Array {
    // From Node's buffer pool for small sizes: cheaper than a backing store per turn.
    return Buffer.allocUnsafe(size);
  }
}

function connectNet(target: ByteSocketTarget, events: ByteSocketEvents): void {
  const socket: Socket = "path" in target
    ? connect({ path: target.path })
    : connect({ host: target.hostname, port: target.port, noDelay: true });
  socket.on("data", (chunk: Buffer) => events.data(chunk));
  socket.once("connect", () => events.open(new NetByteSocket(socket)));
  socket.on("error", (error) => events.error(error));
  socket.on("close", () => events.close());
}
