/**
 * A TCP proxy on 127.0.0.1 that can cut every connection through it at once, destroying both
 * sockets without a close handshake: what a network failure looks like to both ends (1006); or
 * stop reading what the connecting side sends (`stall`), as a peer that reads nothing does, so
 * the sender's socket buffers fill and its writes back up.
 * Built on node:net, which Node, Deno and Bun all run.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";

/** A running proxy. */
export class ChaosProxy {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #cuts = 0;
  #connections = 0;
  #stalled = false;
  #host = "";
  #port = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  /** Sends the connections made from now on to `target` (a harness that took over). */
  retarget(target: string): void {
    const url = new URL(target);
    this.#host = url.hostname;
    this.#port = Number(url.port);
  }

  /** Proxies 127.0.0.1:<random port> to `target` (`ws://host:port` or `http://host:port`). */
  static async start(target: string): Promise<ChaosProxy> {
    const server = createServer();
    const proxy = new ChaosProxy(server);
    proxy.retarget(target);
    server.on("connection", (client) => {
      proxy.#connections++;
      const upstream = createConnection({ host: proxy.#host, port: proxy.#port });
      // Without this, Nagle's algorithm and delayed ACKs add ~40 ms to each small frame.
      client.setNoDelay(true);
      upstream.setNoDelay(true);
      const pair: [Socket, Socket] = [client, upstream];
      proxy.#pairs.add(pair);
      const drop = () => {
        proxy.#pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on("error", drop);
      upstream.on("error", drop);
      client.on("close", drop);
      upstream.on("close", drop);
      if (!proxy.#stalled) client.pipe(upstream);
      else client.pause();
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return proxy;
  }

  /** The proxy's port on 127.0.0.1. */
  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  /** `ws://127.0.0.1:<port>`. */
  get url(): string {
    return `ws://127.0.0.1:${this.port}`;
  }

  /** Connections currently open through the proxy. */
  get open(): number {
    return this.#pairs.size;
  }

  /** Connections accepted so far. */
  get accepted(): number {
    return this.#connections;
  }

  /** Cuts made so far (only those that hit at least one open connection). */
  get cuts(): number {
    return this.#cuts;
  }

  /** Destroys every open connection through the proxy, both sides, at once. */
  cut(): number {
    const pairs = [...this.#pairs];
    this.#pairs.clear();
    for (const [client, upstream] of pairs) {
      client.destroy();
      upstream.destroy();
    }
    if (pairs.length) this.#cuts++;
    return pairs.length;
  }

  /** Stops reading from the connecting side of every connection (and of those to come). */
  stall(): void {
    this.#stalled = true;
    for (const [client, upstream] of this.#pairs) {
      client.unpipe(upstream);
      client.pause();
    }
  }

  /** Reads from the connecting side again. */
  resume(): void {
    this.#stalled = false;
    for (const [client, upstream] of this.#pairs) client.pipe(upstream);
  }

  /** Cuts everything and stops listening. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
