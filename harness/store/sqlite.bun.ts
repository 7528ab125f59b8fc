/**
 * The SQLite file store on Bun: `openSqliteStore(path)` over Bun's built-in `bun:sqlite`
 * (nothing to install; it also works in a `bun build --compile` binary), or over `libsql`
 * (`{ driver: "libsql" }`).
 *
 * @module
 */
import {
  type PreparingDatabaseLike,
  preparingDriver,
  type SqlDriver,
  type SqlHarnessStore,
  SqliteDriverUnavailableError,
  type SqliteStoreOptions,
} from "./sql.ts";
import { openLibsqlDriver, openSqliteFile } from "./sqlite.node.ts";

/** The SQLite drivers on Bun. */
export type BunSqliteDriver = "bun:sqlite" | "libsql";

/** Options of {@linkcode openSqliteStore} on Bun. */
export interface BunSqliteStoreOptions extends SqliteStoreOptions {
  /** Default `"bun:sqlite"` (built in). */
  readonly driver?: BunSqliteDriver;
}

// In a variable: other runtimes' checkers and bundlers leave Bun's built-in alone.
const BUN_SQLITE = "bun:sqlite";

/** Opens `path` with Bun's built-in `bun:sqlite`. */
export async function openBunSqliteDriver(path: string): Promise<SqlDriver> {
  let Database: new (path: string, options: { strict: boolean }) => PreparingDatabaseLike;
  try {
    ({ Database } = await import(BUN_SQLITE));
  } catch (error) {
    throw new SqliteDriverUnavailableError("bun:sqlite", "it is built into Bun only", {
      cause: error,
    });
  }
  // strict: `?` parameters bind positionally and a missing one is an error.
  return preparingDriver(new Database(path, { strict: true }));
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
  const driver = options.driver ?? "bun:sqlite";
  if (driver !== "libsql" && driver !== "bun:sqlite") {
    return Promise.reject(new SqliteDriverUnavailableError(String(driver), "unknown driver"));
  }
  return openSqliteFile(
    driver === "libsql" ? openLibsqlDriver : openBunSqliteDriver,
    path,
    options,
  );
}
