/**
 * The pattern compilers behind grep and glob: globs parsed by picomatch and run on RE2 answer
 * exactly as picomatch does (on the paths a walk produces), and every pattern costs linear time.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import picomatch from "picomatch";
import {
  compileGlob,
  compileRegex,
  globBase,
  PatternError,
} from "../../executor/machine/patterns.ts";

const GLOBS = [
  "**/*.ts",
  "*.ts",
  "src/**/*.{ts,tsx}",
  "a?c",
  "**",
  "*",
  "*/*",
  "node_modules/**",
  "src/*.ts",
  "**/.*",
  ".github/**/*.yml",
  "*.d.ts",
  "**/test/**",
  "[ab]*",
  "[!a]*",
  "a/**/d.md",
  "**/deep/*",
  "{src,test}/**/*.ts",
  "*.+(ts|md)",
  "@(a|x).ts",
  "**/*a*b*",
  "?.*",
  "x/{1..12}/*",
];

/** Relative paths as a walk yields them: no empty, `.` or `..` segments. */
const segment = fc.oneof(
  fc.constantFrom("a", "b", "c", "src", "test", "deep", "x", ".github", "node_modules", "1", "12"),
  fc.stringMatching(/^[a-z.]{1,6}$/).filter((s) => s !== "." && s !== ".."),
  fc.constantFrom("a.ts", "b.tsx", "c.d.ts", ".env", "d.md", "ci.yml", "x.test.ts", "abc"),
);
const relativePath = fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) =>
  parts.join("/")
);

describe("globs on RE2", () => {
  it("answer as picomatch does for generated paths", () => {
    for (const glob of GLOBS) {
      const ours = compileGlob(glob);
      const reference = picomatch(glob, {
        dot: true,
        windows: false,
        basename: !glob.includes("/"),
      });
      fc.assert(
        fc.property(relativePath, (path) => ours(path) === reference(path)),
        { numRuns: 300, seed: 16 },
      );
    }
  });

  it("cost linear time where picomatch backtracks, and refuse negations and NUL bytes", () => {
    const hostile = compileGlob("*a*a*a*a*a*a*a*a*a*a*a*b");
    assert.equal(hostile("a".repeat(250)), false);
    assert.equal(hostile(`${"a".repeat(250)}b`), true);
    for (const glob of ["!*.ts", "!(*.d).ts", "x".repeat(5_000), "*\0*", "a\0b"]) {
      assert.throws(() => compileGlob(glob), PatternError, glob);
    }
  });

  it("name where a walk can start", () => {
    assert.equal(globBase("src/lib/**/*.ts"), "src/lib");
    assert.equal(globBase("**/*.ts"), "");
    assert.equal(globBase("*.ts"), "");
    assert.equal(globBase("{a,b}/*.ts"), "");
  });
});

describe("regular expressions on RE2", () => {
  it("take JavaScript syntax, case-insensitivity, and answer in linear time", () => {
    assert.equal(compileRegex("(a+)+$").test(`${"a".repeat(10_000)}!`), false);
    assert.equal(compileRegex("(a+)+$").test("a".repeat(10_000)), true);
    assert.equal(compileRegex("\\u00e9t\\u00e9").test("un été"), true);
    assert.equal(compileRegex("a/b").test("x a/b"), true);
    assert.equal(compileRegex("todo", { caseInsensitive: true }).test("TODO"), true);
    assert.equal(compileRegex("todo").test("TODO"), false);
    assert.equal(compileRegex("(?<word>\\w+) done").test("work done"), true);
  });

  it("refuse what only a backtracking engine does, and programs too large to run cheaply", () => {
    for (
      const pattern of ["(?=x)", "(?<!x)y", "(a)\\1", "(?<n>a)\\k<n>", "[xy]{0,999}[^xy]", "("]
    ) {
      assert.throws(() => compileRegex(pattern), PatternError, pattern);
    }
  });
});
