/**
 * The WebSocket dialers a test of this runtime can run: the runtime's own (`transport/<runtime>.ts`),
 * `ws` (which `wss://` and named pipes use on Node and Deno), and the runtime's global `WebSocket`
 * where it has one (Bun's `wss://` dialer).
 */
import type { Dialer } from "../../transport/transport.ts";
import { dialWithWs } from "../../transport/node.ts";
import { dialNativeWebSocket } from "../../transport/websocket.ts";
import { RUNTIME } from "./runtime-command.ts";

/** This runtime's own dialer. */
export const { dialWebSocket }: { dialWebSocket: Dialer } = RUNTIME === "bun"
  ? await import("../../transport/bun.ts")
  : RUNTIME === "deno"
  ? await import("../../transport/deno.ts")
  : await import("../../transport/node.ts");

/** The runtime's own dialer and `ws`, named. */
export const OWN_AND_WS: readonly [string, Dialer][] = [
  [`${RUNTIME}'s own dialer`, dialWebSocket],
  ["ws", dialWithWs],
];

/** Every dialer this runtime has, named: its own, `ws`, and its global `WebSocket` if any. */
export const EVERY_DIALER: readonly [string, Dialer][] = [
  ...OWN_AND_WS,
  ...(typeof globalThis.WebSocket === "function"
    ? [[`${RUNTIME}'s global WebSocket`, dialNativeWebSocket] as [string, Dialer]]
    : []),
];
