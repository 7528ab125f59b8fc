/**
 * A new user's first ten minutes, as the README tells them: in an empty directory, the
 * README's install block (`npm init -y`, then the install line with the package name replaced
 * by the packed tarball's path; npm from the shared cache, `--prefer-offline`), the quick start
 * copied out of the README into the file its run command names, and that run command for the
 * runtime of this stage, from a `PATH` without the repository's node_modules. It must exit 0
 * and print the lines the quick start's comments show, in order, and no warning. Then the same
 * program importing this runtime's own entry point (the `// or /deno, /bun` of its import).
 *
 * The blocks are the README's own, found by their markers (`<!-- newcomer: install -->`,
 * `<!-- newcomer: program -->`, `<!-- newcomer: run -->`; `fresh-project.ts`). The install ran
 * once per test run, for every stage that asks (`readmeProject`).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  commandsOf,
  markedBlock,
  markedTable,
  newcomerPath,
  NPM_ENV,
  readme,
  readmeProject,
  run,
  RUNTIME,
} from "./fresh-project.ts";

const README = readme();
const INSTALL = markedBlock(README, "install");
const PROGRAM = markedBlock(README, "program");
/** The run table's row of each runtime: its first cell names it, its run cell the command. */
const RUN_ROWS = markedTable(README, "run");
const ROW_NAMES = { node: /^Node\b/, deno: /^Deno\b/, bun: /^Bun\b/ } as const;

/** The run command of `runtime`, as the README's table shows it. */
function runCommand(runtime: keyof typeof ROW_NAMES): string[] {
  const row = RUN_ROWS.find((cells) => ROW_NAMES[runtime].test(cells[0]));
  assert.ok(row, `the run table has a row for ${runtime}`);
  const cell = row.find((text) => /^`[^`]+`$/.test(text) && /\.m?ts`$/.test(text));
  assert.ok(cell, `the ${runtime} row has a run command: ${row.join(" | ")}`);
  const commands = commandsOf(cell.slice(1, -1));
  assert.equal(commands.length, 1);
  return commands[0];
}

/** What the program prints: the `// comment` after each `console.log(...)`, in order. */
function expectedOutput(code: string): string[] {
  return [...code.matchAll(/^console\.log\(.*\);\s*\/\/\s*(.+)$/gm)].map(([, text]) => text.trim());
}

/** Each expected line appears in `stdout`, as a line of its own, in order. */
function assertPrints(stdout: string, expected: readonly string[], context: string): void {
  const lines = stdout.split("\n").map((line) => line.trim());
  let at = 0;
  for (const line of expected) {
    const found = lines.indexOf(line, at);
    assert.ok(found >= 0, `${context}: "${line}" is printed (after line ${at})\n${stdout}`);
    at = found + 1;
  }
}

describe(`the README's quick start from an empty directory on ${RUNTIME}`, {
  timeout: 240_000,
}, () => {
  let dir = "";
  let app = "";
  let PATH = "";
  const command = runCommand(RUNTIME);
  const file = command.find((word) => /\.m?ts$/.test(word))!;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-newcomer-"));
    app = join(dir, "quickstart");
    PATH = newcomerPath(dir);
    assert.equal(INSTALL.language, "sh");
    await readmeProject(dir, app);
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("installs everything the quick start runs with, and tells which file to save", () => {
    const words = commandsOf(INSTALL.code).flat();
    assert.ok(words.includes("bma-executor-sdk"), "the install line names the package");
    // npm init writes a CommonJS project (npm 11: "type": "commonjs"); the file name makes the
    // program an ES module all the same.
    const manifest = JSON.parse(readFileSync(join(app, "package.json"), "utf8"));
    assert.notEqual(manifest.type, "module", "npm init wrote no ES module project");
    assert.match(file, /\.mts$/, "the run command's file is an ES module by its name");
    assert.ok(README.includes(`Save this program as \`${file}\``), `the README says ${file}`);
    assert.equal(PROGRAM.language, "ts");
    assert.match(PROGRAM.code, /from "bma-executor-sdk\/node"/);
  });

  const variants = [
    { name: "as written", entry: "node" },
    ...(RUNTIME === "node" ? [] : [{ name: `importing /${RUNTIME}`, entry: RUNTIME }]),
  ];
  for (const { name, entry } of variants) {
    it(`runs ${name} with \`${command.join(" ")}\`, prints what the README shows, and no warning`, async () => {
      const code = PROGRAM.code.replace(
        'from "bma-executor-sdk/node"',
        `from "bma-executor-sdk/${entry}"`,
      );
      writeFileSync(join(app, file), code);
      const result = await run(command[0], command.slice(1), {
        cwd: app,
        env: { ...NPM_ENV, PATH },
        timeoutMs: 60_000,
      });
      const context = `${command.join(" ")} (${name})`;
      assert.equal(
        result.code,
        0,
        `${context} exited ${result.code ?? result.signal}\n${result.stdout}\n${result.stderr}`,
      );
      const expected = expectedOutput(PROGRAM.code);
      assert.deepEqual(expected, ["hello from Linux", "written by the harness"]);
      assertPrints(result.stdout, expected, context);
      // console.warn and console.error write to stderr: the logger warned of nothing.
      assert.equal(result.stderr.trim(), "", `${context} wrote to stderr`);
    });
  }
});
