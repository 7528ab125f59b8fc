/** Transports: the interface every runtime adapter implements, the in-memory pair, the WebSocket adapter. */
export {
  type CloseInfo,
  type Dialer,
  DialError,
  type DialOptions,
  type MessageReceiver,
  type MessageTransport,
  type Transport,
  TransportClosedError,
  type TransportReceiver,
} from "./transport.ts";
export { createLinkedTransportPair, type LinkedPairOptions } from "./memory.ts";
export { type FedTransport, fedTransport, type FedTransportSink } from "./fed.ts";
export {
  type WebSocketLike,
  webSocketTransport,
  type WebSocketTransportOptions,
} from "./websocket.ts";
export {
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  isUpgradeRequest,
  offeredProtocols,
  type RunningServer,
  type ServeWebSocketOptions,
  type UpgradeDecision,
  type WebSocketServe,
} from "./server.ts";
export { unsupportedDialUrl, UnsupportedUrlError } from "./dial-url.ts";
export { UnsentBudget, UnsentEntry, type UnsentHolder } from "./unsent-budget.ts";
