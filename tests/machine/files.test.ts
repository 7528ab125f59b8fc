/** The file tools and the workdir rule, on a real temp directory. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PathOutsideWorkdirError, Workdir } from "../../executor/machine/workdir.node.ts";
import {
  editTool,
  FileToolError,
  globTool,
  globToRegExp,
  grepTool,
  readTool,
  writeTool,
} from "../../executor/machine/files.node.ts";

describe("file tools", { timeout: 20_000 }, () => {
  let top: string;
  let root: string;
  let workdir: Workdir;
  before(() => {
    top = mkdtempSync(join(tmpdir(), "bma-files-"));
    root = join(top, "work");
    mkdirSync(join(root, "src/deep"), { recursive: true });
    writeFileSync(join(top, "secret.txt"), "outside\n");
    writeFileSync(join(root, "src/a.ts"), "export const a = 1;\n// TODO one\n");
    writeFileSync(join(root, "src/deep/b.ts"), "export const b = 2; // todo two\n");
    writeFileSync(join(root, "notes.md"), "line 1\nline 2\nline 3\nline 4\n");
    writeFileSync(join(root, "bin.dat"), new Uint8Array([0, 1, 2, 84, 79, 68, 79]));
    symlinkSync(join(top, "secret.txt"), join(root, "escape.txt"));
    symlinkSync(top, join(root, "escape-dir"));
    symlinkSync(join(root, "notes.md"), join(root, "inside-link.md"));
    workdir = new Workdir(root);
  });
  after(() => rmSync(top, { recursive: true, force: true }));

  it("refuses ../ and absolute paths outside the workdir, and symlinks that lead out", async () => {
    for (
      const path of [
        "../secret.txt",
        "src/../../secret.txt",
        join(top, "secret.txt"),
        "escape.txt",
        "escape-dir/secret.txt",
        "escape-dir/new.txt",
      ]
    ) {
      await assert.rejects(workdir.resolve(path), PathOutsideWorkdirError, path);
      await assert.rejects(readTool({ path }, workdir), FileToolError, path);
      await assert.rejects(writeTool({ path, content: "x" }, workdir), FileToolError, path);
    }
    assert.equal(readFileSync(join(top, "secret.txt"), "utf8"), "outside\n");
    // A symlink that stays inside is fine, and so is an absolute path inside.
    assert.equal((await readTool({ path: "inside-link.md" }, workdir)).total_lines, 4);
    assert.equal((await readTool({ path: join(root, "notes.md") }, workdir)).total_lines, 4);
  });

  it("read: lines by 1-based offset and limit", async () => {
    assert.deepEqual(await readTool({ path: "notes.md", offset: 2, limit: 2 }, workdir), {
      content: "line 2\nline 3",
      start_line: 2,
      total_lines: 4,
      truncated: true,
    });
    assert.deepEqual(await readTool({ path: "notes.md" }, workdir), {
      content: "line 1\nline 2\nline 3\nline 4",
      start_line: 1,
      total_lines: 4,
    });
    await assert.rejects(readTool({ path: "missing.txt" }, workdir), /no such file/);
  });

  it("write: creates directories, reports created and bytes", async () => {
    const first = await writeTool({ path: "out/new/é.txt", content: "héllo" }, workdir);
    assert.equal(first.bytes_written, 6);
    assert.equal(first.created, true);
    const second = await writeTool({ path: "out/new/é.txt", content: "x" }, workdir);
    assert.equal(second.created, undefined);
    assert.equal(readFileSync(join(root, "out/new/é.txt"), "utf8"), "x");
  });

  it("edit: exactly one match unless replace_all", async () => {
    writeFileSync(join(root, "e.txt"), "foo bar foo $& baz");
    await assert.rejects(
      editTool({ path: "e.txt", old_string: "foo", new_string: "x" }, workdir),
      /occurs 2 times/,
    );
    await assert.rejects(
      editTool({ path: "e.txt", old_string: "nope", new_string: "x" }, workdir),
      /not found/,
    );
    assert.equal(
      (await editTool({ path: "e.txt", old_string: "bar", new_string: "$&$&" }, workdir))
        .replacements,
      1,
    );
    assert.equal(
      readFileSync(join(root, "e.txt"), "utf8"),
      "foo $&$& foo $& baz",
      "no $-pattern expansion",
    );
    assert.equal(
      (await editTool(
        { path: "e.txt", old_string: "foo", new_string: "q", replace_all: true },
        workdir,
      )).replacements,
      2,
    );
    assert.equal(readFileSync(join(root, "e.txt"), "utf8"), "q $&$& q $& baz");
  });

  it("glob: ** and name patterns, never through symlinked directories", async () => {
    const all = await globTool({ pattern: "**/*.ts" }, workdir);
    assert.deepEqual([...all.files].sort(), ["src/a.ts", "src/deep/b.ts"]);
    assert.deepEqual((await globTool({ pattern: "*.ts", path: "src" }, workdir)).files.sort(), [
      "a.ts",
      "deep/b.ts",
    ]);
    assert.deepEqual((await globTool({ pattern: "src/*.ts" }, workdir)).files, ["src/a.ts"]);
    assert.deepEqual((await globTool({ pattern: "**/*.{md,dat}" }, workdir)).files.sort(), [
      "bin.dat",
      "notes.md",
    ]);
    assert.ok(
      !(await globTool({ pattern: "**/*" }, workdir)).files.some((f) => f.includes("secret")),
    );
    assert.ok(globToRegExp("a?c").test("abc") && !globToRegExp("a?c").test("a/c"));
  });

  it("grep: regex lines in file order, glob filter, case-insensitivity, max_results, binaries skipped", async () => {
    const todo = await grepTool({ pattern: "todo", case_insensitive: true }, workdir);
    assert.deepEqual(todo.matches.map((m) => `${m.path}:${m.line}`), [
      "src/a.ts:2",
      "src/deep/b.ts:1",
    ]);
    assert.equal((await grepTool({ pattern: "todo" }, workdir)).matches.length, 1);
    assert.equal((await grepTool({ pattern: "TODO", glob: "*.md" }, workdir)).matches.length, 0);
    const capped = await grepTool({ pattern: "line", max_results: 2 }, workdir);
    assert.equal(capped.matches.length, 2);
    assert.equal(capped.truncated, true);
    assert.equal((await grepTool({ pattern: "TODO", path: "bin.dat" }, workdir)).matches.length, 0);
    await assert.rejects(grepTool({ pattern: "(" }, workdir), FileToolError);
    await assert.rejects(grepTool({ pattern: "x", path: "../" }, workdir), FileToolError);
  });
});
