/**
 * The few Cloudflare Workers APIs the edge harness uses, typed locally so that `tsc` and
 * `deno check` compile without `@cloudflare/workers-types`. Each interface lists only the
 * members this code calls; the real runtime objects have more.
 */

/** A WebSocket as the Workers runtime hands it out (`WebSocketPair`, hibernation API). */
export interface WorkersWebSocket {
  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** Keeps a small structured-clonable value with the socket across hibernation (≤ 2 KiB). */
  serializeAttachment(value: unknown): void;
  /** The value last given to `serializeAttachment`, or `null`. */
  deserializeAttachment(): unknown;
}

/** The key-value storage of a Durable Object. */
export interface DurableObjectStorageLike {
  get<T = unknown>(key: string): Promise<T | undefined>;
  get<T = unknown>(keys: string[]): Promise<Map<string, T>>;
  put(key: string, value: unknown): Promise<void>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(key: string): Promise<boolean>;
  delete(keys: string[]): Promise<number>;
  list<T = unknown>(
    options?: { prefix?: string; start?: string; end?: string; limit?: number },
  ): Promise<Map<string, T>>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number | Date): Promise<void>;
  deleteAlarm(): Promise<void>;
}

/** The state object a Durable Object's constructor receives (`ctx`). */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike;
  /** Hands the socket to the runtime: the object may be evicted while the socket stays open. */
  acceptWebSocket(socket: WorkersWebSocket, tags?: string[]): void;
  /** The accepted sockets, optionally only those with `tag`. */
  getWebSockets(tag?: string): WorkersWebSocket[];
}

/** A Durable Object id. */
export interface DurableObjectIdLike {
  toString(): string;
}

/** A stub through which the Worker talks to one object. */
export interface DurableObjectStubLike {
  fetch(request: Request): Promise<Response>;
}

/** A Durable Object namespace binding. */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): DurableObjectIdLike;
  get(id: DurableObjectIdLike): DurableObjectStubLike;
}

/** The `ctx` of a Worker's fetch handler. */
export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
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
