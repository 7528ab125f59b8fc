/**
 * Runs the whole suite on Node, Deno and Bun, then reads the conformance matrix
 * (tests/conformance/, which starts its own processes on every runtime, so it runs once, from
 * Node) and prints its table, and one summary line per runtime.
 *
 * Each test file runs on each runtime as a stage of its own (`test-stage.ts`: its own `HOME` and
 * `TMPDIR`, every process it starts ended with it, a process it leaves behind a failure), several
 * stages side by side (`--jobs`), and beside them one more lane of the files that mostly wait (for
 * a workerd eviction, a lease), so that they overlap with files that compute (`test-schedule.ts`,
 * from the CPU each stage used in the last run). On Node, a test file runs built into one module (`test-bundle.ts`: loading the SDK
 * through tsx took most of a Node stage), and so are the programs the tests start as processes;
 * what still starts through tsx shares tsx's cache. Fails when any stage fails, or a runtime runs
 * zero tests (Node 20 does not discover .ts files and would otherwise pass silently).
 *
 *   tsx scripts/test.ts [--only node,deno,bun,conformance] [--jobs N] [--verbose] [filter...]
 *
 * A filter keeps the test files whose path contains it; a filter that is a file's path runs that
 * file whatever its name. `BMA_TEST_JOBS` sets the default of `--jobs`; `BMA_TEST_NODE_TSX=1`
 * runs Node's stages through tsx instead of bundled.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { availableParallelism, homedir, tmpdir } from "node:os";
import { basename, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleTests } from "./test-bundle.ts";
import { readRecords, StageQueue, type StageRecord, writeRecords } from "./test-schedule.ts";
import { failedTests, type Runner } from "./test-failures.ts";
import { ensurePrerequisites } from "./test-prerequisites.ts";
import {
  killAllStages,
  runStage,
  type StageOutcome,
  stagePassed,
  type StageSpec,
} from "./test-stage.ts";

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

/** How long one test file may take on one runtime before it is killed and counted as failed. */
const FILE_LIMIT_S = Number(process.env.BMA_TEST_FILE_LIMIT_S ?? 300);
/** The conformance matrix's limit. */
const CONFORMANCE_LIMIT_S = Number(process.env.BMA_TEST_CONFORMANCE_LIMIT_S ?? 420);

/** How many failed tests of one stage the summary shows, each with the first lines of its error. */
const MAX_FAILURES_SHOWN = 12;

const last = (text: string, pattern: RegExp): number => {
  const all = [...text.matchAll(pattern)];
  return all.length ? Number(all[all.length - 1][1]) : 0;
};

const nodeCounts = (out: string): [number, number] => [
  last(out, /^ℹ pass (\d+)/gm),
  // A test cancelled by its parent's timeout failed too; and a file that ended without its
  // summary (it exited before its tests had run) counts as one failed test.
  last(out, /^ℹ fail (\d+)/gm) + last(out, /^ℹ cancelled (\d+)/gm) +
  (/^ℹ tests \d+/m.test(out) ? 0 : 1),
];

const denoCounts = (out: string): [number, number] => {
  const m = [
    ...out.matchAll(
      /^(?:ok|FAILED) \| (\d+) passed(?: \((\d+) steps?\))? \| (\d+) failed(?: \((\d+) steps?\))?/gm,
    ),
  ].pop();
  return m ? [Number(m[2] ?? m[1]), Number(m[4] ?? m[3])] : [0, 0];
};

const bunCounts = (out: string): [number, number] => [
  last(out, /^\s*(\d+) pass$/gm),
  last(out, /^\s*(\d+) fail$/gm),
];

/**
 * The stage of one test file on one runtime. On Node, `bundle` is the file built by
 * `test-bundle.ts`, run by plain Node; without one, the file runs through tsx.
 */
function fileStage(runtime: Runner, file: string, bundle?: string): Omit<StageSpec, "env"> {
  const base = { name: `${runtime} ${file}`, runtime, cwd: root, limitMs: FILE_LIMIT_S * 1000 };
  switch (runtime) {
    case "node":
      return {
        ...base,
        command: process.execPath,
        // A bundle runs as the program itself: node:test runs its tests in the process and
        // reports them as `--test` does, without a second Node started to run the file.
        args: bundle
          ? ["--enable-source-maps", "--test-reporter=spec", bundle]
          : ["--import", "tsx", "--test", "--test-reporter=spec", file],
        parse: nodeCounts,
      };
    case "deno":
      // Type-checked already, with every other file, by `npm run check` (`deno check .`).
      return {
        ...base,
        command: bin("deno"),
        args: ["test", "-A", "--no-prompt", "--no-check", file],
        parse: denoCounts,
      };
    case "bun":
      return {
        ...base,
        command: bin("bun"),
        args: ["test", "--timeout", "120000", file],
        parse: bunCounts,
      };
  }
}

/**
 * The failed tests of a stage that failed, or the end of its output when no test is named (a
 * crash, or a run killed at the limit), and what it left running: printed beside the summary so
 * a log's tail says why.
 */
function failureReport(o: StageOutcome): string[] {
  const lines: string[] = [];
  const runner = (o.spec.runtime === "conformance" ? "node" : o.spec.runtime) as Runner;
  const failures = failedTests(runner, o.output);
  if (failures.length === 0 && o.leftovers.length === 0) {
    lines.push(
      `${o.spec.name}: no failed test named; the end of its output:`,
      ...o.output.trimEnd().split("\n").slice(-20).map((line) => `  ${line}`),
    );
  }
  for (const f of failures.slice(0, MAX_FAILURES_SHOWN)) {
    lines.push(`${o.spec.name}: ✖ ${f.name}`, ...f.error.map((line) => `    ${line.trim()}`));
  }
  if (failures.length > MAX_FAILURES_SHOWN) {
    lines.push(`${o.spec.name}: … and ${failures.length - MAX_FAILURES_SHOWN} more failed tests`);
  }
  for (const p of o.leftovers) {
    lines.push(`${o.spec.name}: left a process running: pid ${p.pid}: ${p.command}`);
  }
  return lines;
}

/** Seconds each stage took in the last run (a cache in node_modules): the longest start first. */
const TIMINGS = join(root, "node_modules/.cache/bma-test-timings.json");
/**
 * The seconds of a run recorded in the repository, for a checkout that has run nothing yet (a
 * new clone, CI): without an order, the longest files would start last and the run take longer.
 */
const RECORDED_TIMINGS = join(root, "scripts/test-timings.json");

function readTimings(): Map<string, StageRecord> {
  for (const file of [TIMINGS, RECORDED_TIMINGS]) {
    try {
      return readRecords(JSON.parse(readFileSync(file, "utf8")));
    } catch { /* the next one */ }
  }
  return new Map();
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const take = (flag: string): string | undefined => {
    const at = argv.indexOf(flag);
    if (at < 0) return undefined;
    const [, value] = argv.splice(at, 2);
    return value;
  };
  const only = (take("--only") ?? "node,deno,bun,conformance").split(",");
  const jobs = Math.max(
    1,
    Number(take("--jobs") ?? process.env.BMA_TEST_JOBS ?? availableParallelism() + 1),
  );
  const verboseAt = argv.indexOf("--verbose");
  const verbose = verboseAt >= 0;
  if (verbose) argv.splice(verboseAt, 1);

  const explicit = argv.filter((a) => existsSync(resolve(a)) && statSync(resolve(a)).isFile());
  let files = findTests(join(root, "tests"));
  const filters = argv.filter((a) => !explicit.includes(a));
  if (argv.length) files = files.filter((f) => filters.some((a) => f.includes(a)));
  files = [...new Set([...files, ...explicit.map((a) => resolve(a))])];
  const isConformance = (f: string) => relative(root, f).startsWith(CONFORMANCE_DIR);
  const conformance = only.includes("conformance") && files.some(isConformance);
  const rel = files.filter((f) => !isConformance(f)).map((f) => "./" + relative(root, f));
  const runtimes = (["node", "deno", "bun"] as const).filter((r) => only.includes(r));
  if ((rel.length === 0 || runtimes.length === 0) && !conformance) {
    console.error("no test files found");
    process.exit(1);
  }

  const missing = ensurePrerequisites((line) => console.log(line));
  if (missing) {
    console.error(missing);
    process.exit(1);
  }

  const run = mkdtempSync(join(tmpdir(), "bmat-"));
  // Caches the stages share: the npm cache the machine already has (the publication test
  // installs from it), Deno's module cache (made for this run), and the folder where work done
  // once per run is kept for every stage (`tests/helpers/once-per-run.ts`).
  const shared = {
    npm_config_cache: process.env.npm_config_cache ?? join(homedir(), ".npm"),
    npm_config_update_notifier: "false",
    DENO_DIR: join(run, "deno"),
    BMA_TEST_RUN_SHARED: join(run, "shared"),
  };
  const resultsFile = join(run, "conformance.json");
  // Inside the checkout, so that the bundles import packages from its node_modules; one folder
  // per run (a run inside a stage, the runner's own test, builds beside this one's).
  const bundleRoot = join(root, "node_modules/.cache/bma-test-bundles");
  const bundleDir = join(bundleRoot, basename(run));
  // A run killed before it could clean up left its bundles: none is a day old (a run inside a
  // stage, the runner's own test, has a TMPDIR of its own, so the folder names say nothing).
  for (const name of existsSync(bundleRoot) ? readdirSync(bundleRoot) : []) {
    const dir = join(bundleRoot, name);
    if (statSync(dir).mtimeMs < Date.now() - 86_400_000) {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  let bundles = new Map<string, string>();
  // What Node's stages and the conformance matrix pass to the tests: the folder of the programs
  // they start, built (`tests/helpers/runtime-command.ts`).
  const nodeBundles: Record<string, string> = {};
  // BMA_TEST_NODE_TSX=1: Node's stages through tsx, unbundled (to compare, or to rule the build out).
  if ((runtimes.includes("node") || conformance) && process.env.BMA_TEST_NODE_TSX !== "1") {
    const started = performance.now();
    const built = await bundleTests(root, runtimes.includes("node") ? rel : [], bundleDir);
    bundles = built.bundles;
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    if (built.errors.length) {
      console.log(`node: the test files could not be bundled, so they run through tsx:`);
      for (const e of built.errors) console.log(`  ${e}`);
    } else {
      nodeBundles.BMA_TEST_NODE_BUNDLES = bundleDir;
      console.log(
        `node: ${bundles.size} test files and the programs they start bundled (${seconds} s)`,
      );
    }
  }
  // The processes Node's stages and the conformance matrix start through tsx share its cache.
  const tsxCache = join(run, "tsx-cache");
  const specs: StageSpec[] = [];
  for (const file of rel) {
    for (const runtime of runtimes) {
      const stage = fileStage(runtime, file, bundles.get(file));
      specs.push({
        ...stage,
        env: runtime === "node" ? { ...shared, ...nodeBundles } : shared,
        ...(runtime === "node" ? { tsxCache } : {}),
      });
    }
  }
  if (conformance) {
    specs.push({
      name: "conformance",
      runtime: "conformance",
      command: process.execPath,
      args: [
        "--import",
        "tsx",
        "--test",
        "--test-reporter=spec",
        `./${CONFORMANCE_DIR}conformance.test.ts`,
      ],
      cwd: root,
      env: { ...shared, ...nodeBundles, BMA_CONFORMANCE_RESULTS: resultsFile },
      tsxCache,
      limitMs: CONFORMANCE_LIMIT_S * 1000,
      parse: nodeCounts,
    });
  }
  const timings = readTimings();
  const queue = new StageQueue(
    specs,
    (s) => timings.get(s.name),
    (s) => s.runtime === "conformance" ? 1e6 : 0,
  );

  const interrupted = () => {
    killAllStages();
    rmSync(run, { recursive: true, force: true });
    rmSync(bundleDir, { recursive: true, force: true });
    process.exit(130);
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);

  const started = performance.now();
  const outcomes: StageOutcome[] = [];
  let stageIndex = 0;
  const lane = async (waiting: boolean) => {
    for (let spec = queue.next(waiting); spec; spec = queue.next(waiting)) {
      const dir = join(run, String(stageIndex++));
      mkdirSync(dir);
      const o = await runStage(spec, dir);
      outcomes.push(o);
      rmSync(dir, { recursive: true, force: true });
      const good = stagePassed(o);
      const left = o.leftovers.length ? `, left ${o.leftovers.length} running` : "";
      console.log(
        `${good ? "ok  " : "FAIL"} ${o.spec.name}: ${o.passed} passed, ${o.failed} failed` +
          ` (exit ${o.exitCode}${o.killed ? ", killed" : ""}${left}, ${o.seconds.toFixed(1)} s)`,
      );
      if (verbose || !good) console.log(o.output.trimEnd().replace(/^/gm, "  | "));
    }
  };
  // `jobs` lanes, and with more than one, a lane of the stages that mostly wait (test-schedule.ts).
  const lanes = Array.from({ length: Math.min(jobs, queue.size) }, () => lane(false));
  if (jobs > 1) lanes.push(lane(true));
  await Promise.all(lanes);
  const wall = (performance.now() - started) / 1000;

  try {
    mkdirSync(join(root, "node_modules/.cache"), { recursive: true });
    const record = new Map(timings);
    for (const o of outcomes) record.set(o.spec.name, { seconds: o.seconds, cpu: o.cpuSeconds });
    writeFileSync(TIMINGS, JSON.stringify(writeRecords(record)));
  } catch { /* no cache: the next run starts in file order */ }

  let table = "";
  if (conformance) {
    try {
      const { renderTable } = await import("../tests/conformance/matrix.ts");
      const data = JSON.parse(readFileSync(resultsFile, "utf8"));
      table = renderTable(data.cells, data.scenarios, data.results);
    } catch (error) {
      table = `conformance: no results (${(error as Error).message.split("\n")[0]})`;
    }
  }
  rmSync(run, { recursive: true, force: true });
  rmSync(bundleDir, { recursive: true, force: true });
  if (table) console.log(`\n${table}`);

  const report = outcomes.filter((o) => !stagePassed(o)).flatMap(failureReport);
  // The last look: every process any stage started has ended (a SIGKILL that did not take).
  const survivors = outcomes.flatMap((o) =>
    o.stillRunning().map((p) =>
      `${o.spec.name}: still running at the end: pid ${p.pid}: ${p.command}`
    )
  );
  report.push(...survivors);
  if (report.length) console.log(`\n== failed tests ==\n${report.join("\n")}`);
  const waitingLane = jobs > 1 ? ", and a lane of stages that wait" : "";
  console.log(`\n== test summary (${jobs} side by side${waitingLane}) ==`);
  let ok = survivors.length === 0;
  const groups = [...runtimes, ...(conformance ? ["conformance"] : [])];
  for (const runtime of groups) {
    const of = outcomes.filter((o) => o.spec.runtime === runtime);
    const passed = of.reduce((n, o) => n + o.passed, 0);
    const failed = of.reduce((n, o) => n + o.failed, 0);
    const bad = of.filter((o) => !stagePassed(o)).length;
    const good = bad === 0 && passed > 0;
    ok &&= good;
    const seconds = of.reduce((n, o) => n + o.seconds, 0);
    console.log(
      `${runtime}: ${passed} passed, ${failed} failed (${of.length} files, ${bad} failed;` +
        ` ${seconds.toFixed(1)} s of stages)${good ? "" : "  <-- FAILED"}`,
    );
  }
  const passed = outcomes.reduce((n, o) => n + o.passed, 0);
  // A stage that failed without a failed test (a crash, a leftover, the limit) counts as one.
  const failed = outcomes.reduce(
    (n, o) => n + o.failed + (!stagePassed(o) && o.failed === 0 ? 1 : 0),
    survivors.length,
  );
  // The runner's own CPU (its looks at /proc, the Node bundles): a cost every run pays.
  const own = process.cpuUsage();
  console.log(
    `wall time: ${wall.toFixed(1)} s (the runner itself: ${
      ((own.user + own.system) / 1e6).toFixed(1)
    } CPU-s)`,
  );
  console.log(`total: ${passed} passed, ${failed} failed`);
  process.exit(ok ? 0 : 1);
}

main();
