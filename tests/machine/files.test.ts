/**
 * The file tools (`read`, `write`, `edit`, `glob`, `grep`) through the wire: a `Harness` over a
 * real WebSocket calls `session.tools.<name>.call(...)` on an executor serving `serveMachine`
 * on a real temp workdir with real symlinks, FIFOs and escapes beside it.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { Fixtures, machineSession, type MachineSessionOptions } from "./files-fixture.ts";
import { PathOutsideWorkdirError, Workdir } from "../../executor/machine/workdir.node.ts";

const SECRET = "outside secret\n";

describe("file tools on the wire", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  /** A session whose workdir has sources, links in and out, and a secret beside it. */
  async function tree(options: MachineSessionOptions = {}) {
    const machine = await machineSession(fx, options);
    const { top, root } = machine;
    mkdirSync(join(top, "outside"));
    writeFileSync(join(top, "outside/secret.txt"), SECRET);
    mkdirSync(join(root, "src/deep"), { recursive: true });
    writeFileSync(join(root, "src/a.ts"), "export const a = 1;\n// TODO one\n");
    writeFileSync(join(root, "src/deep/b.ts"), "export const b = 2; // todo two\n");
    writeFileSync(join(root, "notes.md"), "line 1\nline 2\nline 3\nline 4\n");
    writeFileSync(join(root, "bin.dat"), new Uint8Array([0, 1, 2, 84, 79, 68, 79]));
    symlinkSync(join(top, "outside/secret.txt"), join(root, "escape.txt"));
    symlinkSync("../outside", join(root, "escape-dir"));
    symlinkSync("../outside/not-yet.txt", join(root, "dangling-out"));
    symlinkSync("made-through-link.txt", join(root, "dangling-in"));
    symlinkSync("notes.md", join(root, "inside-link.md"));
    symlinkSync("src", join(root, "src-link"));
    return machine;
  }

  function outsideUntouched(top: string) {
    assert.equal(readFileSync(join(top, "outside/secret.txt"), "utf8"), SECRET);
    assert.deepEqual(readdirSync(join(top, "outside")), ["secret.txt"]);
  }

  it("refuses paths outside the workdir (../, absolute, symlinks out, dangling links out) as tool errors", async () => {
    const { top, session } = await tree();
    for (
      const path of [
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        join(top, "outside/secret.txt"),
        "escape.txt",
        "escape-dir/secret.txt",
        "escape-dir/new.txt",
        "dangling-out",
        "src-link/../../outside/secret.txt",
      ]
    ) {
      const read = await session.tools.read.call({ path });
      assert.equal(read.is_error, true, `read ${path}`);
      assert.doesNotMatch(JSON.stringify(read.content), /outside secret/);
      const write = await session.tools.write.call({ path, content: "pwned" });
      assert.equal(write.is_error, true, `write ${path}`);
      const edit = await session.tools.edit.call({
        path,
        old_string: "outside",
        new_string: "pwned",
      });
      assert.equal(edit.is_error, true, `edit ${path}`);
    }
    for (const path of ["..", "escape-dir", join(top, "outside")]) {
      assert.equal((await session.tools.glob.call({ pattern: "**", path })).is_error, true, path);
      assert.equal(
        (await session.tools.grep.call({ pattern: "secret", path })).is_error,
        true,
        path,
      );
    }
    outsideUntouched(top);
  });

  it("a dangling symlink is written inside when it points inside, refused when it points out", async () => {
    const { top, root, session } = await tree();
    const refused = await session.tools.write.call({ path: "dangling-out", content: "x" });
    assert.equal(refused.is_error, true);
    assert.equal(existsSync(join(top, "outside/not-yet.txt")), false);
    const written = await session.tools.write.call({ path: "dangling-in", content: "hello" });
    assert.equal(written.is_error, false);
    assert.equal(written.structured_content?.created, true);
    assert.equal(readFileSync(join(root, "made-through-link.txt"), "utf8"), "hello");
    assert.equal(statSync(join(root, "dangling-in")).isFile(), true, "the link stays a link to it");
    outsideUntouched(top);
  });

  it("symlinks that stay inside are followed, and absolute paths inside are fine", async () => {
    const { root, session } = await tree();
    assert.equal(
      (await session.tools.read.call({ path: "inside-link.md" })).structured_content?.total_lines,
      4,
    );
    assert.equal(
      (await session.tools.read.call({ path: join(root, "notes.md") })).structured_content
        ?.total_lines,
      4,
    );
    const viaLink = await session.tools.read.call({ path: "src-link/deep/b.ts" });
    assert.match(viaLink.structured_content!.content, /const b/);
    const edited = await session.tools.edit.call({
      path: "src-link/a.ts",
      old_string: "a = 1",
      new_string: "a = 10",
    });
    assert.equal(edited.is_error, false);
    assert.match(readFileSync(join(root, "src/a.ts"), "utf8"), /a = 10/);
  });

  it("read: lines by 1-based offset and limit, total_lines, truncated; missing, directory and FIFO are tool errors", async () => {
    const { root, session } = await tree();
    assert.deepEqual(
      (await session.tools.read.call({ path: "notes.md", offset: 2, limit: 2 }))
        .structured_content,
      { content: "line 2\nline 3", start_line: 2, total_lines: 4, truncated: true },
    );
    assert.deepEqual((await session.tools.read.call({ path: "notes.md" })).structured_content, {
      content: "line 1\nline 2\nline 3\nline 4",
      start_line: 1,
      total_lines: 4,
    });
    writeFileSync(join(root, "no-newline.txt"), "a\n\nc");
    assert.deepEqual(
      (await session.tools.read.call({ path: "no-newline.txt" })).structured_content,
      { content: "a\n\nc", start_line: 1, total_lines: 3 },
    );
    const missing = await session.tools.read.call({ path: "missing.txt" });
    assert.equal(missing.is_error, true);
    assert.match(JSON.stringify(missing.content), /no such file/);
    assert.equal((await session.tools.read.call({ path: "src" })).is_error, true);
    // A FIFO with no writer would block an open for reading: it is refused instead.
    execFileSync("mkfifo", [join(root, "pipe")]);
    const fifo = await session.tools.read.call({ path: "pipe" });
    assert.equal(fifo.is_error, true);
    assert.match(JSON.stringify(fifo.content), /not a regular file/);
    assert.equal(
      (await session.tools.grep.call({ pattern: "x", path: "pipe" })).is_error,
      true,
    );
  });

  it("read: content is bounded; a line across the bound ends it with truncated", async () => {
    const { root, session } = await tree({ serve: { limits: { readBytes: 100 } } });
    writeFileSync(join(root, "long.txt"), `${"x".repeat(60)}\n${"y".repeat(60)}\nz\n`);
    const read = await session.tools.read.call({ path: "long.txt" });
    assert.deepEqual(read.structured_content, {
      content: "x".repeat(60),
      start_line: 1,
      total_lines: 3,
      truncated: true,
    });
    // UTF-8 split over the 64 KiB read chunks decodes whole.
    writeFileSync(join(root, "wide.txt"), "é".repeat(40_000));
    const { structured_content: wide } = await session.tools.read.call({ path: "wide.txt" });
    assert.equal(wide?.truncated, true);
    assert.equal(wide?.content, "é".repeat(50), "a first line over the bound: its start");
  });

  it("write: creates directories, reports created and bytes, keeps an existing file's mode", async () => {
    const { root, session } = await tree();
    const first = await session.tools.write.call({ path: "out/new/é.txt", content: "héllo" });
    assert.equal(first.structured_content?.bytes_written, 6);
    assert.equal(first.structured_content?.created, true);
    assert.equal(first.structured_content?.path, join(root, "out/new/é.txt"));
    chmodSync(join(root, "out/new/é.txt"), 0o751);
    const second = await session.tools.write.call({ path: "out/new/é.txt", content: "x" });
    assert.equal(second.structured_content?.created, undefined);
    assert.equal(readFileSync(join(root, "out/new/é.txt"), "utf8"), "x");
    assert.equal(statSync(join(root, "out/new/é.txt")).mode & 0o777, 0o751);
    assert.deepEqual(readdirSync(join(root, "out/new")), ["é.txt"], "no temporary file is left");
    assert.equal((await session.tools.write.call({ path: "src", content: "x" })).is_error, true);
    assert.equal(
      (await session.tools.write.call({ path: "notes.md/x", content: "x" })).is_error,
      true,
    );
  });

  it("edit: exactly one match unless replace_all, no $-pattern expansion", async () => {
    const { root, session } = await tree();
    writeFileSync(join(root, "e.txt"), "foo bar foo $& baz");
    const twice = await session.tools.edit.call({
      path: "e.txt",
      old_string: "foo",
      new_string: "x",
    });
    assert.equal(twice.is_error, true);
    assert.match(JSON.stringify(twice.content), /occurs 2 times/);
    const none = await session.tools.edit.call({
      path: "e.txt",
      old_string: "nope",
      new_string: "x",
    });
    assert.match(JSON.stringify(none.content), /not found/);
    const once = await session.tools.edit.call({
      path: "e.txt",
      old_string: "bar",
      new_string: "$&$&",
    });
    assert.equal(once.structured_content?.replacements, 1);
    assert.equal(readFileSync(join(root, "e.txt"), "utf8"), "foo $&$& foo $& baz");
    const all = await session.tools.edit.call({
      path: "e.txt",
      old_string: "foo",
      new_string: "q",
      replace_all: true,
    });
    assert.equal(all.structured_content?.replacements, 2);
    assert.equal(readFileSync(join(root, "e.txt"), "utf8"), "q $&$& q $& baz");
  });

  it("edit: changes no byte outside the edit: a BOM is kept, a file not UTF-8 refused", async () => {
    const { root, session } = await tree();
    const bom = Buffer.from("\ufeffhello world\n", "utf8");
    writeFileSync(join(root, "bom.txt"), bom);
    const edited = await session.tools.edit.call({
      path: "bom.txt",
      old_string: "world",
      new_string: "there",
    });
    assert.equal(edited.structured_content?.replacements, 1);
    assert.equal(
      readFileSync(join(root, "bom.txt")).toString("hex"),
      "efbbbf" + Buffer.from("hello there\n").toString("hex"),
    );
    const latin1 = Buffer.from("636166e9204142430a", "hex"); // "café ABC" in Latin-1
    writeFileSync(join(root, "latin1.txt"), latin1);
    const refused = await session.tools.edit.call({
      path: "latin1.txt",
      old_string: "ABC",
      new_string: "XYZ",
    });
    assert.equal(refused.is_error, true);
    assert.match(JSON.stringify(refused.content), /is not UTF-8 text/);
    assert.deepEqual(readFileSync(join(root, "latin1.txt")), latin1);
  });

  it("glob: ** and name patterns, most recent first, never through symlinks", async () => {
    const { root, session } = await tree();
    const glob = async (pattern: string, path?: string) =>
      (await session.tools.glob.call({ pattern, ...(path ? { path } : {}) })).structured_content!;
    assert.deepEqual((await glob("**/*.ts")).files.sort(), ["src/a.ts", "src/deep/b.ts"]);
    assert.deepEqual((await glob("*.ts", "src")).files.sort(), ["a.ts", "deep/b.ts"]);
    assert.deepEqual((await glob("src/*.ts")).files, ["src/a.ts"]);
    assert.deepEqual((await glob("**/*.{md,dat}")).files.sort(), ["bin.dat", "notes.md"]);
    assert.deepEqual((await glob("a?.ts", "src")).files, []);
    assert.deepEqual((await glob("?.ts", "src")).files.sort(), ["a.ts", "deep/b.ts"]);
    assert.deepEqual((await glob("./?.ts", "src")).files, ["a.ts"]);
    const everything = (await glob("**/*")).files;
    assert.ok(!everything.some((f) => f.includes("secret") || f.startsWith("src-link")));
    assert.ok(!everything.includes("escape.txt") && !everything.includes("inside-link.md"));
    // Most recently modified first.
    writeFileSync(join(root, "src/deep/b.ts"), "newer\n");
    const future = new Date(Date.now() + 60_000);
    execFileSync("touch", ["-m", "-d", future.toISOString(), join(root, "src/deep/b.ts")]);
    assert.deepEqual((await glob("**/*.ts")).files, ["src/deep/b.ts", "src/a.ts"]);
    // Via a link inside the root as the searched directory.
    assert.deepEqual((await glob("*.ts", "src-link")).files.sort(), ["a.ts", "deep/b.ts"]);
  });

  it("glob: a backtracking-prone pattern answers, negations are refused, the walk is bounded", async () => {
    const { root, session } = await tree({ serve: { limits: { walkEntries: 50 } } });
    mkdirSync(join(root, "many"));
    for (let i = 0; i < 80; i++) writeFileSync(join(root, `many/${"a".repeat(200)}${i}`), "");
    // picomatch's own RegExp takes seconds per name here; the linear engine does not.
    const slow = await session.tools.glob.call({ pattern: "*a*a*a*a*a*a*a*a*a*a*b" });
    assert.equal(slow.is_error, false);
    assert.deepEqual(slow.structured_content?.files, []);
    assert.equal(slow.structured_content?.truncated, true, "50 entries looked at, then stopped");
    const negated = await session.tools.glob.call({ pattern: "!*.ts" });
    assert.equal(negated.is_error, true);
  });

  it("grep: regex lines in file order, glob filter, case-insensitivity, max_results, binaries skipped", async () => {
    const { session } = await tree();
    const grep = async (input: Parameters<typeof session.tools.grep.call>[0]) =>
      (await session.tools.grep.call(input)).structured_content!;
    const todo = await grep({ pattern: "todo", case_insensitive: true });
    assert.deepEqual(todo.matches.map((m) => `${m.path}:${m.line}`), [
      "src/a.ts:2",
      "src/deep/b.ts:1",
    ]);
    assert.equal((await grep({ pattern: "todo" })).matches.length, 1);
    assert.equal((await grep({ pattern: "TODO", glob: "*.md" })).matches.length, 0);
    assert.equal((await grep({ pattern: "TODO", glob: "src/**" })).matches.length, 1);
    const capped = await grep({ pattern: "line", max_results: 2 });
    assert.equal(capped.matches.length, 2);
    assert.equal(capped.truncated, true);
    // A binary file is skipped in a walk (bin.dat holds a TODO after a NUL byte), and named
    // alone is a tool error, not an empty answer.
    assert.ok(!(await grep({ pattern: "TODO" })).matches.some((m) => m.path === "bin.dat"));
    const binary = await session.tools.grep.call({ pattern: "TODO", path: "bin.dat" });
    assert.equal(binary.is_error, true);
    assert.match(JSON.stringify(binary.content), /bin\.dat is a binary file/);
    // Paths are relative to the searched directory; a single file is named from the workdir.
    assert.deepEqual((await grep({ pattern: "todo", path: "src/deep" })).matches, [
      { path: "b.ts", line: 1, text: "export const b = 2; // todo two" },
    ]);
    assert.deepEqual((await grep({ pattern: "line 3", path: "inside-link.md" })).matches, [
      { path: "notes.md", line: 3, text: "line 3" },
    ]);
    assert.equal((await grep({ pattern: "\\d+ \\w+", path: "notes.md" })).matches.length, 0);
    assert.equal((await grep({ pattern: "line \\d$", path: "notes.md" })).matches.length, 4);
    // The secret behind escape.txt and escape-dir is never searched.
    assert.deepEqual((await grep({ pattern: "secret" })).matches, []);
    for (const pattern of ["(", "(?=x)", "(a)\\1", "x{1001}"]) {
      const refused = await session.tools.grep.call({ pattern });
      assert.equal(refused.is_error, true, pattern);
    }
    const outside = await session.tools.grep.call({ pattern: "x", path: "../" });
    assert.equal(outside.is_error, true);
  });

  it("grep: max_results and matched line lengths are bounded by the executor", async () => {
    const { root, session } = await tree({
      serve: { limits: { grepResults: 3, grepMatchChars: 10 } },
    });
    writeFileSync(join(root, "lines.txt"), "match 0123456789abcdef\n".repeat(10));
    const found = (await session.tools.grep.call({
      pattern: "match",
      path: "lines.txt",
      max_results: 100,
    })).structured_content!;
    assert.equal(found.matches.length, 3);
    assert.equal(found.truncated, true);
    assert.equal(found.matches[0].text, "match 0123…");
  });

  it("grep: a file over grepFileBytes named alone is a tool error, not an empty answer", async () => {
    const { root, session } = await tree({ serve: { limits: { grepFileBytes: 100 } } });
    mkdirSync(join(root, "big"));
    writeFileSync(join(root, "big/large.txt"), "needle\n".repeat(20));
    writeFileSync(join(root, "big/small.txt"), "needle\n");
    const named = await session.tools.grep.call({ pattern: "needle", path: "big/large.txt" });
    assert.equal(named.is_error, true);
    assert.match(JSON.stringify(named.content), /file too large to grep \(over 100 bytes\)/);
    // Walking a directory, it is skipped (docs/machine.md), the others searched.
    const walked = (await session.tools.grep.call({ pattern: "needle", path: "big" }))
      .structured_content!;
    assert.deepEqual(walked.matches.map((m) => m.path), ["small.txt"]);
  });
});

describe("Workdir without /proc/self/fd (path addressing)", () => {
  it("refuses the same escapes and follows links that stay inside", async () => {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const top = mkdtempSync(join(tmpdir(), "bma-workdir-"));
    try {
      const root = join(top, "work");
      mkdirSync(join(root, "sub"), { recursive: true });
      writeFileSync(join(top, "secret.txt"), SECRET);
      writeFileSync(join(root, "sub/in.txt"), "inside\n");
      symlinkSync(join(top, "secret.txt"), join(root, "out"));
      symlinkSync("..", join(root, "up"));
      symlinkSync("sub", join(root, "sub-link"));
      const workdir = new Workdir(root, { addressing: "path" });
      for (const path of ["out", "up/secret.txt", "../secret.txt", join(top, "secret.txt")]) {
        await assert.rejects(workdir.openFile(path), PathOutsideWorkdirError, path);
        await assert.rejects(workdir.writeFile(path, new Uint8Array(1)), PathOutsideWorkdirError);
      }
      const opened = await workdir.openFile("sub-link/in.txt");
      assert.equal(opened.path, join(await workdir.realRoot(), "sub/in.txt"));
      await opened.file.close();
      assert.equal(await workdir.resolve("sub-link"), join(await workdir.realRoot(), "sub"));
      assert.equal(readFileSync(join(top, "secret.txt"), "utf8"), SECRET);
    } finally {
      rmSync(top, { recursive: true, force: true });
    }
  });
});
