/** Transports: the interface every runtime adapter implements, the in-memory pair, the WebSocket adapter. */
export {
  ABNORMAL_CLOSURE,
  assertSendableCloseCode,
  clampCloseReason,
  type CloseInfo,
  type Dialer,
  DialError,
  type DialOptions,
  isMessageTransport,
  type MessageReceiver,
  type MessageTransport,
  type Transport,
  TransportClosedError,
  type TransportReceiver,
} from "./transport.ts";
export { createLinkedTransportPair, type LinkedPairOptions } from "./memory.ts";
export {
  type WebSocketLike,
  webSocketTransport,
  type WebSocketTransportOptions,
} from "./websocket.ts";
export {
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  isLocalSocketUrl,
  isUpgradeRequest,
  localSocketPath,
  offeredProtocols,
  type RunningServer,
  type ServeWebSocketOptions,
  type UpgradeDecision,
  type WebSocketServe,
} from "./server.ts";
