/**
 * The SQLite file store on Deno: `openSqliteStore(path)` over Deno's built-in `node:sqlite`
 * (nothing to install), or over `libsql` (`{ driver: "libsql" }`, an npm package with prebuilt
 * binaries, resolved as the bare specifier `libsql`: from package.json, or from JSR with
 * `"imports": { "libsql": "npm:libsql@0.5.29" }` in deno.json; needs `--allow-ffi`).
 *
 * @module
 */
import type { SqlHarnessStore, SqliteStoreOptions } from "./sql.ts";
import { NODE_DRIVERS, openSqliteWith } from "./sqlite.node.ts";

/** The SQLite drivers on Deno. */
export type DenoSqliteDriver = "node:sqlite" | "libsql";

/** Options of {@linkcode openSqliteStore} on Deno. */
export interface DenoSqliteStoreOptions extends SqliteStoreOptions {
  /** Default `"node:sqlite"` (built in). */
  readonly driver?: DenoSqliteDriver;
}

/**
 * Opens (or creates) the SQLite file at `path` as a harness store (every method answers
 * synchronously; `close()` it when done).
 *
 * ```ts
 * import { openSqliteStore } from "bma-executor-sdk/deno";
 * const store = await openSqliteStore("./harness.db");
 * ```
 */
export function openSqliteStore(
  path: string,
  options: DenoSqliteStoreOptions = {},
): Promise<SqlHarnessStore> {
  return openSqliteWith(NODE_DRIVERS, "node:sqlite", path, options);
}
