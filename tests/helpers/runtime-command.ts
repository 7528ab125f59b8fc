/**
 * Runs a TypeScript entry point as a child process, on the runtime the test itself runs on unless
 * another is named.
 */
import { type ChildProcess, spawn, type SpawnOptions } from "node:child_process";
import { existsSync } from "node:fs";
import { isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT: string = fileURLToPath(new URL("../../", import.meta.url));

/** This process's runtime. */
export const RUNTIME: "node" | "deno" | "bun" = "Deno" in globalThis
  ? "deno"
  : "Bun" in globalThis
  ? "bun"
  : "node";

/** `bma-executor` for this runtime: the CLI's entry that injects this runtime's record. */
export const EXECUTOR_CLI: string = fileURLToPath(
  new URL(`../../cli/executor.${RUNTIME}.ts`, import.meta.url),
);

/**
 * The test runner's build of the programs tests start (`scripts/test-bundle.ts`), when it made
 * one: `<folder>/<path from the root>.mjs`.
 */
const NODE_BUNDLES = process.env.BMA_TEST_NODE_BUNDLES;

/**
 * The command line that runs `script` (a .ts file, absolute or from the repository root) with
 * `args` on `runtime` (this one unless named). On Node, the runner's build of it when there is
 * one, otherwise through tsx.
 */
export function tsCommand(
  script: string,
  args: string[] = [],
  runtime: "node" | "deno" | "bun" = RUNTIME,
): [string, string[]] {
  const exec = runtime === RUNTIME
    ? process.execPath
    : runtime === "node"
    ? "node"
    : join(ROOT, "node_modules/.bin", runtime);
  if (runtime === "deno") return [exec, ["run", "-A", "--quiet", script, ...args]];
  if (runtime === "bun") return [exec, [script, ...args]];
  if (NODE_BUNDLES) {
    const path = relative(ROOT, isAbsolute(script) ? script : join(ROOT, script));
    const bundle = join(NODE_BUNDLES, path.replace(/\.ts$/, ".mjs"));
    if (!path.startsWith("..") && existsSync(bundle)) {
      return [exec, ["--enable-source-maps", bundle, ...args]];
    }
  }
  return [exec, ["--import", TSX, script, ...args]];
}

/** tsx's loader by its file: a child started in another directory resolves no bare `tsx`. */
const TSX = (() => {
  try {
    const url = import.meta.resolve("tsx");
    return url.startsWith("file:") ? url : "tsx";
  } catch {
    return "tsx";
  }
})();

/** Spawns `script` on this runtime, from the repository root. */
export function spawnTs(script: string, args: string[], options: SpawnOptions = {}): ChildProcess {
  const [command, argv] = tsCommand(script, args);
  return spawn(command, argv, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], ...options });
}

/** A finished child: its exit code (or signal), and what it printed. */
export interface Finished {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** Collects a child's output and exit code. */
export function finished(child: ChildProcess): Promise<Finished> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk) => (stdout += chunk));
  child.stderr?.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  );
}

/**
 * The exit code of a child that was sent SIGTERM and handles it. Deno's node:child_process
 * reports such a child as killed by the signal (code null) even when it exited 0 itself, so on
 * Deno the code the CLI prints last ("exit code N") stands in for it.
 */
export function exitCodeAfterSigterm(result: Finished): number | null {
  if (RUNTIME === "deno" && result.code === null && result.signal === "SIGTERM") {
    const printed = /exit code (\d+)\s*$/.exec(result.stdout);
    return printed ? Number(printed[1]) : null;
  }
  return result.code;
}

/** Resolves once the child's stdout contains `text`. */
export function printed(child: ChildProcess, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = "";
    const onData = (chunk: unknown) => {
      out += chunk;
      if (out.includes(text)) {
        child.stdout?.off("data", onData);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.once(
      "exit",
      (code) => reject(new Error(`exited with ${code} before printing ${JSON.stringify(text)}`)),
    );
  });
}
