/**
 * What the SDK's two ends take from the platform they run on, as one value per runtime: a
 * {@linkcode Runtime} record, built once in `runtime/<platform>.ts` (`nodeRuntime`,
 * `denoRuntime`, `bunRuntime`, `workersRuntime`) and handed to the portable classes by the
 * runtime entry points, which `scripts/gen-faces.ts` writes from the portable faces' lists and
 * the table of runtimes (`runtime/runtimes.ts`). Adding a runtime means writing its record and
 * adding it to that table.
 *
 * This module is portable (types and plain functions): the records import the platform. The
 * dependency runs one way: `runtime/` imports the ends (their faces' types here, their
 * runtime pieces in the records), and of the ends only the runtime entry points written into
 * their folders (`executor/<runtime>.ts`, `harness/<runtime>.ts`) import `runtime/`
 * (`npm run check` holds the rest to it).
 *
 * @module
 */
import type { ExecutorClientOptions, SocketFetch } from "../executor/mod.ts";
import type { PtyHost } from "../executor/machine/pty.ts";
import type {
  HarnessOptions,
  HolderIdentity,
  SqlHarnessStore,
  SqliteStoreOptions,
} from "../harness/mod.ts";
import type { Dialer, WebSocketServe } from "../transport/mod.ts";

/** One platform's pieces, as the two ends and the machine use them. */
export interface Runtime {
  /** Its name, as in the paths of its entry points (`node`, `deno`, `bun`, `workers`). */
  readonly name: string;
  /** Opens WebSocket connections: the executor's to its harness, the harness's `dial`. */
  readonly dial: Dialer;
  /** Serves the executor's `listen` and, unless `serveHarness` is set, the harness's `serve`. */
  readonly serve?: WebSocketServe;
  /** Serves the harness's `serve` / `serveUnix` where another server carries it better. */
  readonly serveHarness?: WebSocketServe;
  /** Sends HTTP over a Unix socket: the uploads of an executor that dialed `unix://`. */
  readonly socketFetch?: SocketFetch;
  /** The PTYs of `serveMachine`'s terminals (absent: the runtime serves no machine). */
  readonly pty?: PtyHost;
  /** This process as the holder of a harness store (its host, pid and liveness probe). */
  readonly holderIdentity?: () => HolderIdentity;
  /** Opens (or creates) a SQLite file as a harness store with the runtime's own driver. */
  readonly openSqliteStore?: (
    path: string,
    options?: SqliteStoreOptions,
  ) => Promise<SqlHarnessStore>;
}

/** `options` of an `ExecutorClient`, with `runtime`'s dialer, server and socket fetch unless set. */
export function executorOptions(
  runtime: Runtime,
  options: ExecutorClientOptions,
): ExecutorClientOptions {
  const { dial, serve: server, socketFetch } = runtime;
  return { dial, server, socketFetch, ...options };
}

/** `options` of a `Harness`, with `runtime`'s server, dialer and holder identity unless set. */
export function harnessOptions(runtime: Runtime, options: HarnessOptions): HarnessOptions {
  const { dial, serve, serveHarness = serve } = runtime;
  return { server: serveHarness, dial, holderIdentity: runtime.holderIdentity?.(), ...options };
}
