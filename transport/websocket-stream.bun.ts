/**
 * The byte-stream WebSocket client (`websocket-stream.ts`) over `Bun.connect`, TCP or a Unix
 * socket. Bun's own client `WebSocket` writes every frame with its own syscall and has no way to
 * batch them, so an executor's ack and result cost two writes where this client makes one.
 *
 * `wss://` is left to Bun's native client (`transport/bun.ts` chooses).
 */
import { DialError, type DialOptions, type Transport } from "./transport.ts";
import {
  type ByteSocketEvents,
  type ByteSocketTarget,
  dialByteWebSocket,
} from "./websocket-stream.ts";

/** The part of Bun's socket API used here, typed locally so other checkers compile this file. */
interface BunSocket {
  write(data: Uint8Array, byteOffset?: number, byteLength?: number): number;
  end(): void;
}
interface BunSocketHandlers {
  open(socket: BunSocket): void;
  data(socket: BunSocket, chunk: Uint8Array): void;
  drain(socket: BunSocket): void;
  close(socket: BunSocket): void;
  error(socket: BunSocket, error: unknown): void;
  connectError?(socket: BunSocket, error: unknown): void;
}
interface BunConnect {
  connect(
    options: { hostname: string; port: number; socket: BunSocketHandlers } | {
      unix: string;
      socket: BunSocketHandlers;
    },
  ): Promise<BunSocket>;
}

/** Opens a WebSocket over `Bun.connect`: `ws://host:port/path` or `unix:///path.sock`. */
export function dialBunSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  const bun = (globalThis as { Bun?: BunConnect }).Bun;
  if (!bun) return Promise.reject(new DialError("dialBunSocket needs the Bun runtime"));
  return dialByteWebSocket(url, options, (target, events) => connectBun(bun, target, events));
}

/** The turn buffer a connection keeps between turns, and the largest it keeps. */
const TURN_BUFFER_BYTES = 4096;
const TURN_BUFFER_KEPT_BYTES = 256 * 1024;

function connectBun(bun: BunConnect, target: ByteSocketTarget, events: ByteSocketEvents): void {
  let turnBuffer: Uint8Array | undefined;
  const socket: BunSocketHandlers = {
    open(raw) {
      events.open({
        // Bun writes what it can at once and keeps nothing: the next turn reuses the buffer
        // (a new one per turn shows with many calls in flight).
        write: (data, offset, length) => raw.write(data, offset, length),
        allocate: (size) => {
          if (turnBuffer && turnBuffer.length >= size) return turnBuffer;
          const buffer = new Uint8Array(Math.max(size, TURN_BUFFER_BYTES));
          if (buffer.length <= TURN_BUFFER_KEPT_BYTES) turnBuffer = buffer;
          return buffer;
        },
        end: () => raw.end(),
        // Bun's setImmediate waits for another turn of its loop, which slows many calls in
        // flight; a microtask still gathers an executor's ack and the result of a synchronous
        // handler (queued before the flush in the same drain).
        afterTurn: (fn) => queueMicrotask(fn),
      });
    },
    data(_raw, chunk) {
      events.data(chunk);
    },
    drain() {
      events.drain();
    },
    close() {
      events.close();
    },
    error(_raw, error) {
      events.error(error);
    },
    connectError(_raw, error) {
      events.error(error);
    },
  };
  const connecting = "path" in target
    ? bun.connect({ unix: target.path, socket })
    : bun.connect({ hostname: target.hostname, port: target.port, socket });
  connecting.catch((error) => events.error(error));
}
