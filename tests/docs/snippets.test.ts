/**
 * The snippet machinery can fail: the convention's violations are each reported at their line,
 * a block's type errors come back at the Markdown line they are on (the README's old harness
 * and agent snippets, with their undefined names, are the fixtures), a block that continues
 * another runs after it, and a run that exits non-zero or never exits (the README's old
 * protocol-core snippet, which never closed its peers) is told apart from one that exits 0.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  currentRuntime,
  located,
  parseSnippets,
  type Program,
  programsOf,
  ROOT,
  Scratch,
  typeCheckOncePerRun,
} from "./snippets.ts";

const FENCE = "```";

/** A Markdown text from lines. */
const md = (...lines: string[]) => lines.join("\n");

describe("snippet convention", () => {
  it("reads each marker's mode, id, after, runtimes and reason, and the block's lines", () => {
    const { snippets, problems } = parseSnippets(
      md(
        "# Title",
        "<!-- snippet: part id=setup -->",
        "",
        `${FENCE}ts`,
        "const x = 1;",
        FENCE,
        "",
        "- a list item:",
        "",
        "  <!-- snippet: run after=setup -->",
        `  ${FENCE}typescript`,
        "  console.log(x);",
        "  if (x) {",
        "    console.log(x + 1);",
        "  }",
        `  ${FENCE}`,
        "<!-- snippet: check-only on=deno — it reads Deno.env -->",
        `${FENCE}ts`,
        "Deno.env.get('X');",
        FENCE,
        "<!-- snippet: skip — a type shape, not a program -->",
        `${FENCE}ts`,
        "interface X { a: 1 }",
        FENCE,
        `${FENCE}sh`,
        "npm test",
        FENCE,
      ),
      "doc.md",
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(
      snippets.map(({ line, mode, id, after, on, reason, code }) => ({
        line,
        mode,
        id,
        after,
        on,
        reason,
        code,
      })),
      [
        {
          line: 5,
          mode: "part",
          id: "setup",
          after: undefined,
          on: ["node", "deno", "bun"],
          reason: undefined,
          code: "const x = 1;",
        },
        {
          line: 12,
          mode: "run",
          id: undefined,
          after: "setup",
          on: ["node", "deno", "bun"],
          reason: undefined,
          code: "console.log(x);\nif (x) {\n  console.log(x + 1);\n}",
        },
        {
          line: 19,
          mode: "check-only",
          id: undefined,
          after: undefined,
          on: ["deno"],
          reason: "it reads Deno.env",
          code: "Deno.env.get('X');",
        },
        {
          line: 23,
          mode: "skip",
          id: undefined,
          after: undefined,
          on: ["node", "deno", "bun"],
          reason: "a type shape, not a program",
          code: "interface X { a: 1 }",
        },
      ],
    );
  });

  it("reports every violation at its line", () => {
    const { problems } = parseSnippets(
      md(
        `${FENCE}ts`, // 1: no marker
        "a;",
        FENCE,
        "<!-- snippet: skip -->", // 4: skip without a reason
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: check-only -->", // 7: check-only without a reason
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: run on=bun -->", // 10: fewer runtimes without a reason
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: walk -->", // 13: unknown mode
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: run colour=red -->", // 16: unknown attribute
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: part id=lonely -->", // 19: a part nobody continues
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: run after=later -->", // 22: after= names no earlier block
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: run id=later -->",
        `${FENCE}ts`,
        FENCE,
        "<!-- snippet: run -->", // 28: a marker before a shell block
        `${FENCE}sh`,
        FENCE,
        "<!-- snippet: run -->", // 31: a marker with prose between it and the block
        "Some prose.",
        `${FENCE}ts`, // 33: so this block has no marker
        FENCE,
        "<!-- snippet: run -->", // 35: a marker at the end
      ),
      "doc.md",
    );
    assert.deepEqual(problems.map(located), [
      "doc.md:1: a ```ts block without a snippet marker (<!-- snippet: run --> and others)",
      "doc.md:4: a skip snippet needs its reason: <!-- snippet: skip — why -->",
      "doc.md:7: a check-only snippet needs its reason: <!-- snippet: check-only — why -->",
      "doc.md:10: a snippet that runs on some runtimes only needs its reason: on=... — why",
      'doc.md:13: unknown snippet mode "walk" (run, part, check-only or skip)',
      'doc.md:16: unknown snippet attribute "colour=red" (id=, after=, on=)',
      "doc.md:28: a snippet marker before a ```sh block",
      "doc.md:31: a snippet marker must be on the line before a ```ts block",
      "doc.md:33: a ```ts block without a snippet marker (<!-- snippet: run --> and others)",
      "doc.md:35: a snippet marker with no TypeScript block after it",
      "doc.md:22: after=later names no earlier block",
      "doc.md:19: part id=lonely is continued by no later block",
    ]);
  });

  it("assembles a block after the chain it continues, each line traced to its origin", () => {
    const { snippets } = parseSnippets(
      md(
        "<!-- snippet: part id=a -->",
        `${FENCE}ts`,
        "const a = 1;",
        FENCE,
        "<!-- snippet: part id=b after=a -->",
        `${FENCE}ts`,
        "const b = a + 1;",
        FENCE,
        "<!-- snippet: run after=b -->",
        `${FENCE}ts`,
        "console.log(b);",
        FENCE,
      ),
      "doc.md",
    );
    const programs = programsOf(snippets);
    assert.equal(programs.length, 1, "parts are not programs of their own");
    assert.equal(programs[0].source, "const a = 1;\nconst b = a + 1;\nconsole.log(b);\n");
    assert.deepEqual(programs[0].origin.map((o) => o.line), [3, 7, 11]);
  });
});

/** The README's snippets before they were fixed: each fails as the issue reported. */
const OLD_README = md(
  "<!-- snippet: check-only — the old harness snippet -->",
  "",
  `${FENCE}ts`,
  'import { Harness } from "bma-executor-sdk/node";',
  "",
  "const harness = new Harness({ authenticate }); // or { tokens } for the self-hosted token endpoint",
  'const server = await harness.serve({ hostname: "127.0.0.1", port: 7700 });',
  FENCE,
  "",
  "<!-- snippet: check-only — the old agent snippet -->",
  "",
  `${FENCE}ts`,
  'import { AgentPlatform, Harness } from "bma-executor-sdk/node";',
  "new Harness({ agent: new AgentPlatform({ modelTokens, toolsTokens }) });",
  'const id = await approvalId("ses_1", "make");',
  FENCE,
  "",
  "<!-- snippet: run — the old protocol-core snippet -->",
  "",
  `${FENCE}ts`,
  'import { createLinkedTransportPair, Peer } from "bma-executor-sdk";',
  "",
  'const [a, b] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });',
  "const harness = new Peer(b);",
  'harness.onRequest("session.ready", ({ session_id }) => ({ ok: true }));',
  "const executor = new Peer(a);",
  'await executor.call("session.ready", { session_id: "ses_1" });',
  FENCE,
  "",
  "<!-- snippet: part id=base -->",
  "",
  `${FENCE}ts`,
  'import { ErrorCode } from "bma-executor-sdk/protocol";',
  "const code: number = ErrorCode.INVALID_PARAMS;",
  FENCE,
  "",
  "<!-- snippet: run after=base -->",
  "",
  `${FENCE}ts`,
  "console.log(`continued ${code}`);",
  FENCE,
  "",
  "<!-- snippet: check-only on=deno — Deno's namespace: deno check checks it -->",
  "",
  `${FENCE}ts`,
  'const home: string | undefined = Deno.env.get("HOME");',
  "const length: number = home;",
  FENCE,
  "",
  "<!-- snippet: run -->",
  "",
  `${FENCE}ts`,
  'console.log("failing on purpose");',
  "process.exit(3);",
  FENCE,
);

describe("snippet checks on the old README's snippets", { timeout: 180_000 }, () => {
  let dir = "";
  let scratch: Scratch;
  let programs: Program[] = [];

  before(() => {
    mkdirSync(join(ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(ROOT, ".tmp/snippets-self-"));
    scratch = new Scratch(dir);
    const parsed = parseSnippets(OLD_README, "old.md");
    assert.deepEqual(parsed.problems, []);
    programs = programsOf(parsed.snippets);
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reports the undefined names at their Markdown lines, and nothing in the sound blocks", async () => {
    const { byProgram, other } = await typeCheckOncePerRun("snippets-type-check", programs);
    assert.deepEqual(other, []);
    const errors = programs.map((program) =>
      byProgram.get(program)!.map((d) => `${d.line}: ${/^error (TS\d+)/.exec(d.message)![1]}`)
    );
    assert.deepEqual(errors, [
      ["6: TS18004"], // `{ authenticate }`: no value named authenticate in scope
      ["14: TS18004", "14: TS18004", "15: TS2304"], // modelTokens, toolsTokens, approvalId
      [],
      [],
      ["47: TS2322"], // deno check: string | undefined is no number; Deno.env itself is known
      [],
    ]);
    assert.match(byProgram.get(programs[0])!.map(located).join(), /old\.md:6: .*authenticate/);
  });

  const runtime = currentRuntime();

  it(`a block that never closes its peers is still running at the bound (${runtime})`, async () => {
    const result = await scratch.run(programs[2], runtime, 8_000);
    assert.equal(result.timedOut, true, result.output);
  });

  it(`a block continuing another runs after it and exits 0 (${runtime})`, async () => {
    const result = await scratch.run(programs[3], runtime, 30_000);
    assert.equal(result.timedOut, false, result.output);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /continued -32602/);
  });

  it(`a block that exits 3 is reported with its code and output (${runtime})`, async () => {
    const result = await scratch.run(programs[5], runtime, 30_000);
    assert.equal(result.code, 3, result.output);
    assert.match(result.output, /failing on purpose/);
  });
});
