/**
 * The SQLite file store on Node: `openSqliteStore(path)` over `libsql` (an optional peer
 * dependency with prebuilt binaries: `npm install libsql`), or over the built-in `node:sqlite`
 * on Node ≥ 22.5 (`{ driver: "node:sqlite" }`). The drivers of this file also serve Deno, which
 * has `node:sqlite` and runs `libsql`.
 *
 * @module
 */
import {
  type PreparingDatabaseLike,
  preparingDriver,
  type SqlDriver,
  SqlHarnessStore,
  SqliteDriverUnavailableError,
  sqliteFilePragmas,
  type SqliteStoreOptions,
} from "./sql.ts";

/** The SQLite drivers on Node. */
export type NodeSqliteDriver = "libsql" | "node:sqlite";

/** Options of {@linkcode openSqliteStore} on Node. */
export interface NodeSqliteStoreOptions extends SqliteStoreOptions {
  /** Default `"libsql"`; `"node:sqlite"` needs Node ≥ 22.5. */
  readonly driver?: NodeSqliteDriver;
}

// In a variable: a bundler leaves this import to the runtime, so an application that never
// opens a SQLite store needs the package neither installed nor bundled.
const LIBSQL = "libsql";

type DatabaseConstructor = new (path: string) => PreparingDatabaseLike;

/**
 * Opens `path` with `libsql` (the package must be installed), loaded by `load` (default: the
 * bare specifier `libsql`, resolved from node_modules).
 */
export async function openLibsqlDriver(
  path: string,
  load: () => Promise<unknown> = () => import(LIBSQL),
): Promise<SqlDriver> {
  let Database: DatabaseConstructor;
  try {
    const mod = await load() as { default?: DatabaseConstructor };
    Database = mod.default ?? (mod as unknown as DatabaseConstructor);
  } catch (error) {
    throw new SqliteDriverUnavailableError(
      "libsql",
      "install it with `npm install libsql` (it ships prebuilt binaries)",
      { cause: error },
    );
  }
  return preparingDriver(new Database(path));
}

/** Opens `path` with the built-in `node:sqlite` (Deno; Node ≥ 22.5). */
export async function openNodeSqliteDriver(path: string): Promise<SqlDriver> {
  let DatabaseSync: DatabaseConstructor;
  try {
    // @ts-ignore: Node 20's types have no node:sqlite (Deno's and Node ≥ 22.5's do).
    ({ DatabaseSync } = await import("node:sqlite") as { DatabaseSync: DatabaseConstructor });
  } catch (error) {
    throw new SqliteDriverUnavailableError(
      "node:sqlite",
      "it is built into Deno and Node ≥ 22.5; use the libsql driver elsewhere",
      { cause: error },
    );
  }
  return preparingDriver(new DatabaseSync(path));
}

/** Opens a driver and the store over it, in WAL mode with the options' pragmas. */
export async function openSqliteFile(
  open: (path: string) => Promise<SqlDriver>,
  path: string,
  options: SqliteStoreOptions,
): Promise<SqlHarnessStore> {
  const pragmas = sqliteFilePragmas(options);
  const driver = await open(path);
  try {
    driver.exec(pragmas);
    return new SqlHarnessStore(driver, options);
  } catch (error) {
    driver.close?.();
    throw error;
  }
}

/**
 * Opens (or creates) the SQLite file at `path` as a harness store. Every method of the store
 * answers synchronously; `close()` it when done. See {@linkcode SqliteStoreOptions} for what
 * survives a crash.
 *
 * ```ts
 * import { openSqliteStore } from "bma-executor-sdk/node";
 * const store = await openSqliteStore("./harness.db");
 * ```
 */
export function openSqliteStore(
  path: string,
  options: NodeSqliteStoreOptions = {},
): Promise<SqlHarnessStore> {
  const driver = options.driver ?? "libsql";
  if (driver !== "libsql" && driver !== "node:sqlite") {
    return Promise.reject(new SqliteDriverUnavailableError(String(driver), "unknown driver"));
  }
  return openSqliteFile(
    driver === "libsql" ? openLibsqlDriver : openNodeSqliteDriver,
    path,
    options,
  );
}
