/**
 * A byte-level proxy between the two ends of a cell, so a scenario can break the connection the
 * way a network does, whatever runtime each end runs on: `cut()` destroys every connection
 * (both ends see 1006) and `hold()` stops forwarding (nothing arrives, nothing closes: a dead
 * link for the lease to detect) until `release()`. Listens on 127.0.0.1 or on a Unix socket
 * and forwards to a TCP port or a socket path.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { unlink } from "node:fs/promises";

/** Where a link listens or forwards to. */
export type Endpoint = { port: number } | { path: string };

/** The endpoint of a `ws://host:port` or `unix:///path` URL. */
export function endpointOf(url: string): Endpoint {
  if (url.startsWith("unix:")) return { path: url.replace(/^unix:(\/\/)?/, "") };
  return { port: Number(new URL(url).port) };
}

interface Pair {
  a: Socket;
  b: Socket;
}

/** A proxy that can cut or hold the connections through it. */
export class Link {
  readonly #server: Server;
  #target: Endpoint;
  readonly #pairs = new Set<Pair>();
  #held = false;
  #listenPath: string | undefined;
  /** Connections accepted so far. */
  accepted = 0;

  private constructor(target: Endpoint) {
    this.#target = target;
    this.#server = createServer((socket) => this.#accept(socket));
  }

  /** Starts a link to `target`, listening on `listen` (a socket path) or a free 127.0.0.1 port. */
  static async open(target: Endpoint, listen?: { path: string }): Promise<Link> {
    const link = new Link(target);
    await new Promise<void>((resolve, reject) => {
      link.#server.once("error", reject);
      if (listen) {
        link.#listenPath = listen.path;
        link.#server.listen(listen.path, () => resolve());
      } else link.#server.listen(0, "127.0.0.1", () => resolve());
    });
    return link;
  }

  /** The URL to dial through the link (`ws://127.0.0.1:port` or `unix:///path`). */
  get url(): string {
    if (this.#listenPath) return `unix://${this.#listenPath}`;
    const address = this.#server.address() as { port: number };
    return `ws://127.0.0.1:${address.port}`;
  }

  /** Forwards new connections to `target` from now on (the harness moved: it restarted). */
  retarget(target: Endpoint): void {
    this.#target = target;
  }

  /** Connections open through the link now. */
  get open(): number {
    return this.#pairs.size;
  }

  /** Destroys every connection through the link (new ones still pass). */
  cut(): void {
    for (const pair of [...this.#pairs]) {
      pair.a.destroy();
      pair.b.destroy();
    }
    this.#pairs.clear();
  }

  /** Stops forwarding on every connection, including new ones, without closing any. */
  hold(): void {
    this.#held = true;
    for (const pair of this.#pairs) {
      pair.a.pause();
      pair.b.pause();
    }
  }

  /** Forwards again; what was held flows on. */
  release(): void {
    this.#held = false;
    for (const pair of this.#pairs) {
      pair.a.resume();
      pair.b.resume();
    }
  }

  /** Stops the link and destroys its connections. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    if (this.#listenPath) await unlink(this.#listenPath).catch(() => {});
  }

  #accept(a: Socket): void {
    this.accepted++;
    const b = "path" in this.#target
      ? createConnection(this.#target.path)
      : createConnection(this.#target.port, "127.0.0.1");
    const pair = { a, b };
    this.#pairs.add(pair);
    // Forwarded by hand, not piped: a piped stream resumes itself when its destination drains,
    // which would undo hold().
    a.on("data", (chunk) => b.write(chunk));
    b.on("data", (chunk) => a.write(chunk));
    a.on("end", () => b.end());
    b.on("end", () => a.end());
    if (this.#held) {
      a.pause();
      b.pause();
    }
    const drop = () => {
      this.#pairs.delete(pair);
      a.destroy();
      b.destroy();
    };
    a.on("error", drop).on("close", drop);
    b.on("error", drop).on("close", drop);
  }
}
