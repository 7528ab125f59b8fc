/**
 * The failed tests of one runtime's run, each with the first lines of its error, read from the
 * runner's own output. scripts/test.ts prints them beside the summary, because a CI log is often
 * read from its tail only, and the tail must say which test failed and why.
 */

export interface FailedTest {
  /** The test's name, its suites first, as the runner prints it. */
  name: string;
  /** The first lines of its error, without source excerpts, colour or blank lines. */
  error: string[];
}

/** The runners this reads: node:test's spec reporter, `deno test`, `bun test`. */
export type Runner = "node" | "deno" | "bun";

const MAX_ERROR_LINES = 8;

// deno-lint-ignore no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

function trimError(lines: string[]): string[] {
  return lines
    .map((line) => line.replace(/\s+$/, ""))
    .filter((line) =>
      line.trim() !== "" &&
      // Bun and Deno print the source around the failure: the error and stack say enough.
      !/^\s*\d+ \|(?: |$)/.test(line) && !/^\s*\^$/.test(line) &&
      // The runners' own frames and assertion bookkeeping say nothing of the test.
      !/^\s*at (?:.*\()?(?:node:|ext:)/.test(line) && !/^\s*(?:generatedMessage|diff):/.test(line)
    )
    .slice(0, MAX_ERROR_LINES);
}

/** Bun prints each failed test's error, then `(fail) suite > name [ms]`. */
function bunFailures(lines: string[]): FailedTest[] {
  const failures: FailedTest[] = [];
  let start = 0;
  let file = "";
  // With more than one file, Bun lists the failed tests again at the end, without their errors.
  const end = lines.findIndex((line) => /^\d+ tests? failed:$/.test(line));
  lines.slice(0, end < 0 ? lines.length : end).forEach((line, i) => {
    const fail = /^\(fail\) (.*)$/.exec(line);
    if (fail) {
      const name = file ? `${fail[1]} (${file})` : fail[1];
      failures.push({ name, error: trimError(lines.slice(start, i)) });
    }
    const header = /^(\S.*\.test\.ts):$/.exec(line);
    if (header) file = header[1];
    if (fail || header || /^\((?:pass|skip|todo)\) /.test(line)) start = i + 1;
  });
  return failures;
}

/** Deno prints ` ERRORS `, each failure as `name => location` then its error, then ` FAILURES `. */
function denoFailures(lines: string[]): FailedTest[] {
  const from = lines.findIndex((line) => line.trim() === "ERRORS");
  if (from < 0) return [];
  let to = lines.findIndex((line, i) => i > from && line.trim() === "FAILURES");
  if (to < 0) to = lines.length;
  const failures: FailedTest[] = [];
  let current: { name: string; body: string[] } | undefined;
  const flush = () => {
    if (current) failures.push({ name: current.name, error: trimError(current.body) });
  };
  for (const line of lines.slice(from + 1, to)) {
    const head = /^(\S.*?) => \S+$/.exec(line);
    if (head) {
      flush();
      current = { name: head[1], body: [] };
    } else current?.body.push(line);
  }
  flush();
  return failures;
}

/** node:test's spec reporter ends with `✖ failing tests:`, each as `test at file`, `✖ name`, error. */
function nodeFailures(lines: string[]): FailedTest[] {
  const from = lines.findIndex((line) => line.startsWith("✖ failing tests:"));
  if (from < 0) return [];
  const failures: FailedTest[] = [];
  let current: { name: string; body: string[] } | undefined;
  let at = "";
  const flush = () => {
    if (current) failures.push({ name: current.name, error: trimError(current.body) });
  };
  for (const line of lines.slice(from + 1)) {
    const location = /^test at (.+)$/.exec(line);
    if (location) {
      flush();
      current = undefined;
      at = location[1];
      continue;
    }
    const head = /^✖ (.*)$/.exec(line);
    if (head && !current) current = { name: at ? `${head[1]} (${at})` : head[1], body: [] };
    else current?.body.push(line);
  }
  flush();
  return failures;
}

/** The failed tests in one runner's output, in the order it printed them. */
export function failedTests(runner: Runner, output: string): FailedTest[] {
  const lines = output.replace(ANSI, "").split(/\r?\n/);
  if (runner === "bun") return bunFailures(lines);
  if (runner === "deno") return denoFailures(lines);
  return nodeFailures(lines);
}
