/**
 * Runs the whole suite on Node, Deno and Bun, one runtime after the other, then the
 * conformance matrix (tests/conformance/, which starts its own processes on every runtime, so
 * it runs once, from Node) and prints its table, and one summary line per stage. Fails when any
 * stage fails or runs zero tests (Node 20 does not discover .ts files and would otherwise pass
 * silently).
 *
 *   tsx scripts/test.ts [--only node,deno,bun,conformance] [file-filter...]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { failedTests, type Runner } from "./test-failures.ts";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));
const bin = (name: string) => join(root, "node_modules/.bin", name);

function findTests(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...findTests(path));
    else if (entry.endsWith(".test.ts")) out.push(path);
  }
  return out.sort();
}

/** The conformance suite: run once, as its own stage (it spawns every runtime itself). */
const CONFORMANCE_DIR = "tests/conformance/";

/** How long one runtime's whole suite may take before it is killed and counted as failed. */
const RUNTIME_LIMIT_S = Number(process.env.BMA_TEST_RUNTIME_LIMIT_S ?? 420);

interface Outcome {
  runtime: string;
  passed: number;
  failed: number;
  exitCode: number;
  seconds: number;
  /** Everything it printed, colour removed: read again for the failed tests' names. */
  output: string;
}

/** How many failed tests of one stage the summary shows, each with the first lines of its error. */
const MAX_FAILURES_SHOWN = 12;

/**
 * The failed tests of a stage that failed, or the end of its output when no test is named (a
 * crash, or a run killed at the limit): printed beside the summary so a log's tail says why.
 */
function failureReport(o: Outcome, runner: Runner): string[] {
  const failures = failedTests(runner, o.output);
  if (failures.length === 0) {
    return [
      `${o.runtime}: no failed test named; the end of its output:`,
      ...o.output
        .trimEnd().split("\n").slice(-20).map((line) => `  ${line}`),
    ];
  }
  const lines = failures.slice(0, MAX_FAILURES_SHOWN).flatMap((f) => [
    `${o.runtime}: ✖ ${f.name}`,
    ...f.error.map((line) => `    ${line.trim()}`),
  ]);
  if (failures.length > MAX_FAILURES_SHOWN) {
    lines.push(`${o.runtime}: … and ${failures.length - MAX_FAILURES_SHOWN} more failed tests`);
  }
  return lines;
}

function run(
  runtime: string,
  command: string,
  args: string[],
  parse: (out: string) => [number, number],
  env: Record<string, string> = {},
): Promise<Outcome> {
  const started = performance.now();
  return new Promise((done) => {
    const child = spawn(command, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0", ...env },
    });
    let out = "";
    const collect = (chunk: Buffer) => {
      const text = chunk.toString();
      out += text;
      process.stdout.write(text);
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    // A hung runtime must not hang CI: node:test timeouts are not enforced alike everywhere.
    const limit = setTimeout(() => {
      out += `\n${runtime}: killed after ${RUNTIME_LIMIT_S} s\n`;
      console.error(`${runtime}: killed after ${RUNTIME_LIMIT_S} s`);
      child.kill("SIGKILL");
    }, RUNTIME_LIMIT_S * 1000);
    child.on("close", (code) => {
      clearTimeout(limit);
      // deno-lint-ignore no-control-regex
      const output = out.replace(/\x1b\[[0-9;]*m/g, "");
      const [passed, failed] = parse(output);
      done({
        runtime,
        passed,
        failed,
        exitCode: code ?? 1,
        seconds: (performance.now() - started) / 1000,
        output,
      });
    });
  });
}

const last = (text: string, pattern: RegExp): number => {
  const all = [...text.matchAll(pattern)];
  return all.length ? Number(all[all.length - 1][1]) : 0;
};

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  let only = ["node", "deno", "bun", "conformance"];
  const onlyAt = argv.indexOf("--only");
  if (onlyAt >= 0) {
    only = argv[onlyAt + 1].split(",");
    argv.splice(onlyAt, 2);
  }
  let files = findTests(join(root, "tests"));
  if (argv.length) files = files.filter((f) => argv.some((a) => f.includes(a)));
  const isConformance = (f: string) => relative(root, f).startsWith(CONFORMANCE_DIR);
  const conformance = only.includes("conformance") && files.some(isConformance);
  const rel = files.filter((f) => !isConformance(f)).map((f) => "./" + relative(root, f));
  const runtimes = rel.length > 0 ? only : [];
  if (rel.length === 0 && !conformance) {
    console.error("no test files found");
    process.exit(1);
  }
  const outcomes: Outcome[] = [];
  if (runtimes.includes("node")) {
    outcomes.push(
      await run("node", process.execPath, [
        "--import",
        "tsx",
        "--test",
        "--test-reporter=spec",
        "--test-concurrency=1",
        ...rel,
      ], (out) => [
        last(out, /^ℹ pass (\d+)/gm),
        // A test cancelled by its parent's timeout failed too.
        last(out, /^ℹ fail (\d+)/gm) + last(out, /^ℹ cancelled (\d+)/gm),
      ]),
    );
  }
  if (runtimes.includes("deno")) {
    outcomes.push(
      await run("deno", bin("deno"), ["test", "-A", "--no-prompt", ...rel], (out) => {
        const m = [
          ...out.matchAll(
            /^(?:ok|FAILED) \| (\d+) passed(?: \((\d+) steps?\))? \| (\d+) failed(?: \((\d+) steps?\))?/gm,
          ),
        ].pop();
        return m ? [Number(m[2] ?? m[1]), Number(m[4] ?? m[3])] : [0, 0];
      }),
    );
  }
  if (runtimes.includes("bun")) {
    outcomes.push(
      await run("bun", bin("bun"), ["test", "--timeout", "120000", ...rel], (out) => [
        last(out, /^\s*(\d+) pass$/gm),
        last(out, /^\s*(\d+) fail$/gm),
      ]),
    );
  }
  let table = "";
  if (conformance) {
    const dir = mkdtempSync(join(tmpdir(), "bma-conformance-"));
    const results = join(dir, "results.json");
    const files = [`./${CONFORMANCE_DIR}conformance.test.ts`];
    outcomes.push(
      await run("conformance", process.execPath, [
        "--import",
        "tsx",
        "--test",
        "--test-reporter=spec",
        ...files,
      ], (out) => [
        last(out, /^ℹ pass (\d+)/gm),
        last(out, /^ℹ fail (\d+)/gm) + last(out, /^ℹ cancelled (\d+)/gm),
      ], { BMA_CONFORMANCE_RESULTS: results }),
    );
    try {
      const { renderTable } = await import("../tests/conformance/matrix.ts");
      const data = JSON.parse(readFileSync(results, "utf8"));
      table = renderTable(data.cells, data.scenarios, data.results);
    } catch (error) {
      table = `conformance: no results (${(error as Error).message.split("\n")[0]})`;
    }
    rmSync(dir, { recursive: true, force: true });
  }
  if (table) console.log(`\n${table}`);
  const isGood = (o: Outcome) => o.exitCode === 0 && o.failed === 0 && o.passed > 0;
  const report = outcomes.filter((o) => !isGood(o)).flatMap((o) =>
    failureReport(o, o.runtime === "conformance" ? "node" : o.runtime as Runner)
  );
  if (report.length) console.log(`\n== failed tests ==\n${report.join("\n")}`);
  console.log("\n== test summary ==");
  let ok = true;
  for (const o of outcomes) {
    const good = isGood(o);
    ok &&= good;
    console.log(
      `${o.runtime}: ${o.passed} passed, ${o.failed} failed (exit ${o.exitCode}, ${
        o.seconds.toFixed(1)
      } s)${good ? "" : "  <-- FAILED"}`,
    );
  }
  const passed = outcomes.reduce((n, o) => n + o.passed, 0);
  const failed = outcomes.reduce(
    (n, o) => n + o.failed + (o.exitCode !== 0 && o.failed === 0 ? 1 : 0),
    0,
  );
  console.log(`total: ${passed} passed, ${failed} failed`);
  process.exit(ok ? 0 : 1);
}

main();
