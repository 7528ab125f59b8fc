/**
 * The conformance suite of a `HarnessStore`: every case runs against every implementation (the
 * memory store, the SQLite file store with each driver on Node, Deno and Bun, and the Durable
 * Object store inside workerd). It uses `node:assert` only — no test runner — so that the same
 * cases run inside a Durable Object (tests/store/durable-object-worker.ts); `run-conformance.ts`
 * registers them with `node:test` elsewhere.
 */
import assert from "node:assert/strict";
import {
  type HarnessStore,
  InvalidStoreRequestError,
  type SqlDriver,
  StoreClosedError,
  StoreConditionError,
  type StoreOp,
} from "../../mod.ts";

/** Whether a store's answer is a promise (a thenable), not a value given synchronously. */
function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** What a case knows about the store under test. */
export interface StoreSubject {
  /** Opens the store; every call opens the same data (a reopen, when the store persists). */
  open(): Promise<HarnessStore>;
  /** Whether what was written survives closing and reopening. */
  readonly persistent: boolean;
  /** Whether values are kept as JSON text (so what JSON cannot represent is refused). */
  readonly serializes: boolean;
  /** Whether every method answers synchronously (no promise). */
  readonly synchronous: boolean;
  /** How large a value (JSON text, bytes) the store must take. */
  readonly largeValueBytes: number;
  /**
   * Opens the same data through a driver whose `nth` statement (1-based, counted from the
   * first write) throws: a database failing in the middle of a batch.
   */
  openFailing?(nth: number): Promise<HarnessStore>;
}

/** One case of the suite. */
export interface StoreCase {
  readonly name: string;
  run(subject: StoreSubject): Promise<void>;
}

/** Wraps `driver` so that its `nth` `run` call throws (for {@linkcode StoreSubject.openFailing}). */
export function failAtStatement(driver: SqlDriver, nth: number): SqlDriver {
  let runs = 0;
  return {
    exec: (sql) => driver.exec(sql),
    all: (sql, params) => driver.all(sql, params),
    run(sql, params) {
      if (++runs === nth) throw new Error(`simulated failure at statement ${nth}`);
      driver.run(sql, params);
    },
    transaction: (body) => driver.transaction(body),
    close: () => driver.close?.(),
  };
}

/** Code point order, computed independently of the library (the suite's oracle). */
export function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0)!);
  const y = Array.from(b, (c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

async function keys(store: HarnessStore, prefix = "", options = {}): Promise<string[]> {
  return (await store.list(prefix, options)).map(([key]) => key);
}

async function refused(
  fn: () => unknown,
  reason: InvalidStoreRequestError["reason"],
): Promise<void> {
  await assert.rejects(
    async () => await fn(),
    (error: unknown) => error instanceof InvalidStoreRequestError && error.reason === reason,
  );
}

async function closeStore(store: HarnessStore): Promise<void> {
  await store.close?.();
}

/** A seeded generator, so a failing randomized case fails the same way again. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A copy of `items` in a seeded random order. */
function shuffle<T>(items: readonly T[], seed: number): T[] {
  const next = random(seed);
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

const UNUSUAL_KEYS = [
  "k:plain",
  "k:space and 'quote' \"double\" \\back",
  "k:%_like*glob?[x]",
  "k:\u0001\u001f\u007f control",
  "k:é composed",
  "k:e\u0301 combining",
  "k:中文",
  "k:\uD7FF last before surrogates",
  "k:\uE000 private use",
  "k:\uFFFD replacement",
  "k:\uFFFF",
  "k:\u{10000} first astral",
  "k:😀 emoji",
  "k:\u{10FFFF}",
  "k:\u{10FFFF}\u{10FFFF}",
  "k:\u{10FFFF}a",
  "k:0123456789".repeat(20),
];

/** Every case. */
export const storeCases: readonly StoreCase[] = [
  {
    name: "get, put, overwrite and delete one key",
    async run(subject) {
      const store = await subject.open();
      assert.equal(await store.get("a"), undefined);
      await store.write([{ put: "a", value: 1 }]);
      assert.equal(await store.get("a"), 1);
      await store.write([{ put: "a", value: { two: 2 } }]);
      assert.deepEqual(await store.get("a"), { two: 2 });
      await store.write([{ delete: "a" }]);
      assert.equal(await store.get("a"), undefined);
      await store.write([{ delete: "a" }, { delete: "never-there" }]);
      assert.deepEqual(await store.list(""), []);
      await store.write([]);
      assert.deepEqual(await store.list(""), []);
      await closeStore(store);
    },
  },
  {
    name: "answers synchronously when it says it does",
    async run(subject) {
      const store = await subject.open();
      const wrote = store.write([{ put: "s", value: 1 }]);
      assert.equal(isPromiseLike(wrote), !subject.synchronous);
      await wrote;
      const got = store.get("s");
      const listed = store.list("");
      assert.equal(isPromiseLike(got), !subject.synchronous);
      assert.equal(isPromiseLike(listed), !subject.synchronous);
      assert.equal(await got, 1);
      assert.deepEqual(await listed, [["s", 1]]);
      // Writes apply in call order, also when nobody awaits between them.
      const writes = [];
      for (let i = 0; i < 20; i++) {
        writes.push(store.write([{ put: "s", value: i }, { put: `o:${i}`, value: i }]));
        writes.push(store.write([{ deletePrefix: "o:" }]));
      }
      await Promise.all(writes);
      assert.equal(await store.get("s"), 19);
      assert.deepEqual(await store.list("o:"), []);
      await closeStore(store);
    },
  },
  {
    name: "values round-trip as JSON",
    async run(subject) {
      const store = await subject.open();
      const values: Record<string, unknown> = {
        "v:null": null,
        "v:true": true,
        "v:false": false,
        "v:zero": 0,
        "v:int": 9007199254740991,
        "v:negative": -42,
        "v:float": 3.141592653589793,
        "v:tiny": 5e-324,
        "v:empty-string": "",
        "v:string": 'line\nbreak "quoted" \\ tab\t \u2028 😀 \u0000 inside a value',
        "v:empty-array": [],
        "v:empty-object": {},
        "v:nested": { a: [1, { b: [null, "x", { c: true }] }], "key with spaces": { "": 0 } },
        "v:deep": JSON.parse("[".repeat(200) + "]".repeat(200)),
      };
      await store.write(Object.entries(values).map(([put, value]) => ({ put, value })));
      for (const [key, value] of Object.entries(values)) {
        assert.deepEqual(await store.get(key), value, key);
      }
      assert.deepEqual(
        await store.list("v:"),
        Object.entries(values).sort(([a], [b]) => byCodePoint(a, b)),
      );
      if (subject.serializes) {
        // What JSON makes of what it cannot keep as it is.
        const at = new Date(0);
        await store.write([
          { put: "j:date", value: at },
          { put: "j:nan", value: [NaN, Infinity] },
          { put: "j:holes", value: { a: undefined, b: 1 } },
        ]);
        assert.equal(await store.get("j:date"), at.toISOString());
        assert.deepEqual(await store.get("j:nan"), [null, null]);
        assert.deepEqual(await store.get("j:holes"), { b: 1 });
      }
      await closeStore(store);
    },
  },
  {
    name: "lists a prefix in key order, and only that prefix",
    async run(subject) {
      const store = await subject.open();
      const all = [
        "a",
        "a:",
        "a:1",
        "a:10",
        "a:2",
        "a:1:x",
        "ab",
        "b",
        "a;",
        "A:1",
        "a:\u{10FFFF}",
      ];
      const shuffled = shuffle(all, 7);
      for (const key of shuffled) await store.write([{ put: key, value: key }]);
      const under = (prefix: string) => all.filter((k) => k.startsWith(prefix)).sort(byCodePoint);
      assert.deepEqual(await keys(store, "a:1"), ["a:1", "a:10", "a:1:x"]);
      assert.deepEqual(await keys(store, "a:"), under("a:"));
      assert.deepEqual(await keys(store, "a"), under("a"));
      assert.equal(under("a").length, 9);
      assert.deepEqual(await keys(store, ""), [...all].sort(byCodePoint));
      assert.deepEqual(await keys(store, "c"), []);
      assert.deepEqual(await keys(store, "a:2:"), []);
      const entries = await store.list("a:1");
      assert.deepEqual(entries, [["a:1", "a:1"], ["a:10", "a:10"], ["a:1:x", "a:1:x"]]);
      await closeStore(store);
    },
  },
  {
    name: "after, before, limit and reverse bound a listing and page through it",
    async run(subject) {
      const store = await subject.open();
      const all = Array.from({ length: 25 }, (_, i) => `e:${String(i).padStart(3, "0")}`);
      await store.write(all.map((put, i) => ({ put, value: i })));
      await store.write([{ put: "d", value: "below" }, { put: "f", value: "above" }]);
      assert.deepEqual(await keys(store, "e:", { limit: 3 }), all.slice(0, 3));
      assert.deepEqual(
        await keys(store, "e:", { reverse: true, limit: 3 }),
        all.slice(-3).reverse(),
      );
      assert.deepEqual(await keys(store, "e:", { after: "e:010", limit: 2 }), ["e:011", "e:012"]);
      assert.deepEqual(await keys(store, "e:", { before: "e:003" }), all.slice(0, 3));
      assert.deepEqual(await keys(store, "e:", { after: "e:005", before: "e:008" }), [
        "e:006",
        "e:007",
      ]);
      assert.deepEqual(
        await keys(store, "e:", { after: "e:005", before: "e:009", reverse: true, limit: 2 }),
        ["e:008", "e:007"],
      );
      // Bounds that are not keys, and bounds outside the prefix.
      assert.deepEqual(await keys(store, "e:", { after: "e:0105" }), all.slice(11));
      assert.deepEqual(await keys(store, "e:", { after: "a" }), all);
      assert.deepEqual(await keys(store, "e:", { before: "z" }), all);
      assert.deepEqual(await keys(store, "e:", { after: "z" }), []);
      assert.deepEqual(await keys(store, "e:", { before: "a" }), []);
      assert.deepEqual(await keys(store, "e:", { after: "e:010", before: "e:005" }), []);
      assert.deepEqual(await keys(store, "e:", { limit: 0 }), []);
      assert.deepEqual(await keys(store, "e:", { limit: 100 }), all);
      assert.deepEqual(await keys(store, "", { after: "e:024" }), ["f"]);
      assert.deepEqual(await keys(store, "", { before: "e:000", reverse: true }), ["d"]);
      // Paging forward with `after`, backward with `before`.
      const forward: string[] = [];
      let page: string[];
      let after: string | undefined;
      do {
        page = await keys(store, "e:", { after, limit: 4 });
        forward.push(...page);
        after = page.at(-1);
      } while (page.length === 4);
      assert.deepEqual(forward, all);
      const backward: string[] = [];
      let before: string | undefined;
      do {
        page = await keys(store, "e:", { before, limit: 7, reverse: true });
        backward.push(...page);
        before = page.at(-1);
      } while (page.length === 7);
      assert.deepEqual(backward, [...all].reverse());
      await closeStore(store);
    },
  },
  {
    name: "keys with unusual characters round-trip and sort by code point",
    async run(subject) {
      const store = await subject.open();
      const shuffled = shuffle(UNUSUAL_KEYS, 11);
      await store.write(shuffled.map((put) => ({ put, value: put })));
      for (const key of UNUSUAL_KEYS) assert.equal(await store.get(key), key, JSON.stringify(key));
      const sorted = [...UNUSUAL_KEYS].sort(byCodePoint);
      assert.deepEqual(await keys(store, "k:"), sorted);
      assert.deepEqual(await keys(store, "k:", { reverse: true }), [...sorted].reverse());
      assert.deepEqual(await keys(store, "k:\u{10FFFF}"), [
        "k:\u{10FFFF}",
        "k:\u{10FFFF}a",
        "k:\u{10FFFF}\u{10FFFF}",
      ]);
      assert.deepEqual(await keys(store, "k:\uFFFF"), ["k:\uFFFF"]);
      assert.deepEqual(await keys(store, "k:", { after: "k:\uFFFF", limit: 2 }), [
        "k:\u{10000} first astral",
        "k:😀 emoji",
      ]);
      assert.deepEqual(
        await keys(store, "k:", { before: "k:\u{10000}", reverse: true, limit: 1 }),
        [
          "k:\uFFFF",
        ],
      );
      assert.deepEqual(await keys(store, "k:%"), ["k:%_like*glob?[x]"]);
      assert.deepEqual(await keys(store, "k:_"), []);
      await store.write([{ deletePrefix: "k:\u{10FFFF}" }, { deletePrefix: "k:%" }]);
      assert.deepEqual(
        await keys(store, "k:"),
        sorted.filter((k) => !k.startsWith("k:\u{10FFFF}") && !k.startsWith("k:%")),
      );
      await closeStore(store);
    },
  },
  {
    name: "refuses what is not a key, a value or an operation",
    async run(subject) {
      const store = await subject.open();
      for (const bad of ["", "a\u0000b", "\uD800", "x\uDC00", "\uDBFF\uDBFF", 42, null]) {
        const key = bad as string;
        await refused(() => store.get(key), "key");
        await refused(() => store.write([{ put: key, value: 1 }]), "key");
        await refused(() => store.write([{ delete: key }]), "key");
        if (bad !== "") {
          await refused(() => store.list(key), "key");
          await refused(() => store.list("", { after: key }), "key");
          await refused(() => store.list("", { before: key }), "key");
        }
      }
      await refused(() => store.write([{ deletePrefix: "" }]), "key");
      await refused(() => store.write([{ put: "u", value: undefined }]), "value");
      await refused(() => store.write([{ put: "f", value: () => 1 }]), "value");
      await refused(() => store.write([{ put: "s", value: Symbol("s") }]), "value");
      await refused(() => store.write([{ put: "b", value: 1n }]), "value");
      await refused(() => store.write([{ nothing: "x" } as unknown as StoreOp]), "op");
      await refused(() => store.write([null as unknown as StoreOp]), "op");
      await refused(() => store.write({} as unknown as StoreOp[]), "op");
      for (const limit of [-1, 1.5, NaN]) await refused(() => store.list("", { limit }), "option");
      if (subject.serializes) {
        await refused(() => store.write([{ put: "big", value: [10n] }]), "value");
        const cycle: Record<string, unknown> = {};
        cycle.self = cycle;
        await refused(() => store.write([{ put: "cycle", value: cycle }]), "value");
      }
      assert.deepEqual(await store.list(""), []);
      await closeStore(store);
    },
  },
  {
    name: "a refused batch writes nothing",
    async run(subject) {
      const store = await subject.open();
      await store.write([{ put: "kept", value: "old" }, { put: "p:1", value: 1 }]);
      const before = await store.list("");
      const prefix: StoreOp[] = [
        { put: "kept", value: "new" },
        { put: "fresh", value: 1 },
        { delete: "p:1" },
        { deletePrefix: "p:" },
      ];
      await refused(() => store.write([...prefix, { put: "", value: 1 }]), "key");
      await refused(() => store.write([...prefix, { delete: "bad\u0000" }]), "key");
      await refused(() => store.write([...prefix, { put: "late", value: undefined }]), "value");
      await refused(() => store.write([...prefix, { bogus: true } as unknown as StoreOp]), "op");
      if (subject.serializes) {
        await refused(() => store.write([...prefix, { put: "late", value: { n: 1n } }]), "value");
        const cycle: unknown[] = [];
        cycle.push([cycle]);
        await refused(() => store.write([...prefix, { put: "late", value: cycle }]), "value");
        const poisoned = {
          toJSON() {
            throw new Error("not today");
          },
        };
        await refused(() => store.write([...prefix, { put: "late", value: poisoned }]), "value");
      }
      assert.deepEqual(await store.list(""), before);
      await closeStore(store);
    },
  },
  {
    name: "a batch the database fails midway is rolled back",
    async run(subject) {
      const openFailing = subject.openFailing?.bind(subject);
      if (!openFailing) return;
      const seed = await subject.open();
      await seed.write([{ put: "x:1", value: "one" }, { put: "x:2", value: "two" }]);
      await closeStore(seed);
      const batch: StoreOp[] = [
        { put: "x:1", value: "changed" },
        { deletePrefix: "x:" },
        { put: "y", value: "new" },
        { delete: "x:2" },
      ];
      for (let nth = 1; nth <= batch.length; nth++) {
        const failing: HarnessStore = await openFailing(nth);
        await assert.rejects(async () => await failing.write(batch), /simulated failure/);
        // The same connection goes on working after the rollback.
        assert.deepEqual(await failing.list(""), [["x:1", "one"], ["x:2", "two"]]);
        await closeStore(failing);
        const store = await subject.open();
        assert.deepEqual(
          await store.list(""),
          [["x:1", "one"], ["x:2", "two"]],
          `failure at ${nth}`,
        );
        await closeStore(store);
      }
      const store = await subject.open();
      await store.write(batch);
      assert.deepEqual(await store.list(""), [["y", "new"]]);
      await closeStore(store);
    },
  },
  {
    name: "a batch applies its operations in order",
    async run(subject) {
      const store = await subject.open();
      await store.write([{ put: "t", value: 1 }, { delete: "t" }]);
      assert.equal(await store.get("t"), undefined);
      await store.write([{ delete: "t" }, { put: "t", value: 2 }, { put: "t", value: 3 }]);
      assert.equal(await store.get("t"), 3);
      await store.write([
        { put: "p:1", value: 1 },
        { put: "p:2", value: 2 },
        { deletePrefix: "p:" },
        { put: "p:3", value: 3 },
      ]);
      assert.deepEqual(await store.list("p:"), [["p:3", 3]]);
      await closeStore(store);
    },
  },
  {
    name: "deletePrefix removes exactly the keys under the prefix, many at once",
    async run(subject) {
      const store = await subject.open();
      const many = Array.from({ length: 3000 }, (_, i) => `s:1:${String(i).padStart(5, "0")}`);
      for (let i = 0; i < many.length; i += 500) {
        await store.write(many.slice(i, i + 500).map((put) => ({ put, value: 0 })));
      }
      await store.write([
        { put: "s:1", value: "the prefix itself is a key too" },
        { put: "s:10:0", value: "a sibling prefix" },
        { put: "s:0:0", value: "before" },
        { put: "s:2:0", value: "after" },
      ]);
      assert.equal((await store.list("s:1:")).length, 3000);
      await store.write([{ deletePrefix: "s:1:" }]);
      assert.deepEqual(await keys(store, "s:"), ["s:0:0", "s:1", "s:10:0", "s:2:0"]);
      await store.write([{ deletePrefix: "s:1" }]);
      assert.deepEqual(await keys(store, "s:"), ["s:0:0", "s:2:0"]);
      await store.write([{ deletePrefix: "nothing-here" }]);
      assert.deepEqual(await keys(store, "s:"), ["s:0:0", "s:2:0"]);
      await closeStore(store);
    },
  },
  {
    name: "a check holds its batch to a key's value: compare-and-set",
    async run(subject) {
      const store = await subject.open();
      // Absent: a check without a value holds; one with a value fails.
      await store.write([{ check: "w:epoch" }, { put: "w:epoch", value: 1 }, {
        put: "a",
        value: 1,
      }]);
      assert.equal(await store.get("w:epoch"), 1);
      const refused = async (batch: StoreOp[]) => {
        await assert.rejects(
          async () => await store.write(batch),
          (error: unknown) =>
            error instanceof StoreConditionError && error.key === "w:epoch" &&
            error.name === "StoreConditionError",
        );
      };
      await refused([{ put: "a", value: 2 }, { check: "w:epoch" }]);
      await refused([{ check: "w:epoch", value: 2 }, { put: "a", value: 3 }, {
        delete: "w:epoch",
      }]);
      await refused([{ check: "w:epoch", value: "1" }, { deletePrefix: "a" }]);
      // Nothing of a refused batch was written, wherever the check stood in it.
      assert.equal(await store.get("a"), 1);
      assert.equal(await store.get("w:epoch"), 1);
      // A check that holds lets the batch apply, and is not itself written.
      await store.write([{ put: "a", value: 4 }, { check: "w:epoch", value: 1 }]);
      await store.write([{ check: "w:epoch", value: 1 }]);
      assert.deepEqual(await store.list(""), [["a", 4], ["w:epoch", 1]]);
      // Values compare as JSON: objects too, and several checks in one batch.
      await store.write([{ put: "w:holder", value: { pid: 7, host: "h" } }]);
      await store.write([
        { check: "w:holder", value: { pid: 7, host: "h" } },
        { check: "w:epoch", value: 1 },
        { put: "w:epoch", value: 2 },
      ]);
      assert.equal(await store.get("w:epoch"), 2);
      await refused([{ check: "w:holder", value: { pid: 7, host: "h" } }, {
        check: "w:epoch",
        value: 1,
      }]);
      // A bad check key is refused like any bad key.
      await assert.rejects(
        async () => await store.write([{ check: "" }]),
        InvalidStoreRequestError,
      );
      await closeStore(store);
    },
  },
  {
    name: "takes large values",
    async run(subject) {
      const store = await subject.open();
      const text = "x".repeat(subject.largeValueBytes - 2);
      const wide = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`field${i}`, i]));
      await store.write([{ put: "big:text", value: text }, { put: "big:wide", value: wide }]);
      assert.equal(await store.get("big:text"), text);
      assert.deepEqual(await store.get("big:wide"), wide);
      assert.deepEqual(await keys(store, "big:"), ["big:text", "big:wide"]);
      await closeStore(store);
    },
  },
  {
    name: "keeps order through thousands of random writes (against a model)",
    async run(subject) {
      const store = await subject.open();
      const next = random(42);
      const model = new Map<string, number>();
      const pick = () => {
        const group = ["e:", "e:1", "x:", "😀:", "\uE000:"][Math.floor(next() * 5)];
        return `${group}${Math.floor(next() * 1500)}`;
      };
      for (let round = 0; round < 40; round++) {
        const batch: StoreOp[] = [];
        for (let i = 0; i < 100; i++) {
          const r = next();
          const key = pick();
          if (r < 0.75) batch.push({ put: key, value: round * 1000 + i });
          else if (r < 0.99) batch.push({ delete: key });
          else batch.push({ deletePrefix: key.slice(0, -1) });
        }
        await store.write(batch);
        for (const op of batch) {
          if ("put" in op) model.set(op.put, op.value as number);
          else if ("delete" in op) model.delete(op.delete);
          else if ("deletePrefix" in op) {
            for (const key of [...model.keys()]) {
              if (key.startsWith(op.deletePrefix)) model.delete(key);
            }
          }
        }
        const expected = [...model].sort(([a], [b]) => byCodePoint(a, b));
        if (round % 8 === 7) assert.deepEqual(await store.list(""), expected, `round ${round}`);
        const prefix = ["e:1", "x:", "😀:", "\uE000:"][round % 4];
        const under = expected.filter(([k]) => k.startsWith(prefix));
        assert.deepEqual(
          await store.list(prefix, { reverse: true, limit: 5 }),
          under.reverse().slice(0, 5),
        );
      }
      await closeStore(store);
    },
  },
  {
    name: "what was written survives closing and reopening",
    async run(subject) {
      if (!subject.persistent) return;
      const first = await subject.open();
      await first.write([
        { put: "r:2", value: { b: [2] } },
        { put: "r:1", value: "one" },
        { put: "r:😀", value: null },
      ]);
      await first.write([{ delete: "r:2" }]);
      await closeStore(first);
      const second = await subject.open();
      assert.deepEqual(await second.list("r:"), [["r:1", "one"], ["r:😀", null]]);
      await second.write([{ put: "r:3", value: 3 }]);
      await closeStore(second);
      const third = await subject.open();
      assert.deepEqual(await keys(third, "r:"), ["r:1", "r:3", "r:😀"]);
      await closeStore(third);
    },
  },
  {
    name: "a closed store refuses every call",
    async run(subject) {
      const store = await subject.open();
      if (!store.close) return;
      await store.write([{ put: "c", value: 1 }]);
      await store.close();
      await assert.rejects(async () => await store.get("c"), StoreClosedError);
      await assert.rejects(async () => await store.list(""), StoreClosedError);
      await assert.rejects(
        async () => await store.write([{ put: "c", value: 2 }]),
        StoreClosedError,
      );
      await store.close();
    },
  },
];
