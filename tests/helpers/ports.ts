/**
 * Fixed ports for tests that need one before anything listens on it: a port that refuses
 * connections, and a port a server started later (PostgreSQL) will listen on.
 *
 * Taking a port from `listen(0)` and closing it races with every other test process: the kernel
 * hands the same port to the next `listen(0)` of a parallel test, whose server then answers the
 * test's dial (an executor meant to meet a refusal met another test's HTTP server and was told
 * "not a harness"). These ports are taken outside the machine's ephemeral range, which is where
 * every `listen(0)` and every outgoing connection's port comes from, and checked before use.
 */
import { readFileSync } from "node:fs";
import { connect, createServer } from "node:net";

/** The first ports of the range these are taken from (the ephemeral range is left out). */
const LOWEST = 10_000;
const HIGHEST = 32_767;

/** The machine's ephemeral port range: Linux says it; elsewhere the IANA range (macOS, Windows). */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
      .trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return [low, high];
  } catch {
    // Not Linux.
  }
  return [49_152, 65_535];
}

/**
 * The candidate ports of one use: refused ports from the lower half of the range, listening
 * ports from the upper half, so a port one test expects to refuse is never one another starts
 * a server on.
 */
function candidates(half: "lower" | "upper"): number[] {
  const [low, high] = ephemeralRange();
  const middle = Math.floor((LOWEST + HIGHEST) / 2);
  const [from, to] = half === "lower" ? [LOWEST, middle] : [middle + 1, HIGHEST];
  const ports: number[] = [];
  for (let port = from; port <= to; port++) if (port < low || port > high) ports.push(port);
  return ports;
}

function pick(ports: number[]): number {
  return ports[Math.floor(Math.random() * ports.length)];
}

/** Whether a connection to 127.0.0.1:`port` is refused. */
function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => {
      socket.destroy();
      resolve(error.code === "ECONNREFUSED");
    });
  });
}

/** Whether a server can listen on 127.0.0.1:`port` now (it is closed again at once). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A port of `listen(0)`: where the machine leaves no room outside its ephemeral range. */
function anyPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A port of `half` that `fits`, tried at random (50 at most), else one of `listen(0)`. */
async function portWhere(
  half: "lower" | "upper",
  fits: (port: number) => Promise<boolean>,
): Promise<number> {
  const ports = candidates(half);
  for (let tries = 0; ports.length > 0 && tries < 50; tries++) {
    const port = pick(ports);
    if (await fits(port)) return port;
  }
  return await anyPort();
}

/** A port on 127.0.0.1 that refuses connections, and that no test's `listen(0)` is given. */
export function refusedPort(): Promise<number> {
  return portWhere("lower", refuses);
}

/** A port on 127.0.0.1 free to listen on, that no test's `listen(0)` is given meanwhile. */
export function listenPort(): Promise<number> {
  return portWhere("upper", bindable);
}
