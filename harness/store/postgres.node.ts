/**
 * The PostgreSQL store on Node, Deno and Bun: `openPostgresStore(url)` over `postgres`
 * (porsager's client, an optional peer dependency: `npm install postgres`; on Deno from JSR,
 * `"imports": { "postgres": "npm:postgres@4.1.0" }` in deno.json), or over a client of yours.
 *
 * @module
 */
import {
  type PostgresClientLike,
  PostgresHarnessStore,
  type PostgresStoreOptions,
  PostgresStoreUnavailableError,
} from "./postgres.ts";
import { InvalidStoreRequestError } from "./store.ts";

// In a variable: a bundler leaves this import to the runtime, so an application that never
// opens a PostgreSQL store needs the package neither installed nor bundled.
const POSTGRES = "postgres";

/** Options of {@linkcode openPostgresStore}. */
export interface OpenPostgresStoreOptions extends PostgresStoreOptions {
  /**
   * Options of the client the store opens from a URL (`postgres(url, clientOptions)`). Default:
   * at most 4 connections, notices not printed, connections tried again 50 ms doubling to 1 s
   * apart while the database does not answer.
   */
  readonly clientOptions?: Record<string, unknown>;
  /** Loads the `postgres` module (default: the bare specifier, from node_modules). */
  readonly load?: () => Promise<unknown>;
}

/**
 * How long the client waits before its next connection attempt after `attempt` failed ones, in
 * seconds: 50 ms doubling to 1 s, as the store's own retries. The client's default grows to
 * 10–20 s after seven failures, so after an outage of some seconds a database that answers
 * again was not tried for that long, and every write meanwhile was refused at once.
 */
function reconnectDelaySeconds(attempt: number): number {
  return Math.min(0.05 * 2 ** Math.max(attempt - 1, 0), 1);
}

type PostgresFactory = (url: string, options: Record<string, unknown>) => PostgresClientLike;

/**
 * Opens a harness store on the PostgreSQL database at `url` (`postgres://user:pass@host:port/db`;
 * a Unix socket with `?host=/dir`), or through `client`, a `postgres` client you made (the store
 * then leaves it open on `close()`). Creates its table when missing (`options.table`, default
 * `bma_harness_store`). Every method answers with a promise: `await harness.ready` before
 * reading sessions back.
 *
 * ```ts
 * import { Harness, openPostgresStore } from "bma-executor-sdk/node";
 * const store = await openPostgresStore("postgres://harness@db.internal/harness");
 * const harness = new Harness({ store, insecureNoAuth: true });
 * await harness.ready;
 * ```
 */
export async function openPostgresStore(
  target: string | PostgresClientLike,
  options: OpenPostgresStoreOptions = {},
): Promise<PostgresHarnessStore> {
  const { clientOptions, load, ...storeOptions } = options;
  if (typeof target !== "string") return await PostgresHarnessStore.open(target, storeOptions);
  let module: { default?: PostgresFactory };
  try {
    module = await (load ?? (() => import(POSTGRES)))() as { default?: PostgresFactory };
  } catch (error) {
    throw new PostgresStoreUnavailableError(
      "the PostgreSQL client is not available: install it with `npm install postgres`",
      { cause: error },
    );
  }
  const factory = module.default ?? (module as unknown as PostgresFactory);
  const sql = factory(target, {
    max: 4,
    onnotice: () => {},
    backoff: reconnectDelaySeconds,
    ...clientOptions,
  });
  try {
    return await PostgresHarnessStore.open(sql, storeOptions, true);
  } catch (error) {
    await Promise.resolve(sql.end?.({ timeout: 1 })).catch(() => {});
    if (
      error instanceof PostgresStoreUnavailableError || error instanceof InvalidStoreRequestError
    ) throw error;
    const code = (error as { code?: unknown })?.code;
    throw new PostgresStoreUnavailableError(
      `cannot open the PostgreSQL store: ${(error as Error)?.message ?? String(error)}` +
        (typeof code === "string" ? ` (${code})` : ""),
      { cause: error },
    );
  }
}
