/**
 * The handshake deadline of a `node:http` server's connections: a connection whose first request
 * (its headers, or its WebSocket upgrade) is not complete `ms` after it was accepted is destroyed;
 * bytes trickling in do not extend it. Shared by the harness's server and the inspector's.
 */
import type { Duplex } from "node:stream";

/**
 * The timers of the handshake deadlines, by socket: a map rather than a property, so the server's
 * sockets keep the shape of every other socket (a property added after construction would give
 * them a hidden class of their own, and the stream code every frame runs through two).
 */
const handshakes = new WeakMap<Duplex, ReturnType<typeof setTimeout>>();

/** Starts `socket`'s deadline (on the server's `connection` event). */
export function awaitHandshake(socket: Duplex, ms: number): void {
  const timer = setTimeout(handshakeExpired, ms, socket);
  (timer as { unref?: () => void }).unref?.();
  handshakes.set(socket, timer);
}

function handshakeExpired(socket: Duplex): void {
  if (!handshakes.delete(socket)) return;
  socket.destroy();
}

/** Ends `socket`'s deadline: its first request is complete. */
export function handshakeDone(socket: Duplex): void {
  const timer = handshakes.get(socket);
  if (timer === undefined) return;
  handshakes.delete(socket);
  clearTimeout(timer);
}
