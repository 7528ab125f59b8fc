/**
 * One stage of the suite (one test file on one runtime, or the conformance matrix) in a world of
 * its own: an empty `HOME` and `TMPDIR` made for it (so no user's dotfiles, no other stage's
 * files), the machine's environment less what configures shells and runtimes, and every process
 * it starts found and ended (`process-tree.ts`). A stage that leaves a process running after it
 * exits has failed, and the process is named.
 */
import { spawn } from "node:child_process";
import { linkSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  allProcesses,
  commandLine,
  cpuSeconds,
  limitMark,
  type ProcessInfo,
  ProcessTree,
} from "./process-tree.ts";

/** What a stage runs. */
export interface StageSpec {
  /** Shown in reports: `node tests/x.test.ts`. */
  name: string;
  runtime: string;
  command: string;
  args: string[];
  cwd: string;
  /** Set on top of the stage's environment. */
  env?: Record<string, string>;
  /** Killed, and failed, after this long. */
  limitMs: number;
  /** Reads `[passed, failed]` from the output. */
  parse: (output: string) => [number, number];
  /**
   * A folder of tsx's transform cache that the run's stages share. tsx keeps its cache in
   * `$TMPDIR/tsx-<uid>`, and a stage's `TMPDIR` starts empty, so every process a stage starts
   * through tsx transformed the whole SDK again: the shared entries are linked into the stage's
   * `TMPDIR` before it starts, and the entries it made linked back once it has ended. Entries are
   * named by the hash of what they were made from, so a stage never reads another's stale one.
   */
  tsxCache?: string;
}

/** A process a stage left behind. */
export interface Leftover {
  pid: number;
  command: string;
}

/** How a stage ended. */
export interface StageOutcome {
  spec: StageSpec;
  passed: number;
  failed: number;
  exitCode: number;
  seconds: number;
  /**
   * About the CPU seconds its processes used, as the runner's looks saw them (`WATCH_MS`): none
   * for a stage shorter than one look, or off Linux.
   */
  cpuSeconds?: number;
  killed: boolean;
  leftovers: Leftover[];
  /** Everything it printed, colour removed. */
  output: string;
  /** Its processes still running now (after it was ended, there should be none). */
  stillRunning(): Leftover[];
}

/** Variables of the machine a stage never sees: each makes a shell or a runtime read the host. */
const WITHHELD = [
  "BASH_ENV",
  "ENV",
  "CDPATH",
  "PROMPT_COMMAND",
  "XDG_CONFIG_HOME",
  "XDG_DATA_HOME",
  "XDG_CACHE_HOME",
  "XDG_STATE_HOME",
  "XDG_RUNTIME_DIR",
  "NODE_OPTIONS",
  "NODE_TEST_CONTEXT",
  "DENO_DIR",
  "BUN_INSTALL",
  "PYENV_ROOT",
];

/** How long a stage's processes may take to end after it exits before they count as left. */
const SETTLE_MS = 3_000;
/** How often an ended stage's tree is looked at while it settles. */
const SCAN_MS = 100;
/**
 * How often the running stages' trees are looked at. A process is found by its marks (the
 * stage's environment variable, its limit) as well as by its parent, so one that is started and
 * ends between two looks was never left behind, and one that detaches is still found by them;
 * each look reads every process of the machine, which at ten a second was most of the runner's
 * own CPU (docs/benchmarks.md).
 */
const WATCH_MS = 500;

/**
 * Every live stage's process tree, scanned together (one look at `/proc` per tick), with what
 * each tick does for the stage besides.
 */
const trees = new Map<ProcessTree, () => void>();
let scanner: ReturnType<typeof setInterval> | undefined;

function watch(tree: ProcessTree, onTick: () => void): void {
  trees.set(tree, onTick);
  scanner ??= setInterval(scanAll, WATCH_MS);
}

function unwatch(tree: ProcessTree): void {
  trees.delete(tree);
  if (trees.size === 0 && scanner) {
    clearInterval(scanner);
    scanner = undefined;
  }
}

function scanAll(): void {
  const all = allProcesses();
  for (const [tree, onTick] of trees) {
    tree.scan(all);
    onTick();
  }
}

/** Ends every stage still running (the runner was interrupted). */
export function killAllStages(): void {
  scanAll();
  for (const tree of trees.keys()) tree.killAll();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let stageCount = 0;

/** Links each file of `from` that `to` lacks into `to` (made if missing): a cache's entries. */
function linkEntries(from: string, to: string): void {
  let names: string[];
  try {
    names = readdirSync(from);
  } catch {
    return; // nothing cached yet
  }
  mkdirSync(to, { recursive: true });
  for (const name of names) {
    try {
      linkSync(join(from, name), join(to, name));
    } catch { /* there already, or gone: a cache entry either way */ }
  }
}

/** Whether process `pid` exists. */
function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

/**
 * Where runs claim their marks: the outermost runner's temp directory, passed down to the runs
 * started inside its stages, whose own temp directories are each stage's and would not see each
 * other's claims (runs inside the stages of one run start below the same limit, so they choose
 * among the same bases).
 */
const MARK_DIR = process.env.BMA_TEST_MARK_DIR || tmpdir();

/**
 * The first limit mark of this run; stage `i` gets `markBase + i % 1000`. Below the limit this
 * process has, a thousand apart from it: a runner run inside a stage (the runner's own test)
 * never takes its parent's marks. Claimed with a file in {@linkcode MARK_DIR}, so that two runs
 * side by side never take the same (a claim whose runner has gone is taken over).
 */
const markBase = (() => {
  let own = 819_200;
  try {
    const line = /^Max msgqueue size\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "latin1"));
    if (line) own = Number(line[1]);
  } catch { /* not Linux */ }
  const top = Math.floor(own / 1_000) * 1_000 - 1_000;
  const choices = Math.max(1, Math.min(400, top / 1_000 - 10));
  const first = Math.floor(Math.random() * choices);
  for (let i = 0; i < choices; i++) {
    const base = top - 1_000 * ((first + i) % choices);
    const claim = join(MARK_DIR, `bma-test-mark-${base}`);
    try {
      writeFileSync(claim, String(process.pid), { flag: "wx" });
    } catch {
      const holder = Number(readFileSync(claim, "utf8").trim());
      if (holder && holder !== process.pid && exists(holder)) continue;
      writeFileSync(claim, String(process.pid));
    }
    process.once("exit", () => rmSync(claim, { force: true }));
    return base;
  }
  return top - 1_000 * first;
})();

/**
 * Runs one stage. `home` is its directory (made here): `home/home` becomes `HOME`, `home/tmp`
 * `TMPDIR`. Shared caches are passed in `spec.env` (the npm cache, Deno's).
 */
export async function runStage(spec: StageSpec, dir: string): Promise<StageOutcome> {
  const index = stageCount++;
  const home = join(dir, "home");
  const tmp = join(dir, "tmp");
  mkdirSync(home, { recursive: true });
  mkdirSync(tmp, { recursive: true });
  const ownCache = spec.tsxCache ? join(tmp, `tsx-${process.geteuid?.() ?? 0}`) : undefined;
  if (spec.tsxCache && ownCache) linkEntries(spec.tsxCache, ownCache);
  const envMark = `BMA_TEST_STAGE=${process.pid}.${index}`;
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !WITHHELD.includes(name)) env[name] = value;
  }
  Object.assign(env, {
    HOME: home,
    TMPDIR: tmp,
    NO_COLOR: "1",
    FORCE_COLOR: "0",
    BMA_TEST_STAGE: envMark.slice(envMark.indexOf("=") + 1),
    BMA_TEST_MARK_DIR: MARK_DIR,
    ...spec.env,
  });
  const limit = limitMark(markBase + (index % 1_000));
  const argv = [...(limit?.prefix ?? []), spec.command, ...spec.args];
  const started = performance.now();
  const child = spawn(argv[0], argv.slice(1), {
    cwd: spec.cwd,
    env,
    // Its own session and process group: nothing of the runner's terminal, one group to end.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => out += chunk.toString());
  child.stderr.on("data", (chunk: Buffer) => out += chunk.toString());
  const tree = child.pid === undefined ? undefined : new ProcessTree(child.pid, envMark, limit);
  // With `prlimit`, which execs the command, the child's pid is the stage's program all along.
  // Two counts, each short of the truth: the first process with the children it has reaped (a
  // child counts once it has ended), and every process of the tree seen running (one that lived
  // between two looks is missed). The larger is the nearer.
  let rootCpu: number | undefined;
  const sampleCpu = () => {
    if (child.exitCode === null && child.signalCode === null) {
      rootCpu = cpuSeconds(child.pid!) ?? rootCpu;
    }
  };
  if (tree) watch(tree, sampleCpu);
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    out += `\n${spec.name}: killed after ${spec.limitMs / 1000} s\n`;
    if (tree) {
      tree.scan();
      tree.killAll();
    }
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch { /* gone */ }
  }, spec.limitMs);
  const exitCode = await new Promise<number>((resolve) => {
    child.on("error", (error) => {
      out += `\n${spec.name}: cannot start: ${error.message}\n`;
      resolve(127);
    });
    child.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
  clearTimeout(timer);
  const seconds = (performance.now() - started) / 1000;
  let leftovers: Leftover[] = [];
  if (tree) {
    let alive: ProcessInfo[] = [];
    // What a test ended as it finished may still be on its way out: wait for it, a while.
    for (const until = performance.now() + SETTLE_MS; performance.now() < until;) {
      tree.scan();
      alive = tree.alive();
      if (alive.length === 0 || killed) break;
      await sleep(SCAN_MS);
    }
    if (!killed) leftovers = alive.map((p) => ({ pid: p.pid, command: commandLine(p.pid) }));
    // A SIGKILLed process is still listed as running until the kernel has torn it down, which on
    // a loaded machine takes a while: wait for that, so the runner's last look sees the truth.
    for (const until = performance.now() + SETTLE_MS; performance.now() < until;) {
      tree.killAll();
      if (tree.alive().length === 0) break;
      await sleep(SCAN_MS);
    }
    unwatch(tree);
  }
  if (spec.tsxCache && ownCache) linkEntries(ownCache, spec.tsxCache);
  // deno-lint-ignore no-control-regex
  const output = out.replace(/\x1b\[[0-9;]*m/g, "");
  const [passed, failed] = spec.parse(output);
  const stillRunning = () =>
    tree?.alive().map((p) => ({ pid: p.pid, command: commandLine(p.pid) })) ?? [];
  return {
    spec,
    passed,
    failed,
    exitCode,
    seconds,
    cpuSeconds: rootCpu === undefined ? undefined : Math.max(rootCpu, tree?.cpuSeconds() ?? 0),
    killed,
    leftovers,
    output,
    stillRunning,
  };
}

/** Whether a stage passed: exit 0, no failed test, nothing killed or left behind. */
export function stagePassed(o: StageOutcome): boolean {
  return o.exitCode === 0 && o.failed === 0 && !o.killed && o.leftovers.length === 0;
}
