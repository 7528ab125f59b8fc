/**
 * The Worker of the Durable Object store tests, bundled by durable-object.test.ts and run in
 * workerd: two Durable Object classes (one SQLite-backed, one of the key–value kind) that run a
 * conformance case inside the object on request, over their own `ctx.storage`, and a few
 * routes to write, read and evict.
 *
 *   GET  /case?class=sql|kv&object=<name>&case=<case name>  → { ok } or { ok: false, error }
 *   POST /write?class=..&object=..   (body: a batch)         → {}
 *   GET  /list?class=..&object=..                            → { entries, instance }
 *   GET  /instance?class=..&object=..                        → { instance }
 *   POST /abort?class=..&object=..                           → the object is reset (evicted)
 *   POST /evict?class=..&object=..                           → workerd evicts the object
 */
import {
  durableObjectSqlDriver,
  type DurableObjectStoreStorage,
  openDurableObjectStore,
  SqlHarnessStore,
  type StoreOp,
} from "../../workers.ts";
import { failAtStatement, storeCases, type StoreSubject } from "./store-conformance.ts";
import { evictNow } from "../helpers/workerd-eviction.ts";

interface State {
  storage: DurableObjectStoreStorage;
  abort(reason?: string): void;
}

class StoreObject {
  readonly #state: State;
  readonly #api: "sql" | "kv";
  // A new one each time the runtime constructs the object (after an eviction).
  readonly #instance = crypto.randomUUID();

  constructor(state: State, api: "sql" | "kv") {
    this.#state = state;
    this.#api = api;
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const storage = this.#state.storage;
    const open = () => openDurableObjectStore(storage);
    switch (url.pathname) {
      case "/case": {
        const found = storeCases.find((c) => c.name === url.searchParams.get("case"));
        if (!found) return Response.json({ ok: false, error: "no such case" }, { status: 404 });
        const sql = this.#api === "sql";
        const subject: StoreSubject = {
          open: () => Promise.resolve(open()),
          persistent: true,
          serializes: true,
          synchronous: sql,
          // SQLite-backed objects take rows of up to 2 MB; key–value values up to 128 KiB.
          largeValueBytes: sql ? 1024 * 1024 : 120 * 1024,
          ...(sql
            ? {
              openFailing: (nth: number) =>
                Promise.resolve(
                  new SqlHarnessStore(failAtStatement(durableObjectSqlDriver(storage), nth)),
                ),
            }
            : {}),
        };
        try {
          await found.run(subject);
          return Response.json({ ok: true });
        } catch (error) {
          return Response.json({ ok: false, error: String((error as Error).stack ?? error) });
        }
      }
      case "/write":
        await open().write(await request.json() as StoreOp[]);
        return Response.json({});
      case "/list":
        return Response.json({ entries: await open().list(""), instance: this.#instance });
      case "/instance":
        return Response.json({ instance: this.#instance, api: this.#api });
      case "/abort":
        this.#state.abort("evicted by the test");
        return Response.json({});
    }
    return new Response("not found", { status: 404 });
  }
}

/** SQLite-backed (`useSQLite` in the test's Miniflare options). */
export class SqlStoreObject extends StoreObject {
  constructor(state: State) {
    super(state, "sql");
  }
}

/** Of the key–value kind. */
export class KvStoreObject extends StoreObject {
  constructor(state: State) {
    super(state, "kv");
  }
}

interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

export default {
  fetch(request: Request, env: { SQL: Namespace; KV: Namespace }): Promise<Response> {
    const url = new URL(request.url);
    const ns = url.searchParams.get("class") === "kv" ? env.KV : env.SQL;
    const stub = ns.get(ns.idFromName(url.searchParams.get("object") ?? "default"));
    if (url.pathname === "/evict") return evictNow(stub).then(() => Response.json({}));
    return stub.fetch(request);
  },
};
