/**
 * A TCP proxy in front of several harnesses, as a load balancer with readiness checks: each
 * backend's `GET /readyz` is probed every 100 ms, and each new connection goes to the first
 * backend that answered 200; with none ready for 3 s, the connection is closed (the client
 * retries, as executors and brains do). Bytes
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
    const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(500) });
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
  // Readiness is probed in the background, as a load balancer's health checks are: a frozen
  // backend costs its probe's timeout there, not every connection's.
  const ready = new Set<string>();
  let probing = true;
  const probe = async (backend: string) => {
    while (probing) {
      if (await isReady(backend)) ready.add(backend);
      else ready.delete(backend);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  const probes = backends.map(probe);
  const choose = async (): Promise<string | undefined> => {
    const deadline = Date.now() + 3_000;
    while (probing && Date.now() < deadline) {
      const chosen = backends.find((backend) => ready.has(backend));
      if (chosen) return chosen;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return undefined;
  };
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    client.pause();
    void (async () => {
      const target = await choose();
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
      probing = false;
      await Promise.all(probes);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
