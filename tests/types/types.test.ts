/**
 * The type tests (`tests/types/*.types.ts`) compile, from every runtime: `tsc` checks each file
 * against the portable core with no runtime types. And they can fail: with its
 * `@ts-expect-error` directives removed, the compiler reports an error on exactly the line after
 * each of them; with a type assertion changed, that assertion fails.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const HERE = join(ROOT, "tests/types");
const TSC = join(ROOT, "node_modules/.bin/tsc");
// Two levels below the root like tests/types/, so the files' relative imports resolve alike;
// `.tmp/` is ignored by git.
mkdirSync(join(ROOT, ".tmp"), { recursive: true });
const scratch = mkdtempSync(join(ROOT, ".tmp/types-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const FILES = readdirSync(HERE).filter((name) => name.endsWith(".types.ts")).sort();

/** One diagnostic of tsc's: the file it is in (absolute; "" for none), its line, its code. */
interface Diagnostic {
  file: string;
  line: number;
  code: string;
}

/**
 * Runs tsc once on `files` (the portable core's settings) and resolves with its diagnostics. The
 * files are modules, so each is checked in the one program as it would be alone; one program
 * for all of them loads the compiler and the SDK's types once instead of once a file.
 */
function compile(files: string[]): Promise<{ code: number | null; output: string }> {
  const config = join(scratch, "tsconfig.json");
  writeFileSync(
    config,
    JSON.stringify({
      extends: join(ROOT, "tsconfig.base.json"),
      compilerOptions: { lib: ["ES2022", "ESNext.Disposable", "DOM"], types: [], noEmit: true },
      files,
    }),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(TSC, ["-p", config, "--pretty", "false"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, output }));
  });
}

/** Every diagnostic in tsc's output, with or without a file. */
function diagnostics(output: string): Diagnostic[] {
  const found: Diagnostic[] = [];
  for (const match of output.matchAll(/^(?:(.+?)\((\d+),\d+\): )?error (TS\d+)/gm)) {
    const [, file, line, code] = match;
    found.push({ file: file ? resolve(ROOT, file) : "", line: Number(line ?? 0), code });
  }
  return found;
}

/** The 1-based lines of the errors in `path` (absolute), in order, each once. */
function errorLines(found: Diagnostic[], path: string): number[] {
  return [...new Set(found.filter((d) => d.file === path).map((d) => d.line))].sort((a, b) =>
    a - b
  );
}

/** A source's copy with its `@ts-expect-error` directives disarmed, and the lines they mark. */
function stripDirectives(source: string): { text: string; expected: number[] } {
  const expected: number[] = [];
  const stripped = source.split("\n").map((line, i) => {
    if (!/^\s*\/\/ @ts-expect-error/.test(line)) return line;
    expected.push(i + 2); // the line after the directive (1-based)
    return line.replace("@ts-expect-error", "(expected error)");
  });
  return { text: stripped.join("\n"), expected };
}

const SOURCES = new Map(FILES.map((file) => [file, readFileSync(join(HERE, file), "utf8")]));
/** `custom-tools.types.ts` with an asserted type changed: `days` loses its default. */
const CHANGED = "custom-tools.types.ts";
const ASSERTED = "{ city: string; days: number; unit?:";
const changedPath = join(scratch, `changed-${CHANGED}`);
const strippedPath = (file: string) => join(scratch, `stripped-${file}`);

let compiled: Promise<{ code: number | null; found: Diagnostic[]; output: string }> | undefined;
/** The one tsc run: every type test file, each stripped copy, and the changed copy. */
function compileAll() {
  compiled ??= (async () => {
    const copies: string[] = [];
    for (const [file, source] of SOURCES) {
      writeFileSync(strippedPath(file), stripDirectives(source).text);
      copies.push(strippedPath(file));
    }
    const source = SOURCES.get(CHANGED) ?? "";
    // `days` has a default: the handler's input has it, never undefined.
    writeFileSync(changedPath, source.replace(ASSERTED, "{ city: string; days?: number; unit?:"));
    copies.push(changedPath);
    const { code, output } = await compile([...FILES.map((f) => join(HERE, f)), ...copies]);
    return { code, found: diagnostics(output), output };
  })();
  return compiled;
}

describe("type tests", { timeout: 120_000 }, () => {
  it("there are type tests", () => {
    assert.ok(FILES.includes(CHANGED), FILES.join());
  });

  for (const [file, source] of SOURCES) {
    it(`${file} compiles`, async () => {
      const { found, output } = await compileAll();
      assert.deepEqual(errorLines(found, join(HERE, file)), [], output);
      // Nothing else failed either (the SDK's own types, the configuration): only the copies
      // made to fail did.
      const copies = new Set([...FILES.map(strippedPath), changedPath]);
      assert.deepEqual(found.filter((d) => !copies.has(d.file)), [], output);
    });

    it(`${file} without its @ts-expect-error directives fails on each line they mark`, async () => {
      const { expected } = stripDirectives(source);
      assert.ok(expected.length >= 3, "the file has directives");
      const { code, found, output } = await compileAll();
      assert.notEqual(code, 0);
      assert.deepEqual(errorLines(found, strippedPath(file)), expected, output);
    });
  }

  it("custom-tools.types.ts fails when an inferred type differs from the one asserted", async () => {
    assert.ok(SOURCES.get(CHANGED)?.includes(ASSERTED));
    const { code, found, output } = await compileAll();
    assert.notEqual(code, 0);
    const errors = found.filter((d) => d.file === changedPath);
    assert.equal(errors.length, 1, output);
    // Type 'false' does not satisfy the constraint 'true'
    assert.equal(errors[0].code, "TS2344", output);
  });
});
