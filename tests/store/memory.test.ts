/**
 * The memory store: the conformance suite with shared values (the default) and with JSON
 * copies, and what sharing means.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidStoreRequestError, MemoryHarnessStore } from "../../mod.ts";
import { runConformance } from "./run-conformance.ts";

for (const values of ["shared", "json"] as const) {
  runConformance(`memory (values: ${values})`, () =>
    Promise.resolve({
      subject: {
        open: () => Promise.resolve(new MemoryHarnessStore({ values })),
        persistent: false,
        serializes: values === "json",
        synchronous: true,
        largeValueBytes: 4 * 1024 * 1024,
      },
      dispose: () => {},
    }));
}

describe("memory store values", () => {
  it("keeps and returns the very object given by default (no copy)", () => {
    const store = new MemoryHarnessStore();
    const record = { index: 1, event: { type: "text" } };
    store.write([{ put: "e:1", value: record }]);
    assert.equal(store.get("e:1"), record);
    assert.equal(store.list("e:")[0][1], record);
    assert.equal(store.size, 1);
  });

  it("with values: json, shares no object with its callers and refuses what JSON cannot keep", () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const record = { index: 1, list: [1] };
    store.write([{ put: "e:1", value: record }]);
    record.list.push(2);
    const read = store.get<typeof record>("e:1")!;
    assert.deepEqual(read, { index: 1, list: [1] });
    read.list.push(3);
    assert.deepEqual(store.get("e:1"), { index: 1, list: [1] });
    assert.throws(
      () => store.write([{ put: "n", value: 1n }]),
      (e: unknown) => e instanceof InvalidStoreRequestError && e.reason === "value",
    );
  });

  it("keeps order and counts across chunk splits and range deletes", () => {
    const store = new MemoryHarnessStore();
    // Descending inserts land at the front of the first chunk every time.
    for (let i = 5000; i > 0; i--) {
      store.write([{ put: `k:${String(i).padStart(5, "0")}`, value: i }]);
    }
    assert.equal(store.size, 5000);
    const listed = store.list<number>("k:").map(([, v]) => v);
    assert.deepEqual(listed, Array.from({ length: 5000 }, (_, i) => i + 1));
    store.write([{ deletePrefix: "k:01" }, { deletePrefix: "k:03" }]);
    assert.equal(store.size, 3000);
    assert.deepEqual(store.list("k:", { after: "k:00999", limit: 2 }).map(([k]) => k), [
      "k:02000",
      "k:02001",
    ]);
    assert.deepEqual(
      store.list("k:", { before: "k:04000", reverse: true, limit: 1 }).map(([k]) => k),
      [
        "k:02999",
      ],
    );
  });
});
