/**
 * What the PostgreSQL store tests share: `openPostgresStore` from this runtime's entry point, a
 * fresh table name per store, and a client that fails its nth statement on purpose.
 */
import type {
  HarnessStore,
  OpenPostgresStoreOptions,
  PostgresClientLike,
  PostgresHarnessStore,
  PostgresQueryable,
} from "../../node.ts";
import { RUNTIME } from "./sqlite-fixture.ts";

export { RUNTIME };

/** `openPostgresStore` of this runtime's entry point. */
export async function openPostgresStore(
  target: string | PostgresClientLike,
  options: OpenPostgresStoreOptions = {},
): Promise<PostgresHarnessStore> {
  const entry = await import(`../../${RUNTIME}.ts`);
  return await entry.openPostgresStore(target, options);
}

let tables = 0;

/** A table name no other store of this process has used (several harnesses, one database). */
export function freshTable(label = "t"): string {
  return `${label}_${RUNTIME}_${process.pid}_${++tables}`;
}

/** A `postgres` client of `url` (the test's own, to look at the table behind the store). */
export async function rawClient(
  url: string,
): Promise<PostgresClientLike & { end(): Promise<void> }> {
  const specifier = "postgres";
  const { default: postgres } = await import(specifier);
  return postgres(url, { max: 2, onnotice: () => {} });
}

/**
 * A client over `inner` whose `nth` statement inside a transaction (counted from the first write)
 * throws; a transaction of fewer statements throws before its commit instead: a database failing
 * in the middle of a batch.
 */
export function failingClient(inner: PostgresClientLike, nth: number): PostgresClientLike {
  let statements = 0;
  const fail = () => new Error(`simulated failure at statement ${nth}`);
  return {
    unsafe: (query, params, options) => inner.unsafe(query, params, options),
    begin: (body) =>
      inner.begin(async (tx) => {
        const wrapped: PostgresQueryable = {
          unsafe(query, params, options) {
            if (/^(INSERT|DELETE)/.test(query) && ++statements === nth) throw fail();
            return tx.unsafe(query, params, options);
          },
        };
        const result = await body(wrapped);
        if (statements > 0 && statements < nth) {
          statements = nth;
          throw fail();
        }
        return result;
      }),
  };
}

/** Closes a store, ignoring one that is closed. */
export async function closeQuietly(store: HarnessStore | undefined): Promise<void> {
  await store?.close?.();
}
