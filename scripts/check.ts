/**
 * The project's static gates, in order: generated code matches its sources (the contract,
 * xterm.js, the inspector's page scripts — type-checked first with their own tsconfig, the DOM
 * lib without Node types —, the runtime entry points' faces: `scripts/gen-faces.ts`), deno fmt,
 * deno lint, deno check, tsc for the portable core (no @types/node: a node: import cannot
 * compile) and for everything, JSR's publish checks (slow types included), the documentation of
 * every export of every entry point (`deno doc --lint`, JSR's rule), the examples in the entry
 * points' doc comments (`deno check --doc-only`, with the package's public specifiers mapped to
 * the sources), the runtime-import guard, the direction of `runtime/` (the ends do not import it)
 * and no import cycles (`dpdm`, type imports included, over every module the entry points and
 * the CLIs reach).
 */
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { RUNTIMES } from "../runtime/runtimes.ts";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));
const bin = (name: string) => join(root, "node_modules/.bin", name);

/** How a step's command ended, and what it printed (stdout then stderr). */
interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a step's command with its output kept: the steps run side by side, and each prints its
 * output once it has ended, whole, under its own result line's neighbours.
 */
function run(command: string, args: string[], env: Record<string, string> = {}): Promise<Ran> {
  return new Promise((done) => {
    const child = spawn(command, args, {
      cwd: root,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => stdout += chunk);
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => stderr += chunk);
    child.on("error", (error) => {
      stderr += `cannot start ${command}: ${error.message}\n`;
    });
    child.on("close", (status) => done({ status, stdout, stderr }));
  });
}

const steps: [string, string, string[]][] = [
  ["contract drift", process.execPath, ["--import", "tsx", "scripts/gen-contract.ts", "--check"]],
  ["xterm.js drift", process.execPath, ["--import", "tsx", "scripts/gen-xterm.ts", "--check"]],
  [
    "inspector pages: tsc (DOM lib) and drift",
    process.execPath,
    ["--import", "tsx", "scripts/gen-pages.ts", "--check"],
  ],
  ["entry points drift", process.execPath, ["--import", "tsx", "scripts/gen-faces.ts", "--check"]],
  ["deno fmt", bin("deno"), ["fmt", "--check", "--quiet"]],
  ["deno lint", bin("deno"), ["lint", "--quiet"]],
  ["deno check", bin("deno"), ["check", "--quiet", "."]],
  ["tsc (portable core, no node types)", bin("tsc"), ["--noEmit", "-p", "tsconfig.core.json"]],
  ["tsc (everything)", bin("tsc"), ["--noEmit", "-p", "tsconfig.json"]],
  // JSR's rules (slow types included) without a second type check of the package: `deno check`
  // above type-checks every file, and on a cold cache (a fresh clone) each check of the whole
  // graph is long (docs/benchmarks.md).
  [
    "deno publish --dry-run",
    bin("deno"),
    ["publish", "--dry-run", "--allow-dirty", "--quiet", "--no-check"],
  ],
];

/** Runtime-specific imports may appear only in files named for their runtime. */
function runtimeImportGuard(): string[] {
  const names = RUNTIMES.map((r) => r.name).join("|");
  const runtimeNamed = new RegExp(`(^|[/._-])(${names})([/._-]|$)`);
  const bad: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) {
        if (entry !== "node_modules") walk(path);
      } else if (path.endsWith(".ts") && !path.endsWith(".test.ts")) {
        const rel = relative(root, path);
        if (runtimeNamed.test(rel)) continue;
        if (/from\s+["'](node:[^"']+|ws)["']|require\(/.test(readFileSync(path, "utf8"))) {
          bad.push(rel);
        }
      }
    }
  };
  // cli/ too: the two applications keep the library's rule, so their portable parts stay
  // importable anywhere and their Node code is named for it.
  for (
    const dir of ["protocol", "transport", "executor", "harness", "http", "agent", "cli", "runtime"]
  ) {
    if (existsSync(join(root, dir))) walk(join(root, dir));
  }
  if (/from\s+["'](node:|ws["'])/.test(readFileSync(join(root, "mod.ts"), "utf8"))) {
    bad.push("mod.ts");
  }
  return bad;
}

/** The library's folders below `runtime/`: the ends, the transports, the protocol. */
const LIBRARY_BELOW_RUNTIME = ["protocol", "transport", "executor", "harness", "agent"];

/**
 * `runtime/` imports the ends (its records hand their pieces to the portable classes); the ends
 * do not import it, apart from the runtime entry points that `scripts/gen-faces.ts` writes into
 * their folders (`executor/<runtime>.ts`, `harness/<runtime>.ts`), which hand a record to their
 * end's classes. The files that break the rule.
 */
function runtimeDirectionGuard(): string[] {
  const entries = new Set(
    RUNTIMES.flatMap((r) => [`executor/${r.name}.ts`, `harness/${r.name}.ts`]),
  );
  const specifiers = /(?:from\s+|import\()["'](\.{1,2}\/[^"']+)["']/g;
  const bad: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith(".ts") && !path.endsWith(".test.ts")) {
        const rel = relative(root, path);
        if (entries.has(rel)) continue;
        for (const [, specifier] of readFileSync(path, "utf8").matchAll(specifiers)) {
          if (relative(root, resolve(dir, specifier)).startsWith("runtime/")) {
            bad.push(rel);
            break;
          }
        }
      }
    }
  };
  for (const dir of LIBRARY_BELOW_RUNTIME) {
    if (existsSync(join(root, dir))) walk(join(root, dir));
  }
  return bad;
}

/** deno.json's exports: each public subpath and its source module (npm exports the same list). */
const EXPORTS: Record<string, string> = JSON.parse(
  readFileSync(join(root, "deno.json"), "utf8"),
).exports;
const entryPoints = [...new Set(Object.values(EXPORTS))];

/**
 * The two CLIs' sources (`bma-executor`, `bma-harness`): no entry point reaches them, so the
 * import-cycle check starts from them as well.
 */
const cliEntryPoints = readdirSync(join(root, "cli"))
  .filter((name) => name.endsWith(".ts") && !name.endsWith(".test.ts"))
  .map((name) => `cli/${name}`);

/**
 * Type-checks the examples in the entry points' doc comments as a user's code: an import map
 * resolves `bma-executor-sdk/...` and `@bma/executor-sdk/...` to the sources.
 */
async function checkDocExamples(): Promise<Ran> {
  const dir = mkdtempSync(join(tmpdir(), "bma-check-"));
  try {
    const imports: Record<string, string> = {};
    for (const [subpath, target] of Object.entries(EXPORTS)) {
      for (const name of ["bma-executor-sdk", "@bma/executor-sdk"]) {
        imports[name + subpath.slice(1)] = join(root, target);
      }
    }
    const map = join(dir, "import_map.json");
    writeFileSync(map, JSON.stringify({ imports }));
    const args = ["check", "--doc-only", "--quiet", "--import-map", map, ...entryPoints];
    return await run(bin("deno"), args);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Types of the package's dependencies that its public types name: `deno doc --lint` calls them
 * private because the entry points do not re-export them, but users have them from the
 * dependency itself (zod, a peer dependency: its schemas are part of `/protocol`; hono, whose
 * app `brainApi` returns).
 */
const DEPENDENCY_TYPES: ReadonlySet<string> = new Set([
  "ZodType",
  "$ZodType",
  "input",
  "output",
  "Hono",
]);

/**
 * What `deno doc --lint` reports for the entry points of `deno.json` (the same list as npm's
 * exports): an export without a doc comment, without an explicit type, or naming a type the
 * entry points do not export. Each problem as `path:line: kind: message`.
 */
async function docLint(): Promise<{ problems: string[]; failed: string | undefined }> {
  const result = await run(bin("deno"), ["doc", "--lint", ...entryPoints]);
  const output = `${result.stdout}\n${result.stderr}`;
  const problems: string[] = [];
  const pattern = /^error\[([\w-]+)\]: (.*)\n\s*--> (.+?):(\d+):\d+$/gm;
  const reported = [...output.matchAll(pattern)];
  for (const [, kind, message, path, line] of reported) {
    const privateType = /references private type '([^']+)'/.exec(message)?.[1];
    if (kind === "private-type-ref" && privateType && DEPENDENCY_TYPES.has(privateType)) continue;
    problems.push(`${relative(root, path)}:${line}: ${kind}: ${message}`);
  }
  // Every error deno counted must have been read: a change of its output format must not pass.
  const found = Number(/Found (\d+) documentation lint errors?/.exec(output)?.[1] ?? 0);
  if (result.status !== 0 && found !== reported.length) {
    return { problems, failed: `deno doc --lint exited ${result.status}:\n${output}` };
  }
  return { problems, failed: undefined };
}

/** A step: its name, and what it found (`ok`), with what it printed. */
type Step = [name: string, check: () => Promise<{ ok: boolean; output: string }>];

const printedBy = (r: Ran) => `${r.stdout}${r.stderr}`;

const checks: Step[] = [
  ...steps.map(([name, command, args]): Step => [name, async () => {
    const result = await run(command, args);
    return { ok: result.status === 0, output: printedBy(result) };
  }]),
  ["deno doc --lint: every export of every entry point documented", async () => {
    const { problems, failed: broken } = await docLint();
    const output = [...problems, ...(broken ? [broken] : [])].map((line) => `${line}\n`).join("");
    return { ok: problems.length === 0 && !broken, output };
  }],
  ["deno check --doc-only: the entry points' examples", async () => {
    const result = await checkDocExamples();
    return { ok: result.status === 0, output: printedBy(result) };
  }],
  // Type-only imports count: a cycle of types is a knot as much as one of values.
  ["no import cycles (dpdm)", async () => {
    const result = await run(
      bin("dpdm"),
      ["--no-warning", "--no-tree", "--exit-code", "circular:1", ...entryPoints, ...cliEntryPoints],
      { FORCE_COLOR: "0" },
    );
    return { ok: result.status === 0, output: result.status === 0 ? "" : printedBy(result) };
  }],
];

/**
 * The steps read the sources and write nothing of the checkout, so they run side by side, as many
 * as the machine has cores (one waits on its disk while another computes); `BMA_CHECK_JOBS` sets
 * how many. Each step's result is printed as it ends, its output with it.
 */
const jobs = Math.max(1, Number(process.env.BMA_CHECK_JOBS ?? availableParallelism()));
/** The longest steps, in the order they start (the longest first, so the last to end is short). */
const LONGEST = [
  "deno check",
  "deno check --doc-only",
  "tsc (everything)",
];
const rank = ([name]: Step) => {
  const at = LONGEST.findIndex((long) => name === long || name.startsWith(`${long}:`));
  return at < 0 ? LONGEST.length : at;
};
checks.sort((a, b) => rank(a) - rank(b));
let failed = false;
let next = 0;
const worker = async () => {
  while (next < checks.length) {
    const [name, check] = checks[next++];
    const started = performance.now();
    const { ok, output } = await check();
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    failed ||= !ok;
    if (output) process.stdout.write(output.endsWith("\n") ? output : `${output}\n`);
    console.log(`${ok ? "ok  " : "FAIL"} ${name} (${seconds} s)`);
  }
};
await Promise.all(Array.from({ length: Math.min(jobs, checks.length) }, worker));
const bad = runtimeImportGuard();
if (bad.length) {
  failed = true;
  console.log(`FAIL runtime imports outside runtime-named files: ${bad.join(", ")}`);
} else console.log("ok   runtime-import guard");
const upward = runtimeDirectionGuard();
if (upward.length) {
  failed = true;
  console.log(
    `FAIL runtime/ imported below it (only runtime entry points may): ${upward.join(", ")}`,
  );
} else console.log("ok   runtime/ imported only by the runtime entry points");
if (failed) {
  console.log("check failed");
  process.exit(1);
}
console.log("check passed");
