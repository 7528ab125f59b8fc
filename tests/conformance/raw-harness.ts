/**
 * A raw harness for the executor-listens cells: it dials a listening executor offering chosen
 * subprotocols and answers its `executor.register` by hand — accepting it, or refusing it with
 * -32010 and close 4003 — to check the executor's side of negotiation and refusal.
 */
import {
  type CloseInfo,
  DialError,
  dialWebSocket,
  Peer,
  ProtocolMismatchError,
  type Transport,
} from "../../node.ts";
import type { ExecutorRegisterParams } from "../../protocol/mod.ts";

/** What the raw harness saw. */
export interface RawHarnessReport {
  /** HTTP status of a refused upgrade. */
  status?: number;
  negotiated?: string;
  register?: ExecutorRegisterParams;
  close?: CloseInfo;
}

/** Dials `url` offering `offer`, answers the register as told, and reports. */
export async function rawHarness(
  url: string,
  offer: string[],
  answer: "accept" | "mismatch",
): Promise<RawHarnessReport> {
  let transport: Transport;
  try {
    transport = await dialWebSocket(url, { protocols: offer });
  } catch (error) {
    if (error instanceof DialError) return { status: error.status };
    throw error;
  }
  const report: RawHarnessReport = { negotiated: transport.protocol };
  // The executor speaks first: its register may already be buffered, and a peer is fed buffered
  // frames as it subscribes, so it subscribes only after its handler is installed.
  const peer = new Peer(later(transport), { capabilities: {} });
  const registered = new Promise<void>((resolve) => {
    peer.onRequest("executor.register", (params) => {
      report.register = params;
      resolve();
      if (answer === "mismatch") {
        // Closed once the error response is written.
        setTimeout(() => transport.close(4003, "protocol mismatch"), 20);
        throw new ProtocolMismatchError("protocol mismatch", {
          reason: "protocol_mismatch",
          expected: "bma.executor.v1",
          received: params.protocol,
        });
      }
      setTimeout(() => transport.close(1000, "raw harness done"), 20);
      return {
        executor_id: "exec_raw",
        protocol: params.protocol,
        heartbeat_interval_ms: 60_000,
      };
    });
  });
  await registered;
  report.close = await transport.closed;
  return report;
}

/** The transport with `listen` deferred to a microtask. */
function later(transport: Transport): Transport {
  return {
    get protocol() {
      return transport.protocol;
    },
    closed: transport.closed,
    send: (frame) => transport.send(frame),
    close: (code, reason) => transport.close(code, reason),
    listen: (receiver) => queueMicrotask(() => transport.listen(receiver)),
  };
}
