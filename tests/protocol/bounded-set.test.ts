import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { BoundedSet, RecentIds, RecentMap } from "../../protocol/bounded-set.ts";

describe("BoundedSet", () => {
  it("holds at most limit members, evicting the oldest and naming it", () => {
    const set = new BoundedSet<string>(3);
    assert.equal(set.add("a"), undefined);
    set.add("b");
    set.add("c");
    assert.equal(set.add("a"), undefined, "a member added again stays where it is");
    assert.equal(set.add("d"), "a", "the oldest goes first");
    assert.equal(set.size, 3);
    assert.ok(!set.has("a") && set.has("b") && set.has("d"), "b, c, d remain");
  });
});

describe("RecentIds", () => {
  it("remembers at least the limit most recent ids, and at most twice as many", () => {
    const ids = new RecentIds<number>(100);
    for (let i = 0; i < 1_000; i++) {
      ids.add(i);
      for (let back = 0; back < Math.min(100, i + 1); back++) {
        if (!ids.has(i - back)) assert.fail(`id ${i - back} forgotten after adding ${i}`);
      }
    }
    let held = 0;
    for (let i = 0; i < 1_000; i++) if (ids.has(i)) held++;
    assert.ok(held >= 100 && held <= 200, `held ${held}`);
    assert.ok(!ids.has(0), "the oldest are forgotten");
  });

  it("answers string ids exactly through its filters, as they grow and turn over", () => {
    const ids = new RecentIds<string>(5_000);
    const id = (i: number) => `call_${(i * 2654435761 >>> 0).toString(16)}_${i}`;
    for (let i = 0; i < 12_000; i++) {
      ids.add(id(i));
      if (!ids.has(id(i))) assert.fail(`${id(i)} not remembered right after it was added`);
      if (i % 97 === 0 && ids.has(id(i + 1))) {
        assert.fail(`${id(i + 1)} remembered before it was added`);
      }
    }
    for (let i = 12_000 - 5_000; i < 12_000; i++) {
      if (!ids.has(id(i))) assert.fail(`${id(i)} forgotten among the 5,000 most recent`);
    }
    let held = 0;
    for (let i = 0; i < 12_000; i++) if (ids.has(id(i))) held++;
    assert.ok(held >= 5_000 && held <= 10_000, `held ${held}`);
    for (let i = 12_000; i < 13_000; i++) {
      if (ids.has(id(i))) assert.fail(`${id(i)} was never added`);
    }
    assert.equal(ids.delete(id(11_999)), true);
    assert.equal(ids.has(id(11_999)), false, "a deleted id is forgotten despite its filter bits");
  });

  it("forgets a deleted id, and an id added twice is one member", () => {
    const ids = new RecentIds<string>(2);
    ids.add("x");
    ids.add("x");
    ids.add("y");
    ids.add("z"); // turns the generation over: x and y are old, still remembered
    assert.ok(ids.has("x") && ids.has("y") && ids.has("z"), "old generation still answers");
    assert.equal(ids.delete("y"), true);
    assert.equal(ids.has("y"), false);
    assert.equal(ids.delete("y"), false);
  });
});

describe("RecentMap", () => {
  it("keeps the values of at least the limit most recent keys across a turnover", () => {
    const map = new RecentMap<string, number>(2);
    map.set("a", 1);
    map.set("b", 2);
    map.set("c", 3); // a and b become the old generation
    assert.deepEqual([map.get("a"), map.get("b"), map.get("c")], [1, 2, 3]);
    map.set("d", 4);
    map.set("e", 5); // the old generation (a, b) is dropped
    assert.equal(map.get("a"), undefined);
    assert.deepEqual([map.get("c"), map.get("d"), map.get("e")], [3, 4, 5]);
  });
});
