/**
 * The generated fast predicates (METHOD_SPECS acceptsParams / acceptsResult, and isX next to each
 * XSchema) against zod itself: whenever a predicate accepts a value, the zod validator accepts it
 * too and its output deep-equals the value (so a caller may keep the value as is). Checked on the
 * contract's examples, on every single mutation of them, and on random and randomly mutated
 * values; and the fast path does accept the common valid traffic (else it would be useless).
 * The pairs and examples are in fast-validator-pairs.ts, the mutations in json-mutations.ts, the
 * values generated from the contract in contract-arbitraries.ts.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import * as contract from "../../protocol/generated/contract.ts";
import { generated, generatedNamed } from "./contract-arbitraries.ts";
import {
  agrees,
  corpus,
  hasUrl,
  invalid,
  keys,
  methodPairs,
  namedPairs,
  show,
  valid,
  words,
} from "./fast-validator-pairs.ts";
import { changed, DELETE, isJsonSafe, isRecord, MUTATIONS, paths } from "./json-mutations.ts";

const { METHOD_SPECS } = contract;

describe("fast validators", () => {
  it("exist for every method and every exported schema", () => {
    assert.ok(methodPairs.length > 40, `a pair per method (${methodPairs.length})`);
    for (const spec of METHOD_SPECS.values()) {
      assert.equal(typeof spec.acceptsParams, "function", `${spec.name}: acceptsParams`);
      if (spec.kind === "request") {
        assert.equal(typeof spec.acceptsResult, "function", `${spec.name}: acceptsResult`);
      } else assert.equal(spec.acceptsResult, undefined, `${spec.name}: a notification`);
    }
    assert.ok(namedPairs.length > 100, `a predicate per exported schema (${namedPairs.length})`);
    for (const pair of namedPairs) {
      assert.equal(typeof pair.accepts, "function", `${pair.name} is exported next to its schema`);
    }
    for (
      const name of [
        "ContentBlock",
        "AgentEvent",
        "ToolCallParams",
        "ToolResultParams",
        "SessionEventParams",
        "Ack",
      ]
    ) {
      assert.ok(namedPairs.some((p) => p.name === `is${name}`), `is${name} is exported`);
    }
  });

  it("accept the contract's valid examples (URL members aside) and agree with zod on all", () => {
    let accepted = 0;
    for (const v of valid) {
      const ok = agrees(v.pair, v.value, v.description);
      if (ok) accepted++;
      else {
        assert.ok(hasUrl(v.value), `${v.pair.name}: ${v.description} is accepted by the fast path`);
      }
    }
    assert.ok(accepted >= valid.length * 0.9, `most valid examples accepted (${accepted})`);
    for (const v of invalid) {
      assert.equal(
        agrees(v.pair, v.value, v.description),
        false,
        `${v.pair.name}: ${v.description} is refused`,
      );
    }
  });

  it("accept the common traffic", () => {
    const spec = (method: string) => METHOD_SPECS.get(method)!;
    const bash = {
      session_id: "ses_1",
      tool_call_id: "call_1",
      tool: "bash",
      input: { command: "ls -la", env: { A: "1" } },
      timeout_ms: 30000,
    };
    assert.ok(spec("tool.call").acceptsParams(bash), "tool.call params of bash");
    assert.ok(
      spec("tool.call").acceptsParams({ ...bash, tool: "custom_tool", input: { any: [1, {}] } }),
      "tool.call params of a tool the contract does not type",
    );
    assert.ok(
      !spec("tool.call").acceptsParams({ ...bash, input: { cwd: "/" } }),
      "tool.call params whose built-in tool input is invalid are refused (superRefine)",
    );
    assert.ok(
      !spec("tool.call").acceptsParams({ ...bash, tool: "edit", input: { path: "a" } }),
      "tool.call params of edit without old_string are refused",
    );
    for (const ack of [{ ok: true }, { ok: true, duplicate: true }, { ok: true, extra: 1 }]) {
      assert.ok(spec("tool.call").acceptsResult!(ack), `Ack ${show(ack)}`);
      assert.ok(contract.isAck(ack), `isAck ${show(ack)}`);
    }
    assert.ok(
      spec("tool.result").acceptsResult!({ ok: true, duplicate: undefined }),
      "an Ack with an undefined optional member",
    );
    assert.ok(!contract.isAck({ ok: false }), "isAck refuses ok: false");
    const result = {
      session_id: "ses_1",
      tool_call_id: "call_1",
      outcome: "completed",
      content: [
        { type: "text", text: "hello" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: "aGk=" } },
        { type: "artifact", artifact_id: "art_1", name: "out.txt", size: 12 },
      ],
      is_error: false,
      artifacts: [{ artifact_id: "art_1", size: 0 }],
      structured_content: { stdout: "hello\n", stderr: "", exit_code: 0 },
    };
    assert.ok(spec("tool.result").acceptsParams(result), "tool.result params");
    assert.ok(contract.isToolResultParams(result), "isToolResultParams");
    assert.ok(
      spec("tool.result").acceptsParams({ ...result, outcome: "failed", error: { message: "x" } }),
      "tool.result params of a failure",
    );
    const event = {
      session_id: "ses_1",
      turn_id: "turn_1",
      event_id: "evt_1",
      sequence: 7,
      event: { type: "agent.message", content: [{ type: "text", text: "hi" }] },
    };
    assert.ok(spec("session.event").acceptsParams(event), "session.event params");
    assert.ok(contract.isSessionEventParams(event), "isSessionEventParams");
    assert.ok(contract.isAgentEvent(event.event), "isAgentEvent");
    assert.ok(contract.isContentBlock(event.event.content[0]), "isContentBlock");
    assert.ok(
      spec("session.event").acceptsResult!({ acked_sequence: 7 }),
      "session.event result",
    );
    assert.ok(spec("executor.heartbeat").acceptsParams({}), "heartbeat params, empty");
    assert.ok(
      spec("executor.heartbeat").acceptsParams({ active_sessions: ["ses_1"] }),
      "heartbeat params with sessions",
    );
    assert.ok(
      spec("executor.heartbeat").acceptsResult!({
        drain: false,
        lease_expires_at: "2026-01-01T00:00:30.5Z",
      }),
      "heartbeat result with a date-time",
    );
    assert.ok(
      spec("tool.progress").acceptsParams({
        session_id: "ses_1",
        tool_call_id: "call_1",
        output: { stream: "stdout", text: "x" },
        progress: 0.5,
      }),
      "tool.progress params",
    );
    // Tool-call params are the typed params object, as is.
    const json = JSON.parse(JSON.stringify(bash));
    assert.ok(contract.isToolCallParams(json), "JSON-parsed tool.call params");
  });

  it("follow zod on the awkward cases", () => {
    const params = (method: string) => methodPairs.find((p) => p.method === method)!.params;
    const sparse = new Array(1);
    const cases: [string, unknown, boolean, string][] = [
      ["executor.drain", { deadline_ms: 2 ** 53 }, false, "an unsafe integer"],
      ["executor.drain", { deadline_ms: NaN }, false, "NaN"],
      ["executor.drain", { deadline_ms: 1.5 }, false, "a float for z.int()"],
      ["executor.drain", { deadline_ms: Number.MAX_SAFE_INTEGER }, true, "the largest safe int"],
      ["executor.drain", { deadline_ms: undefined }, true, "an optional member as undefined"],
      ["executor.drain", [], false, "an array for an object"],
      ["executor.heartbeat", { extra: undefined }, true, "an unknown member passes through"],
      [
        "executor.heartbeat",
        JSON.parse('{"__proto__": {"active_sessions": 1}}'),
        false,
        "an own __proto__ member (zod drops it)",
      ],
      ["executor.heartbeat", Object.create(null), false, "a null-prototype object"],
      [
        "mcp.message",
        { channel_id: "c", message: { constructor: () => 1 } },
        false,
        "an own constructor function (zod refuses the object)",
      ],
      [
        "executor.heartbeat",
        { constructor: "x" },
        false,
        "an own constructor member (left to zod)",
      ],
      ["executor.heartbeat", { active_sessions: sparse }, false, "a sparse array"],
      [
        "tool.progress",
        { session_id: "s", tool_call_id: "c", progress: Infinity },
        false,
        "Infinity for z.number()",
      ],
      [
        "fs.mount",
        {
          session_id: "s",
          service_url: "https://files.example/",
          views: [{ view: "v", path: "/p", token: "t" }],
        },
        false,
        "a z.url() member (left to zod)",
      ],
    ];
    for (const [method, value, expected, what] of cases) {
      assert.equal(agrees(params(method), value, what), expected, `${method}: ${what}`);
    }
  });

  it("agree with zod on every single mutation of every example", () => {
    let checked = 0;
    let accepted = 0;
    for (const v of [...valid, ...invalid]) {
      for (const path of paths(v.value)) {
        for (const [name, mutation] of MUTATIONS) {
          const value = changed(v.value, path, mutation);
          checked++;
          if (agrees(v.pair, value, `${v.description}, ${name} at /${path.join("/")}`)) {
            accepted++;
          }
        }
      }
    }
    assert.ok(checked > 10_000, `many mutations checked (${checked})`);
    assert.ok(
      accepted > 1_000,
      `many mutations accepted, so the property is exercised (${accepted})`,
    );
  });

  it("agree with zod on every node of every example, for every exported schema", () => {
    let accepted = 0;
    for (const pair of namedPairs) {
      for (const value of corpus) if (agrees(pair, value, "an example node")) accepted++;
    }
    assert.ok(accepted > 500, `many example nodes accepted (${accepted})`);
  });

  it("agree with zod on random values", () => {
    const leaf = fc.oneof(
      fc.constantFrom(...words),
      fc.constantFrom(...MUTATIONS.map(([, m]) => m("x")).filter((v) => v !== DELETE)),
      fc.constantFrom(...corpus),
      fc.string(),
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
    );
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: "small" }, leaf, tie("object"), tie("array")),
      object: fc.dictionary(fc.constantFrom(...keys), tie("value"), { maxKeys: 8 }),
      array: fc.array(tie("value"), { maxLength: 3 }),
    }));
    const anything = fc.anything({
      withBoxedValues: true,
      withNullPrototype: true,
      withSparseArray: true,
      withDate: true,
      withMap: true,
      withObjectString: true,
      withBigInt: true,
    });
    const pairs = [
      ...methodPairs.flatMap((p) => (p.result ? [p.params, p.result] : [p.params])),
      ...namedPairs,
    ];
    fc.assert(
      fc.property(fc.constantFrom(...pairs), fc.oneof(value, anything), (pair, v) => {
        agrees(pair, v, "a random value");
      }),
      { numRuns: 3000 },
    );
    // Objects made of the members of the method's own params, to get past the first checks.
    fc.assert(
      fc.property(
        fc.constantFrom(...methodPairs),
        fc.dictionary(fc.constantFrom(...keys), value, { maxKeys: 10 }),
        (p, v) => {
          agrees(p.params, v, "a random params object");
          if (p.result) agrees(p.result, v, "a random result object");
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("accept what the contract describes (URL members aside), as zod does", () => {
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...generated, ...generatedNamed).chain((g) =>
          g.values.map((value) => ({ pair: g.pair, value }))
        ),
        ({ pair, value }) => {
          if (agrees(pair, value, "a value generated from the contract")) accepted++;
          else if (pair.schema.safeParse(value).success) {
            assert.ok(
              hasUrl(value),
              `${pair.name}: a valid value without URL is accepted: ${show(value)}`,
            );
          }
        },
      ),
      { numRuns: 6000 },
    );
    assert.ok(accepted > 3000, `generated values accepted (${accepted})`);
  });

  it("agree with zod on values generated from the contract, then mutated", () => {
    const mutation = fc.tuple(
      fc.nat(),
      fc.nat(),
      fc.constantFrom(...keys),
      fc.constantFrom(...words),
    );
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...generated, ...generatedNamed).chain((g) =>
          g.values.map((value) => ({ pair: g.pair, value }))
        ),
        fc.array(mutation, { minLength: 1, maxLength: 3 }),
        ({ pair, value }, steps) => {
          let v = value;
          for (const [at, which, key, word] of steps) {
            if (!isJsonSafe(v)) break;
            const all = paths(v);
            const path = all[at % all.length];
            const pick = which % (MUTATIONS.length + 2);
            v = pick === MUTATIONS.length
              ? changed(v, path, () => word)
              : pick === MUTATIONS.length + 1
              ? changed(v, path, (node) =>
                isRecord(node)
                  ? { ...node, [key]: MUTATIONS[at % MUTATIONS.length][1](word) }
                  : node)
              : changed(v, path, MUTATIONS[pick][1]);
          }
          if (agrees(pair, v, "a generated value, mutated")) accepted++;
        },
      ),
      { numRuns: 8000 },
    );
    assert.ok(
      accepted > 500,
      `mutated values accepted, so the property is exercised (${accepted})`,
    );
  });

  it("agree with zod on examples mutated at random, several times over", () => {
    const mutation = fc.tuple(fc.nat(), fc.nat(), fc.constantFrom(...words, ...corpus));
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...valid),
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        (v, steps) => {
          let value = v.value;
          for (const [at, which, word] of steps) {
            const all = paths(value);
            if (all.length === 0) break;
            const path = all[at % all.length];
            const pick = which % (MUTATIONS.length + 1);
            // changed() copies by JSON: a step that leaves JSON (NaN, a Date, ...) is the last.
            value = pick === MUTATIONS.length
              ? changed(value, path, () => word)
              : changed(value, path, MUTATIONS[pick][1]);
            if (!isJsonSafe(value)) break;
          }
          if (agrees(v.pair, value, `${v.description}, mutated`)) accepted++;
        },
      ),
      { numRuns: 4000 },
    );
    assert.ok(
      accepted > 100,
      `random mutations accepted, so the property is exercised (${accepted})`,
    );
  });
});
