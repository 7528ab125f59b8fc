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
import { join } from "node:path";
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

/** Runs tsc on one file (the portable core's settings); resolves with its diagnostics. */
function compile(dir: string, file: string): Promise<{ code: number | null; output: string }> {
  const config = join(scratch, `${dir === HERE ? "source" : "copy"}-${file}.tsconfig.json`);
  writeFileSync(
    config,
    JSON.stringify({
      extends: join(ROOT, "tsconfig.base.json"),
      compilerOptions: { lib: ["ES2022", "ESNext.Disposable", "DOM"], types: [], noEmit: true },
      files: [join(dir, file)],
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

/** The 1-based lines of `file`'s errors in tsc's output. */
function errorLines(output: string, file: string): number[] {
  const lines = new Set<number>();
  for (const match of output.matchAll(/^(.+?)\((\d+),\d+\): error TS\d+/gm)) {
    if (match[1].endsWith(file)) lines.add(Number(match[2]));
  }
  return [...lines].sort((a, b) => a - b);
}

describe("type tests", { timeout: 120_000 }, () => {
  it("there are type tests", () => {
    assert.ok(FILES.includes("custom-tools.types.ts"), FILES.join());
  });

  for (const file of FILES) {
    const source = readFileSync(join(HERE, file), "utf8");

    it(`${file} compiles`, async () => {
      const { code, output } = await compile(HERE, file);
      assert.equal(code, 0, output);
    });

    it(`${file} without its @ts-expect-error directives fails on each line they mark`, async () => {
      const lines = source.split("\n");
      const expected: number[] = [];
      const stripped = lines.map((line, i) => {
        if (!/^\s*\/\/ @ts-expect-error/.test(line)) return line;
        expected.push(i + 2); // the line after the directive (1-based)
        return line.replace("@ts-expect-error", "(expected error)");
      });
      assert.ok(expected.length >= 3, "the file has directives");
      const copy = `stripped-${file}`;
      writeFileSync(join(scratch, copy), stripped.join("\n"));
      const { code, output } = await compile(scratch, copy);
      assert.notEqual(code, 0);
      assert.deepEqual(errorLines(output, copy), expected, output);
    });
  }

  it("custom-tools.types.ts fails when an inferred type differs from the one asserted", async () => {
    const file = "custom-tools.types.ts";
    const source = readFileSync(join(HERE, file), "utf8");
    const asserted = "{ city: string; days: number; unit?:";
    assert.ok(source.includes(asserted));
    const copy = `changed-${file}`;
    // `days` has a default: the handler's input has it, never undefined.
    writeFileSync(
      join(scratch, copy),
      source.replace(asserted, "{ city: string; days?: number; unit?:"),
    );
    const { code, output } = await compile(scratch, copy);
    assert.notEqual(code, 0);
    assert.equal(errorLines(output, copy).length, 1, output);
    assert.match(output, /TS2344/); // Type 'false' does not satisfy the constraint 'true'
  });
});
