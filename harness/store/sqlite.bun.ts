/**
 * The SQLite file store on Bun: `openSqliteStore(path)` over Bun's built-in `bun:sqlite`
 * (nothing to install; it also works in a `bun build --compile` binary), or over `libsql`
 * (`{ driver: "libsql" }`).
 *
 * @module
 */
import type {
  PreparingDatabaseLike,
  SqlDriver,
  SqlHarnessStore,
  SqliteStoreOptions,
} from "./sql.ts";
import { openDriver, openLibsqlDriver, openSqliteWith } from "./sqlite.node.ts";

/** The SQLite drivers on Bun. */
export type BunSqliteDriver = "bun:sqlite" | "libsql";

/** Options of {@linkcode openSqliteStore} on Bun. */
export interface BunSqliteStoreOptions extends SqliteStoreOptions {
  /** Default `"bun:sqlite"` (built in). */
  readonly driver?: BunSqliteDriver;
}

// In a variable: other runtimes' checkers and bundlers leave Bun's built-in alone.
const BUN_SQLITE = "bun:sqlite";

/** `bun:sqlite`'s part used here, typed locally so other checkers compile this file. */
interface BunSqliteModule {
  Database: new (path: string, options: { strict: boolean }) => PreparingDatabaseLike;
}

/** Opens `path` with Bun's built-in `bun:sqlite`. */
export function openBunSqliteDriver(path: string): Promise<SqlDriver> {
  return openDriver(
    "bun:sqlite",
    "it is built into Bun only",
    () => import(BUN_SQLITE) as Promise<BunSqliteModule>,
    // strict: `?` parameters bind positionally and a missing one is an error.
    ({ Database }) => new Database(path, { strict: true }),
  );
}

/**
 * Opens (or creates) the SQLite file at `path` as a harness store (every method answers
 * synchronously; `close()` it when done).
 *
 * ```ts
 * import { openSqliteStore } from "bma-executor-sdk/bun";
 * const store = await openSqliteStore("./harness.db");
 * ```
 */
export function openSqliteStore(
  path: string,
  options: BunSqliteStoreOptions = {},
): Promise<SqlHarnessStore> {
  const drivers = { "bun:sqlite": openBunSqliteDriver, libsql: openLibsqlDriver };
  return openSqliteWith(drivers, "bun:sqlite", path, options);
}
