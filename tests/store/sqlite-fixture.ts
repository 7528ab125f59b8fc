/**
 * What the SQLite store tests share: the runtime this process runs on, the drivers it ships
 * for that runtime, `openSqliteStore` from that runtime's entry point, and a raw connection of
 * each driver (to build a store over a driver that fails on purpose).
 */
import type { PreparingDatabaseLike, SqlHarnessStore, SqliteStoreOptions } from "../../mod.ts";

/** The runtime of this process. */
export const RUNTIME: "node" | "deno" | "bun" = "Deno" in globalThis
  ? "deno"
  : "Bun" in globalThis
  ? "bun"
  : "node";

/** The SQLite drivers shipped for each runtime, the default first. */
export const DRIVERS = {
  node: ["libsql"],
  deno: ["node:sqlite", "libsql"],
  bun: ["bun:sqlite", "libsql"],
}[RUNTIME];

/** `openSqliteStore` of this runtime's entry point. */
export async function openSqliteStore(
  path: string,
  options: SqliteStoreOptions & { driver?: string } = {},
): Promise<SqlHarnessStore> {
  const entry = await import(`../../${RUNTIME}.ts`);
  return await entry.openSqliteStore(path, options);
}

// Variables, so that no checker resolves another runtime's built-in.
const SPECIFIERS: Record<string, string> = {
  libsql: "libsql",
  "node:sqlite": "node:sqlite",
  "bun:sqlite": "bun:sqlite",
};

/** A raw connection to `path` with `driver` (not through the SDK). */
export async function rawDatabase(driver: string, path: string): Promise<PreparingDatabaseLike> {
  const mod: any = await import(SPECIFIERS[driver]);
  if (driver === "libsql") return new (mod.default ?? mod)(path);
  if (driver === "node:sqlite") return new mod.DatabaseSync(path);
  return new mod.Database(path, { strict: true });
}
