/**
 * The few Cloudflare Workers APIs the edge harness uses, typed locally so that `tsc` and
 * `deno check` compile without `@cloudflare/workers-types`. Each interface lists only the
 * members this code calls; the real runtime objects have more.
 */
import type { DurableObjectStoreStorage } from "../store/durable-object.workers.ts";

/** A WebSocket as the Workers runtime hands it out (`WebSocketPair`, hibernation API). */
export interface WorkersWebSocket {
  /** Sends a text frame. */
  send(data: string): void;
  /** Closes the socket with a code and reason. */
  close(code?: number, reason?: string): void;
  /** Keeps a small structured-clonable value with the socket across hibernation (≤ 2 KiB). */
  serializeAttachment(value: unknown): void;
  /** The value last given to `serializeAttachment`, or `null`. */
  deserializeAttachment(): unknown;
}

/** A Durable Object's storage: the store's API and the object's one alarm. */
export interface DurableObjectStorageLike extends DurableObjectStoreStorage {
  /** Sets the object's one alarm (replacing any other). */
  setAlarm(scheduledTime: number | Date): Promise<void>;
}

/** The state object a Durable Object's constructor receives (`ctx`). */
export interface DurableObjectStateLike {
  /** The object's storage. */
  readonly storage: DurableObjectStorageLike;
  /** Hands the socket to the runtime: the object may be evicted while the socket stays open. */
  acceptWebSocket(socket: WorkersWebSocket, tags?: string[]): void;
  /** The sockets accepted so far and still open (also those of earlier incarnations). */
  getWebSockets(): WorkersWebSocket[];
}

/** A Durable Object id. */
export interface DurableObjectIdLike {
  /** The id as a string. */
  toString(): string;
}

/** A stub through which the Worker talks to one object. */
export interface DurableObjectStubLike {
  /** Sends a request to the object. */
  fetch(request: Request): Promise<Response>;
}

/** A Durable Object namespace binding. */
export interface DurableObjectNamespaceLike {
  /** The id of the object with this name. */
  idFromName(name: string): DurableObjectIdLike;
  /** The stub of the object with this id. */
  get(id: DurableObjectIdLike): DurableObjectStubLike;
}

interface WebSocketPairConstructor {
  new (): { 0: WorkersWebSocket; 1: WorkersWebSocket };
}

/** Creates a connected pair of sockets (`new WebSocketPair()`); only the Workers runtime has one. */
export function createWebSocketPair(): [client: WorkersWebSocket, server: WorkersWebSocket] {
  const Pair = (globalThis as unknown as { WebSocketPair?: WebSocketPairConstructor })
    .WebSocketPair;
  if (!Pair) {
    throw new Error("WebSocketPair is not available: this code runs on Cloudflare Workers");
  }
  const pair = new Pair();
  return [pair[0], pair[1]];
}

/** The 101 response that completes an upgrade, with the chosen subprotocol. */
export function upgradeResponse(client: WorkersWebSocket, protocol: string): Response {
  // Workers sends no subprotocol header unless the 101 carries one, and the `ws`, Bun and Node
  // clients then fail the handshake.
  const init = {
    status: 101,
    webSocket: client,
    headers: { "sec-websocket-protocol": protocol },
  };
  return new Response(null, init as ResponseInit);
}
