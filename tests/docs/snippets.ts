/**
 * The TypeScript blocks of the project's Markdown as programs: each block is found with the
 * marker before it, assembled with the blocks it continues, type-checked against the package's
 * public entry points as a user imports them (`bma-executor-sdk/node`, `@bma/executor-sdk/deno`,
 * ... mapped to the sources), and run in a fresh process.
 *
 * The convention (an HTML comment on the line before each ```ts block; a reader does not see it):
 *
 *     <!-- snippet: run -->                 a complete program: type-checked, run, must exit 0
 *     <!-- snippet: part id=NAME -->        the start of a program later blocks continue
 *     <!-- snippet: run after=NAME -->      continues block NAME (its code runs first)
 *     <!-- snippet: check-only — REASON --> type-checked, not run
 *     <!-- snippet: skip — REASON -->       neither
 *     <!-- snippet: run on=bun — REASON --> runs only on the runtimes named
 *
 * `id=`, `after=` and `on=` combine with any mode but `skip`. A block without a marker, a
 * `check-only`, `skip` or `on=` without a reason, a `part` nothing continues, and an `after=`
 * naming no earlier block are each a problem the test reports.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { oncePerRun } from "../helpers/once-per-run.ts";

export const ROOT: string = fileURLToPath(new URL("../../", import.meta.url));

/** What the test does with a block. */
export type SnippetMode = "run" | "part" | "check-only" | "skip";

/** A runtime a block may run on. */
export type Runtime = "node" | "deno" | "bun";

/** Every runtime, the default of `on=`. */
export const RUNTIMES: readonly Runtime[] = ["node", "deno", "bun"];

/** One TypeScript block of a Markdown file. */
export interface Snippet {
  /** The Markdown file, relative to the repository root. */
  readonly file: string;
  /** The 1-based line of the block's first code line. */
  readonly line: number;
  /** The 1-based line of its marker. */
  readonly markerLine: number;
  readonly mode: SnippetMode;
  readonly id?: string;
  readonly after?: string;
  readonly on: readonly Runtime[];
  readonly reason?: string;
  /** The code, with the fence's indentation removed. */
  readonly code: string;
}

/** A convention violation, at a line of a Markdown file. */
export interface Problem {
  readonly file: string;
  readonly line: number;
  readonly message: string;
}

/** A block with the blocks it continues: one source file. */
export interface Program {
  /** The block this program ends with. */
  readonly snippet: Snippet;
  /** The blocks whose code it is made of, first to last (the last is `snippet`). */
  readonly chain: readonly Snippet[];
  readonly source: string;
  /** For each line of `source` (0-based), where it is in the Markdown. */
  readonly origin: readonly { file: string; line: number }[];
}

/** A type error, at the Markdown line it comes from. */
export interface Diagnostic {
  readonly file: string;
  readonly line: number;
  readonly message: string;
}

/** A tsc error (`--pretty false`): `file(line,col): error TSn: message`, then indented lines. */
const TSC_ERROR =
  /^(?<path>[^\s(][^(]*)\((?<line>\d+),\d+\): (?<message>error TS\d+: .*(?:\n {2,}.*)*)/gm;
/** A deno check error: `TSn [ERROR]: message`, the code, then `at file:///path:line:col`. */
const DENO_ERROR =
  /^(?<message>TS\d+ \[ERROR\]: [\s\S]*?)^\s+at (?<path>file:\/\/\S+?):(?<line>\d+):\d+$/gm;

const MODES: readonly SnippetMode[] = ["run", "part", "check-only", "skip"];
const TS_LANGUAGES = new Set(["ts", "typescript", "mts"]);
const MARKER = /^<!--\s*snippet:(.*?)-->$/;
const FENCE = /^(\s*)(`{3,}|~{3,})(.*)$/;

/** The `file:line: message` form of a problem or diagnostic. */
export function located(item: { file: string; line: number; message: string }): string {
  return `${item.file}:${item.line}: ${item.message}`;
}

/** The TypeScript blocks of one Markdown text, and what breaks the convention in it. */
export function parseSnippets(
  markdown: string,
  file: string,
): { snippets: Snippet[]; problems: Problem[] } {
  const lines = markdown.split("\n");
  const snippets: Snippet[] = [];
  const problems: Problem[] = [];
  const problem = (line: number, message: string) => problems.push({ file, line, message });
  let pending: { line: number; text: string } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const trimmed = lines[i].trim();
    const marker = MARKER.exec(trimmed);
    if (marker) {
      if (pending) problem(pending.line, "a snippet marker with no TypeScript block after it");
      pending = { line: i + 1, text: marker[1].trim() };
      continue;
    }
    const fence = FENCE.exec(lines[i]);
    if (!fence) {
      if (trimmed !== "" && pending) {
        problem(pending.line, "a snippet marker must be on the line before a ```ts block");
        pending = undefined;
      }
      continue;
    }
    // A fenced block: find its end (the same fence character, at least as long, alone).
    const [, indent, ticks, info] = fence;
    const language = info.trim().split(/\s+/)[0].toLowerCase();
    let end = i + 1;
    while (end < lines.length) {
      const close = lines[end].trim();
      if (close.startsWith(ticks) && /^(`+|~+)$/.test(close) && close[0] === ticks[0]) break;
      end++;
    }
    const body = lines.slice(i + 1, end).map((line) =>
      line.startsWith(indent) ? line.slice(indent.length) : line.trimStart()
    );
    if (TS_LANGUAGES.has(language)) {
      if (!pending) {
        problem(i + 1, "a ```ts block without a snippet marker (<!-- snippet: run --> and others)");
      } else {
        const parsed = parseMarker(pending.text);
        if (typeof parsed === "string") problem(pending.line, parsed);
        else {
          snippets.push({
            file,
            line: i + 2,
            markerLine: pending.line,
            code: body.join("\n"),
            ...parsed,
          });
        }
      }
    } else if (pending) {
      problem(pending.line, `a snippet marker before a \`\`\`${language || "(plain)"} block`);
    }
    pending = undefined;
    i = end;
  }
  if (pending) problem(pending.line, "a snippet marker with no TypeScript block after it");
  checkLinks(snippets, problem);
  return { snippets, problems };
}

/** A marker's text after `snippet:`, or what is wrong with it. */
function parseMarker(
  text: string,
): Pick<Snippet, "mode" | "id" | "after" | "on" | "reason"> | string {
  const dash = text.indexOf("—");
  const head = (dash < 0 ? text : text.slice(0, dash)).trim();
  const reason = dash < 0 ? undefined : text.slice(dash + 1).trim() || undefined;
  const [mode, ...attributes] = head.split(/\s+/);
  if (!MODES.includes(mode as SnippetMode)) {
    return `unknown snippet mode "${mode}" (run, part, check-only or skip)`;
  }
  const out: { mode: SnippetMode; id?: string; after?: string; on: Runtime[]; reason?: string } = {
    mode: mode as SnippetMode,
    on: [...RUNTIMES],
    reason,
  };
  for (const attribute of attributes) {
    const match = /^(id|after|on)=([\w.,-]+)$/.exec(attribute);
    if (!match) return `unknown snippet attribute "${attribute}" (id=, after=, on=)`;
    const [, key, value] = match;
    if (key === "on") {
      const runtimes = value.split(",");
      const unknown = runtimes.filter((r) => !RUNTIMES.includes(r as Runtime));
      if (unknown.length) return `unknown runtime "${unknown.join(",")}" in on= (node, deno, bun)`;
      out.on = runtimes as Runtime[];
    } else out[key as "id" | "after"] = value;
  }
  if ((out.mode === "skip" || out.mode === "check-only") && !out.reason) {
    return `a ${out.mode} snippet needs its reason: <!-- snippet: ${out.mode} — why -->`;
  }
  if (out.on.length < RUNTIMES.length && !out.reason) {
    return "a snippet that runs on some runtimes only needs its reason: on=... — why";
  }
  if (out.mode === "part" && !out.id) return "a part needs an id= that later blocks continue";
  if (out.mode === "skip" && (out.id || out.after)) {
    return "a skipped block neither continues nor is continued";
  }
  return out;
}

/** `after=` names an earlier block; ids are unique; every part is continued. */
function checkLinks(snippets: Snippet[], problem: (line: number, message: string) => void): void {
  const seen = new Map<string, Snippet>();
  const continued = new Set<string>();
  for (const snippet of snippets) {
    if (snippet.after !== undefined) {
      const base = seen.get(snippet.after);
      if (!base) problem(snippet.markerLine, `after=${snippet.after} names no earlier block`);
      else continued.add(snippet.after);
    }
    if (snippet.id !== undefined) {
      if (seen.has(snippet.id)) problem(snippet.markerLine, `id=${snippet.id} is used twice`);
      seen.set(snippet.id, snippet);
    }
  }
  for (const snippet of snippets) {
    if (snippet.mode === "part" && !continued.has(snippet.id!)) {
      problem(snippet.markerLine, `part id=${snippet.id} is continued by no later block`);
    }
  }
}

/** The program of each block that is checked (run and check-only ones): itself after its chain. */
export function programsOf(snippets: readonly Snippet[]): Program[] {
  const byId = new Map(snippets.filter((s) => s.id).map((s) => [s.id!, s]));
  const programs: Program[] = [];
  for (const snippet of snippets) {
    if (snippet.mode !== "run" && snippet.mode !== "check-only") continue;
    const chain: Snippet[] = [snippet];
    for (let at = snippet; at.after !== undefined && byId.has(at.after);) {
      at = byId.get(at.after)!;
      if (chain.includes(at)) break;
      chain.unshift(at);
    }
    const lines: string[] = [];
    const origin: { file: string; line: number }[] = [];
    for (const block of chain) {
      block.code.split("\n").forEach((text, i) => {
        lines.push(text);
        origin.push({ file: block.file, line: block.line + i });
      });
    }
    programs.push({ snippet, chain, source: lines.join("\n") + "\n", origin });
  }
  return programs;
}

/** Reads and parses Markdown files given relative to the repository root. */
export function readSnippets(
  files: readonly string[],
): { snippets: Snippet[]; problems: Problem[] } {
  const snippets: Snippet[] = [];
  const problems: Problem[] = [];
  for (const file of files) {
    const parsed = parseSnippets(readFileSync(join(ROOT, file), "utf8"), file);
    snippets.push(...parsed.snippets);
    problems.push(...parsed.problems);
  }
  return { snippets, problems };
}

/** The public specifiers of the package (npm and JSR names) and the source file each maps to. */
export function publicSpecifiers(): Map<string, string> {
  const exports: Record<string, string> = JSON.parse(
    readFileSync(join(ROOT, "deno.json"), "utf8"),
  ).exports;
  const map = new Map<string, string>();
  for (const [subpath, target] of Object.entries(exports)) {
    const rest = subpath.slice(1); // "" or "/node"
    const file = join(ROOT, target);
    for (const name of ["bma-executor-sdk", "@bma/executor-sdk", "jsr:@bma/executor-sdk"]) {
      map.set(name + rest, file);
    }
  }
  return map;
}

/** What a type check found: each program's errors, and those outside the programs. */
export interface TypeCheck {
  byProgram: Map<Program, Diagnostic[]>;
  other: Diagnostic[];
}

/**
 * `Scratch.typeCheck` of `programs` in a scratch directory of its own, once per test run: the
 * checkers (`tsc`, `deno check`) give the same answer whichever runtime runs the test, so the
 * stages of one run share it (`oncePerRun`, named by `name` and a hash of the programs, so a
 * stage that read different files checks its own).
 */
export async function typeCheckOncePerRun(
  name: string,
  programs: readonly Program[],
): Promise<TypeCheck> {
  const hash = createHash("sha256");
  for (const p of programs) hash.update(JSON.stringify([p.snippet.file, p.snippet.on, p.source]));
  const found = await oncePerRun(`${name}-${hash.digest("hex").slice(0, 16)}`, async () => {
    mkdirSync(join(ROOT, ".tmp"), { recursive: true });
    const dir = mkdtempSync(join(ROOT, ".tmp/snippets-check-"));
    try {
      const { byProgram, other } = await new Scratch(dir).typeCheck(programs);
      return { byProgram: programs.map((p) => byProgram.get(p)!), other };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  return {
    byProgram: new Map(programs.map((p, i) => [p, found.byProgram[i]])),
    other: found.other,
  };
}

/** A directory of programs with the configurations that resolve the package's specifiers. */
export class Scratch {
  readonly dir: string;
  readonly #files = new Map<Program, string>();

  /** `dir` must lie inside the repository, so `zod`, `tsx`, ... resolve from its node_modules. */
  constructor(dir: string) {
    this.dir = dir;
    const specifiers = publicSpecifiers();
    // Runtime resolution: Bun reads tsconfig paths (and the Node build maps the same specifiers),
    // Deno `imports`.
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        extends: join(ROOT, "tsconfig.base.json"),
        compilerOptions: {
          lib: ["ES2022", "DOM"],
          types: ["node"],
          moduleDetection: "force",
          paths: Object.fromEntries([...specifiers].map(([name, file]) => [name, [file]])),
        },
      }),
    );
    // Deno: the repository's configuration with the specifiers mapped, written here, since the
    // repository's own excludes this scratch space.
    const deno = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8"));
    writeFileSync(
      join(dir, "deno.json"),
      JSON.stringify({
        nodeModulesDir: deno.nodeModulesDir,
        compilerOptions: deno.compilerOptions,
        imports: Object.fromEntries(specifiers),
      }),
    );
  }

  /** Writes a program's source; returns its path. */
  file(program: Program): string {
    let path = this.#files.get(program);
    if (!path) {
      const { file, line } = program.snippet;
      const name = `${file.replace(/[^\w]+/g, "_")}_${line}`;
      mkdirSync(join(this.dir, name), { recursive: true });
      path = join(this.dir, name, "snippet.ts");
      writeFileSync(path, program.source);
      this.#files.set(program, path);
    }
    return path;
  }

  /**
   * Type-checks every program and returns each one's errors at the Markdown lines they come
   * from. One `tsc` run (strict, the repository's base options, Node's types) checks them all,
   * except those that run on Deno and not on Node, which `deno check` checks (they may use the
   * `Deno` namespace). Errors outside the programs (in the SDK's sources, or a checker failing)
   * come back as `other`.
   */
  async typeCheck(programs: readonly Program[]): Promise<TypeCheck> {
    const byProgram = new Map<Program, Diagnostic[]>(programs.map((program) => [program, []]));
    const other: Diagnostic[] = [];
    const denoOnly = (p: Program) =>
      p.snippet.on.includes("deno") && !p.snippet.on.includes("node");
    const checks: [Program[], (files: string[]) => Promise<ExecResult>, RegExp][] = [
      [programs.filter((p) => !denoOnly(p)), (files) => this.#tsc(files), TSC_ERROR],
      [programs.filter(denoOnly), (files) => this.#denoCheck(files), DENO_ERROR],
    ];
    for (const [group, check, pattern] of checks) {
      if (group.length === 0) continue;
      const paths = new Map(group.map((program) => [this.file(program), program]));
      const result = await check([...paths.keys()]);
      let found = 0;
      for (const match of result.output.matchAll(pattern)) {
        const { path, line } = match.groups!;
        const message = match.groups!.message.replace(/^(TS\d+) \[ERROR\]: /, "error $1: ");
        const file = resolve(this.dir, path.replace(/^file:\/\//, ""));
        const program = paths.get(file);
        const at = program?.origin[Number(line) - 1];
        if (program && at) byProgram.get(program)!.push({ ...at, message: message.trim() });
        else other.push({ file: relative(ROOT, file), line: Number(line), message });
        found++;
      }
      if (result.code !== 0 && found === 0) {
        other.push({
          file: "type check",
          line: 0,
          message: `exited ${result.code}: ${result.output}`,
        });
      }
    }
    return { byProgram, other };
  }

  /** `tsc` over `files` with the scratch configuration. */
  #tsc(files: string[]): Promise<ExecResult> {
    const config = join(this.dir, "check.tsconfig.json");
    writeFileSync(config, JSON.stringify({ extends: "./tsconfig.json", files }));
    return exec(join(ROOT, "node_modules/.bin/tsc"), [
      "-p",
      config,
      "--noEmit",
      "--pretty",
      "false",
    ], { cwd: this.dir, timeoutMs: 120_000 });
  }

  /** `deno check` over `files` with the scratch configuration. */
  #denoCheck(files: string[]): Promise<ExecResult> {
    return exec(join(ROOT, "node_modules/.bin/deno"), [
      "check",
      "--quiet",
      "--config",
      join(this.dir, "deno.json"),
      ...files,
    ], { cwd: this.dir, timeoutMs: 120_000, env: { NO_COLOR: "1" } });
  }

  /**
   * Runs a program in a fresh process of `runtime`, in its own directory; kills it (and reports
   * `timedOut`) when it has not exited after `timeoutMs`.
   */
  async run(program: Program, runtime: Runtime, timeoutMs: number): Promise<ExecResult> {
    const path = this.file(program);
    const self = runtime === currentRuntime() ? process.execPath : undefined;
    const bin = (name: string) => self ?? join(ROOT, "node_modules/.bin", name);
    const [command, args]: [string, string[]] = runtime === "node"
      ? [self ?? "node", ["--enable-source-maps", await this.#builtForNode(path)]]
      : runtime === "deno"
      ? [bin("deno"), ["run", "-A", "--quiet", "--config", join(this.dir, "deno.json"), path]]
      : [bin("bun"), [path]];
    return await exec(command, args, { cwd: join(path, ".."), timeoutMs, env: { NO_COLOR: "1" } });
  }

  /**
   * A program built for plain Node into one module beside its source (esbuild, which is what
   * tsx compiles with): the package's specifiers resolved to the sources as the scratch
   * tsconfig maps them, every other package left to Node. Run through tsx instead, each program
   * loaded the whole SDK through tsx's loader before its first line.
   */
  async #builtForNode(path: string): Promise<string> {
    const { build } = await import("esbuild");
    const outfile = path.replace(/\.ts$/, ".mjs");
    const specifiers = publicSpecifiers();
    await build({
      entryPoints: [path],
      outfile,
      bundle: true,
      platform: "node",
      format: "esm",
      target: `node${process.versions.node}`,
      keepNames: true,
      sourcemap: "inline",
      sourcesContent: false,
      logLevel: "silent",
      plugins: [{
        name: "package-specifiers",
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (args) => {
            const file = specifiers.get(args.path);
            return file ? { path: file } : { path: args.path, external: true };
          });
        },
      }],
    });
    return outfile;
  }
}

/** The runtime running this file. */
export function currentRuntime(): Runtime {
  if ("Deno" in globalThis) return "deno";
  if ("Bun" in globalThis) return "bun";
  return "node";
}

/** How a process ended, and what it wrote. */
export interface ExecResult {
  readonly code: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  /** stdout and stderr, interleaved as they arrived. */
  readonly output: string;
}

/** Runs a command; resolves when it exits, or kills it after `timeoutMs`. */
export function exec(
  command: string,
  args: readonly string[],
  options: { cwd: string; timeoutMs: number; env?: Record<string, string> },
): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...options.env },
    });
    let output = "";
    let timedOut = false;
    child.stdout!.on("data", (chunk) => (output += chunk));
    child.stderr!.on("data", (chunk) => (output += chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, options.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      // deno-lint-ignore no-control-regex
      resolve({ code, signal, timedOut, output: output.replace(/\x1b\[[0-9;]*m/g, "") });
    });
  });
}
