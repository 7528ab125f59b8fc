/**
 * The Durable Object store inside real workerd (Miniflare): the conformance suite runs inside
 * a SQLite-backed object (`ctx.storage.sql`) and inside a key–value object, each case on a
 * fresh object; what an object wrote survives its eviction, provoked both ways: `ctx.abort()`,
 * and workerd's own idle eviction, started at once (`evictNow` in
 * tests/helpers/workerd-eviction.ts; the instance id shows it happened).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { fileURLToPath } from "node:url";
import { storeCases } from "./store-conformance.ts";

const WORKER = fileURLToPath(new URL("./durable-object-worker.ts", import.meta.url));

let mf: Miniflare;
let base: string;

before(async () => {
  const bundle = await build({
    entryPoints: [WORKER],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    external: ["node:*"],
    logLevel: "silent",
  });
  mf = new Miniflare({
    // The module given, not found by Miniflare: its dynamic import of workerd:unsafe
    // (`evictNow`) is resolved by workerd.
    modules: [{
      type: "ESModule",
      path: WORKER.replace(/\.ts$/, ".mjs"),
      contents: bundle.outputFiles[0].text,
    }],
    compatibilityDate: "2025-09-01",
    compatibilityFlags: ["nodejs_compat", "unsafe_module"],
    durableObjects: {
      SQL: { className: "SqlStoreObject", useSQLite: true },
      KV: { className: "KvStoreObject" },
    },
    host: "127.0.0.1",
    port: 0,
  });
  base = (await mf.ready).href.replace(/\/$/, "");
});
after(() => mf?.dispose());

async function call(
  method: "GET" | "POST",
  path: string,
  query: Record<string, string>,
  body?: unknown,
): Promise<any> {
  const response = await fetch(`${base}${path}?${new URLSearchParams(query)}`, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text);
}

let objects = 0;

for (const kind of ["sql", "kv"] as const) {
  describe(`store conformance: Durable Object in workerd (${kind})`, { timeout: 120_000 }, () => {
    it("is the storage kind it says", async () => {
      const answer = await call("GET", "/instance", { class: kind, object: "kind" });
      assert.equal(answer.api, kind);
    });
    for (const c of storeCases) {
      it(c.name, async () => {
        const answer = await call("GET", "/case", {
          class: kind,
          object: `case-${++objects}`,
          case: c.name,
        });
        assert.ok(answer.ok, answer.error);
      });
    }
  });
}

describe("Durable Object store: eviction", { timeout: 120_000 }, () => {
  const batch = [
    { put: "e:ses_1:0000000001", value: { index: 1, event: { type: "text" } } },
    { put: "er:ses_1:number:7", value: 1 },
    { put: "s:ses_1:acked", value: 1 },
  ];
  const expected = batch.map((op) => [op.put, op.value]);

  for (const kind of ["sql", "kv"] as const) {
    it(`keeps what it wrote when the object is reset by ctx.abort() (${kind})`, async () => {
      const query = { class: kind, object: `abort-${kind}` };
      await call("POST", "/write", query, batch);
      const first = (await call("GET", "/instance", query)).instance;
      await fetch(`${base}/abort?${new URLSearchParams(query)}`, { method: "POST" }).then((r) =>
        r.body?.cancel()
      );
      const read = await call("GET", "/list", query);
      assert.notEqual(read.instance, first, "the object was not reset");
      assert.deepEqual(read.entries, expected);
    });
  }

  for (const kind of ["sql", "kv"] as const) {
    it(`keeps what it wrote when workerd evicts the object (${kind})`, async () => {
      const query = { class: kind, object: `evicted-${kind}` };
      await call("POST", "/write", query, batch);
      const first = (await call("GET", "/instance", query)).instance;
      await call("POST", "/evict", query);
      const read = await call("GET", "/list", query);
      assert.notEqual(read.instance, first, "the object was not evicted");
      assert.deepEqual(read.entries, expected);
    });
  }
});
