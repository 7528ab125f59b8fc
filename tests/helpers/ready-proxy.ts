/**
 * A TCP proxy in front of several harnesses, as a load balancer with readiness checks: each new
 * connection goes to the first backend whose `GET /readyz` answers 200 at that moment; with none
 * ready, the connection is closed at once (the client retries, as executors and brains do). Bytes
 * are piped as they are, WebSocket upgrades included. Listens on 127.0.0.1.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

/** A running proxy. */
export interface ReadyProxy {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** How many connections went to each backend, by its base URL. */
  readonly routed: ReadonlyMap<string, number>;
  /** Closes the listener and every piped connection. */
  close(): Promise<void>;
}

async function isReady(base: string): Promise<boolean> {
  try {
    const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(1_000) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

/** Starts a proxy over `backends` (`http://127.0.0.1:<port>` each). */
export async function startReadyProxy(backends: readonly string[]): Promise<ReadyProxy> {
  const sockets = new Set<Socket>();
  const routed = new Map<string, number>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    client.pause();
    void (async () => {
      let target: string | undefined;
      for (const backend of backends) {
        if (await isReady(backend)) {
          target = backend;
          break;
        }
      }
      if (!target || client.destroyed) {
        client.destroy();
        return;
      }
      routed.set(target, (routed.get(target) ?? 0) + 1);
      const url = new URL(target);
      const upstream = connect(Number(url.port), url.hostname);
      sockets.add(upstream);
      upstream.on("close", () => {
        sockets.delete(upstream);
        client.destroy();
      });
      upstream.on("error", () => upstream.destroy());
      client.on("close", () => upstream.destroy());
      upstream.on("connect", () => {
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    routed,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
