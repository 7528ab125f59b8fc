/** Transports: the interface every runtime adapter implements, and the in-memory pair. */
export {
  ABNORMAL_CLOSURE,
  assertSendableCloseCode,
  clampCloseReason,
  type CloseInfo,
  type Transport,
  TransportClosedError,
  type TransportReceiver,
} from "./transport.ts";
export { createLinkedTransportPair, type LinkedPairOptions } from "./memory.ts";
