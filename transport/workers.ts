/**
 * The WebSocket client of Cloudflare Workers: Workers open outgoing WebSockets with `fetch` and
 * an `Upgrade: websocket` header (the response carries the socket in `webSocket`), not with
 * `new WebSocket(url, { headers })`, which cannot send the executor's `authorization` header.
 * Serving is the Durable Object harness (`harness/workers/`). Workers cannot open Unix sockets.
 */
import { unsupportedDialUrl } from "./dial-url.ts";
import { DialError, type DialOptions, type Transport } from "./transport.ts";
import { type WebSocketLike, webSocketTransport } from "./websocket.ts";

/** The client end of a Workers WebSocket, as `fetch` returns it before `accept()`. */
interface WorkersClientSocket extends WebSocketLike {
  accept(): void;
}

/** Opens a WebSocket from a Worker: `ws://` and `wss://` (dialed as `http://` and `https://`). */
export async function dialWebSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  const unsupported = unsupportedDialUrl(url, { localSockets: false });
  if (unsupported) throw unsupported;
  if (options.signal?.aborted) {
    throw new DialError("dial aborted", undefined, { cause: options.signal.reason });
  }
  const headers = new Headers(options.headers);
  headers.set("upgrade", "websocket");
  if (options.protocols?.length) {
    headers.set("sec-websocket-protocol", options.protocols.join(", "));
  }
  let response: Response;
  try {
    response = await fetch(url.replace(/^ws(s?):/, "http$1:"), {
      headers,
      signal: options.signal,
    });
  } catch (error) {
    throw new DialError("cannot connect", undefined, { cause: error });
  }
  const socket = (response as Response & { webSocket?: WorkersClientSocket | null }).webSocket;
  if (response.status !== 101 || !socket) {
    await response.body?.cancel();
    throw new DialError(`upgrade refused with HTTP ${response.status}`, response.status);
  }
  socket.accept();
  return webSocketTransport(socket, {
    protocol: response.headers.get("sec-websocket-protocol") ?? socket.protocol ?? "",
    ...(options.maxFrameBytes !== undefined ? { maxFrameBytes: options.maxFrameBytes } : {}),
  });
}
