/**
 * The PostgreSQL client `openPostgresStore` makes from a URL tries the database again 50 ms
 * doubling to 1 s apart while it does not answer, as the store's own retries do: with the
 * client's default (up to 10–20 s after seven failed attempts), a database back after an
 * outage of some seconds was not tried again for that long, and the store refused every write
 * meanwhile although the database answered. The client is a stand-in whose every query fails as
 * a refused connection does (no server is needed to see the options it is made with); the
 * options a caller gives still win.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { openPostgresStore } from "../../node.ts";

type Options = Record<string, unknown>;

/** Opens a store over a stand-in client that refuses every query; returns its options. */
async function clientOptionsOf(clientOptions?: Options): Promise<Options> {
  let made: Options | undefined;
  const refused = () =>
    Promise.reject(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
  const factory = (_url: string, options: Options) => {
    made = options;
    return { unsafe: refused, begin: refused, end: () => Promise.resolve() };
  };
  await assert.rejects(
    openPostgresStore("postgres://harness@127.0.0.1:1/harness", {
      retryMs: 0,
      load: () => Promise.resolve({ default: factory }),
      ...(clientOptions ? { clientOptions } : {}),
    }),
  );
  assert.ok(made, "the client was made");
  return made;
}

describe("openPostgresStore: the client's reconnect backoff", () => {
  it("tries again 50 ms doubling to 1 s apart, however long the database is away", async () => {
    const options = await clientOptionsOf();
    assert.equal(typeof options.backoff, "function");
    const backoff = options.backoff as (attempt: number) => number;
    const delays = Array.from({ length: 30 }, (_, i) => backoff(i + 1));
    assert.deepEqual(delays.slice(0, 6), [0.05, 0.1, 0.2, 0.4, 0.8, 1]);
    assert.ok(delays.every((seconds) => seconds <= 1), JSON.stringify(delays));
  });

  it("leaves the caller's backoff as given", async () => {
    const mine = () => 5;
    const options = await clientOptionsOf({ backoff: mine });
    assert.equal(options.backoff, mine);
  });
});
