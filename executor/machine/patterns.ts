/**
 * Patterns a caller supplies (grep's regular expression, glob and grep's globs), compiled so
 * that matching takes time linear in the input: regular expressions run on RE2 (`re2js`, no
 * backtracking), and globs are parsed by `picomatch` into an expression that runs on RE2 as
 * well, since picomatch's own JavaScript RegExp backtracks (`*a*a*a*a*b` against a long name
 * takes seconds). Constructs only a backtracking engine has (lookaround, backreferences,
 * negated globs) are refused with a {@linkcode PatternError}.
 */
import picomatch from "picomatch";
import { RE2JS } from "re2js";

/** A pattern that cannot be compiled, or would cost too much to run. */
export class PatternError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PatternError";
  }
}

/** Longest pattern accepted, in characters. */
export const MAX_PATTERN_LENGTH = 4_096;

/**
 * Largest compiled program accepted (RE2's measure of a pattern's cost): matching time is
 * linear in the input with a factor that grows with it; the patterns people write stay far
 * below (a few hundred for `\w{100}`-sized repetitions).
 */
export const MAX_PROGRAM_SIZE = 2_000;

/** A compiled line matcher. */
export interface LineMatcher {
  /** Whether the pattern matches anywhere in `text`. */
  test(text: string): boolean;
}

/** Compiles a regular expression in JavaScript/ripgrep syntax for RE2. */
export function compileRegex(
  pattern: string,
  options: { caseInsensitive?: boolean } = {},
): LineMatcher {
  checkLength(pattern);
  if (/\\k<|\\[1-9]/.test(pattern)) {
    throw new PatternError("backreferences are not supported (the engine runs in linear time)");
  }
  const flags = options.caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0;
  let regex: RE2JS;
  try {
    regex = RE2JS.compile(pattern, flags);
  } catch (first) {
    // JavaScript-only spellings (\uXXXX, \u{...}, a bare `/`) have RE2 equivalents.
    try {
      regex = RE2JS.compile(RE2JS.translateRegExp(pattern), flags);
    } catch {
      throw new PatternError(`invalid pattern: ${describe(first)}`);
    }
  }
  checkProgram(regex);
  return regex;
}

/**
 * Compiles a glob for `/`-separated relative paths: `**` any depth, `*` and `?` within one
 * segment, `{a,b}` alternatives, `[...]` classes; dot files match like any other. A pattern
 * without `/` matches the file name at any depth (`*.ts` finds `src/a.ts`), as agent tool sets
 * do.
 */
export function compileGlob(pattern: string): (path: string) => boolean {
  checkLength(pattern);
  // No path holds a NUL, and picomatch reads one as its own marker ("*\0*" matched every path).
  if (pattern.includes("\0")) throw new PatternError("invalid glob: it contains a NUL byte");
  const baseName = !pattern.includes("/");
  let source: string;
  try {
    source = picomatch.makeRe(pattern, { dot: true, windows: false }).source;
  } catch (error) {
    throw new PatternError(`invalid glob: ${describe(error)}`);
  }
  let regex: RE2JS;
  try {
    regex = RE2JS.compile(withoutSegmentGuards(source));
  } catch {
    throw new PatternError(
      `unsupported glob (negations, "!(…)" or a leading "!", are not supported): ${pattern}`,
    );
  }
  checkProgram(regex);
  return baseName
    ? (path) => regex.testExact(path.slice(path.lastIndexOf("/") + 1))
    : (path) => regex.testExact(path);
}

/**
 * The leading directory of a glob that has no wildcard (`src/lib` for `src/lib/**\/*.ts`):
 * where a walk may start. `""` when the pattern matches at any depth or starts with a wildcard.
 */
export function globBase(pattern: string): string {
  if (!pattern.includes("/")) return "";
  const { base } = picomatch.scan(pattern);
  return base === "." ? "" : base;
}

/**
 * picomatch guards each segment with lookaheads that keep `*` and `**` from matching an empty
 * segment, `.` or `..`. The walker's relative paths never contain such segments, so for them
 * each guard always holds and dropping it changes no answer; what is left is regular.
 */
function withoutSegmentGuards(source: string): string {
  return source
    .replaceAll("(?:(?!(?:^|\\/)\\.{1,2}(?:\\/|$)).)*?", "(?:.)*?")
    .replaceAll("(?:(?!(?:^|\\/)\\.).)*?", "(?:.)*?")
    .replaceAll("(?!(?:^|\\/)\\.{1,2}(?:\\/|$))", "")
    .replaceAll("(?!\\.{0,1}(?:\\/|$))", "")
    .replaceAll("(?!\\.{1,2}(?:\\/|$))", "")
    .replaceAll("(?=.)", "");
}

function checkLength(pattern: string): void {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw new PatternError(`pattern longer than ${MAX_PATTERN_LENGTH} characters`);
  }
}

function checkProgram(regex: RE2JS): void {
  if (regex.programSize() > MAX_PROGRAM_SIZE) {
    throw new PatternError("pattern too complex (repetition counts too large)");
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
