/**
 * Every TypeScript block of the project's Markdown (README.md, harness/workers/README.md, and
 * any other `.md` file of the repository) follows the snippet convention of `snippets.ts`, type-
 * checks against the package's public entry points as a user imports them, and, when it is
 * marked `run`, runs in a fresh process of the runtime running this test and exits 0 within
 * the time bound. `npx tsx scripts/test.ts --only node,deno,bun tests/docs` runs the blocks on
 * all three runtimes.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import {
  currentRuntime,
  located,
  programsOf,
  readSnippets,
  ROOT,
  Scratch,
  type TypeCheck,
  typeCheckOncePerRun,
} from "./snippets.ts";

/** How long a runnable block may take before it counts as never exiting. */
const RUN_TIMEOUT_MS = 30_000;

/** Every Markdown file of the repository (not dependencies, builds or scratch space). */
function markdownFiles(dir = ROOT): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith(".") || entry === "node_modules" || entry === "dist") continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...markdownFiles(path));
    else if (entry.endsWith(".md")) out.push(relative(ROOT, path));
  }
  return out.sort();
}

const FILES = markdownFiles();
const { snippets, problems } = readSnippets(FILES);
const programs = programsOf(snippets);
const runtime = currentRuntime();

describe("documentation snippets", { timeout: 600_000 }, () => {
  let dir = "";
  let scratch: Scratch;
  let checked: TypeCheck;

  before(async () => {
    mkdirSync(join(ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(ROOT, ".tmp/snippets-"));
    scratch = new Scratch(dir);
    checked = await typeCheckOncePerRun("readme-type-check", programs);
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the READMEs have TypeScript blocks, and some of them run", () => {
    for (const file of ["README.md", "harness/workers/README.md"]) {
      assert.ok(snippets.some((s) => s.file === file), `${file} has TypeScript blocks`);
    }
    assert.ok(programs.some((p) => p.snippet.mode === "run"), "runnable blocks");
  });

  it("every TypeScript block has a marker, and every skip and check-only its reason", () => {
    assert.deepEqual(problems.map(located), []);
  });

  it("the SDK's sources type-check as the snippets import them", () => {
    assert.deepEqual(checked.other.map(located), []);
  });

  for (const program of programs) {
    const { file, line, mode, after: base, on, reason } = program.snippet;
    const name = `${file}:${line} (${mode}${base ? ` after=${base}` : ""})`;

    it(`${name} type-checks`, () => {
      assert.deepEqual(checked.byProgram.get(program)!.map(located), []);
    });

    if (mode !== "run") continue;
    const skip = on.includes(runtime) ? false : `runs on ${on.join(", ")} only: ${reason}`;
    it(`${name} runs on ${runtime} and exits 0`, { skip }, async () => {
      const result = await scratch.run(program, runtime, RUN_TIMEOUT_MS);
      assert.ok(
        !result.timedOut,
        `still running after ${RUN_TIMEOUT_MS / 1000} s: something keeps the process alive ` +
          `(a server, a client, a timer)\n${result.output}`,
      );
      assert.equal(result.code, 0, `exited ${result.code ?? result.signal}\n${result.output}`);
    });
  }
});
