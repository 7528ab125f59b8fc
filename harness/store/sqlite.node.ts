/**
 * The SQLite file store on Node: `openSqliteStore(path)` over `libsql` (an optional peer
 * dependency with prebuilt binaries: `npm install libsql`), or over the built-in `node:sqlite`
 * on Node ≥ 22.5 (`{ driver: "node:sqlite" }`). The drivers of this file also serve Deno, which
 * has `node:sqlite` and runs `libsql`.
 *
 * @module
 */
import { closeSync, openSync } from "node:fs";
import {
  busyOr,
  checkSqliteFile,
  configureSqliteFile,
  type PreparingDatabaseLike,
  preparingDriver,
  type SqlDriver,
  SqlHarnessStore,
  SqliteDriverUnavailableError,
  sqliteFileSettings,
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

/** Opens a driver over the SQLite file at `path`. */
export type SqliteOpener = (path: string) => Promise<SqlDriver>;

/**
 * A driver over the database `open` makes of the driver's module, which `load` imports: a module
 * that does not load is {@linkcode SqliteDriverUnavailableError} naming `driver` and what to do
 * (`hint`), the failure as its `cause`. Each driver below is one call of it.
 */
export async function openDriver<M>(
  driver: string,
  hint: string,
  load: () => Promise<M>,
  open: (module: M) => PreparingDatabaseLike,
): Promise<SqlDriver> {
  let module: M;
  try {
    module = await load();
  } catch (error) {
    throw new SqliteDriverUnavailableError(driver, hint, { cause: error });
  }
  return preparingDriver(open(module));
}

/**
 * Opens `path` with `libsql` (the package must be installed), loaded by `load` (default: the
 * bare specifier `libsql`, resolved from node_modules).
 */
export function openLibsqlDriver(
  path: string,
  load: () => Promise<unknown> = () => import(LIBSQL),
): Promise<SqlDriver> {
  return openDriver(
    "libsql",
    "install it with `npm install libsql` (it ships prebuilt binaries)",
    load as () => Promise<{ default?: DatabaseConstructor }>,
    (mod) => new (mod.default ?? (mod as unknown as DatabaseConstructor))(path),
  );
}

/** Opens `path` with the built-in `node:sqlite` (Deno; Node ≥ 22.5). */
export function openNodeSqliteDriver(path: string): Promise<SqlDriver> {
  return openDriver(
    "node:sqlite",
    "it is built into Deno and Node ≥ 22.5; use the libsql driver elsewhere",
    // @ts-ignore: Node 20's types have no node:sqlite (Deno's and Node ≥ 22.5's do).
    () => import("node:sqlite") as Promise<{ DatabaseSync: DatabaseConstructor }>,
    ({ DatabaseSync }) => new DatabaseSync(path),
  );
}

/**
 * Opens (or creates) the SQLite file at `path` as a harness store over the driver of `drivers`
 * that `options.driver` names (`fallback` when it names none), in WAL mode with the options'
 * pragmas: each runtime's `openSqliteStore`, over the drivers that runtime has.
 */
export async function openSqliteWith<D extends string>(
  drivers: Readonly<Record<D, SqliteOpener>>,
  fallback: D,
  path: string,
  options: SqliteStoreOptions & { readonly driver?: D },
): Promise<SqlHarnessStore> {
  const name = options.driver ?? fallback;
  if (!Object.hasOwn(drivers, name)) {
    throw new SqliteDriverUnavailableError(String(name), "unknown driver");
  }
  const settings = sqliteFileSettings(options);
  createPrivately(path);
  const driver = await drivers[name](path);
  try {
    await configureSqliteFile(driver, settings);
    checkSqliteFile(driver);
    return new SqlHarnessStore(driver, options);
  } catch (error) {
    driver.close?.();
    // Never the driver's raw "database is locked": a typed store error.
    throw busyOr(error);
  }
}

/**
 * Creates a store file that does not exist yet readable by its owner only (0600): it holds tool
 * calls' inputs and outputs as they were sent, secrets in them included, and SQLite gives its
 * `-wal` and `-shm` files the database's mode. A file that exists keeps its own; one that
 * cannot be made here is left to the driver, which says why.
 */
function createPrivately(path: string): void {
  if (path === "" || path === ":memory:" || path.startsWith("file:")) return;
  try {
    closeSync(openSync(path, "wx", 0o600));
  } catch {
    // It exists (EEXIST), or the driver's own open will name what is wrong.
  }
}

/** The drivers of this file: `libsql` and the built-in `node:sqlite` (Deno's too). */
export const NODE_DRIVERS: Readonly<Record<NodeSqliteDriver, SqliteOpener>> = {
  "libsql": openLibsqlDriver,
  "node:sqlite": openNodeSqliteDriver,
};

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
  return openSqliteWith(NODE_DRIVERS, "libsql", path, options);
}
