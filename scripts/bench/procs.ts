/**
 * The orchestrator's side of the line protocol: starts `child.ts` on a runtime (optionally
 * pinned to one CPU with `taskset`), waits for its `ready` report, sends it commands and reads
 * the answers.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { build } from "esbuild";
import { createInterface } from "node:readline";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { LINE_PREFIX } from "./common.ts";

/** The repository root. */
export const ROOT: string = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const CHILD = join(ROOT, "scripts/bench/child.ts");

/**
 * Where Node's children run from: child.ts and the SDK sources bundled by esbuild into one ES
 * module (dependencies stay in node_modules), as a published JavaScript package would run.
 * Running them through tsx instead would add its `keepNames` helper — a defineProperty on every
 * closure created — to every frame's path, which no user's Node would run. One bundle per
 * checkout (`--compare` runs another one's child.ts), all resolving packages from this one.
 */
function nodeBundle(root: string): string {
  if (root === ROOT) return join(ROOT, "node_modules/.cache/bma-bench/child.mjs");
  const tag = createHash("sha256").update(root).digest("hex").slice(0, 12);
  return join(ROOT, `node_modules/.cache/bma-bench/child-${tag}.mjs`);
}
const bundled = new Map<string, Promise<void>>();

/** Builds the Node bundle of a checkout's child.ts (once per run of the benchmark). */
export function bundleForNode(root: string = ROOT): Promise<void> {
  let done = bundled.get(root);
  if (!done) {
    done = build({
      entryPoints: [join(root, "scripts/bench/child.ts")],
      outfile: nodeBundle(root),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "error",
    }).then(() => {});
    bundled.set(root, done);
  }
  return done;
}

/** The runtimes the benchmark runs on. */
export type Runtime = "node" | "deno" | "bun";

/** A binary of node_modules/.bin. */
export function bin(name: string): string {
  return join(ROOT, "node_modules/.bin", name);
}

/** Whether `taskset` is on this machine. */
export const HAS_TASKSET: boolean = spawnSync("taskset", ["-c", "0", "true"]).status === 0;

/** How a child is started. */
export interface SpawnOptions {
  /** Pin it to this CPU with `taskset -c`. */
  cpu?: number;
  /** Extra flags for the runtime, before the script. */
  runtimeFlags?: string[];
  /** Raise the open-file limit to the hard limit first (scale cases). */
  raiseFileLimit?: boolean;
  /** A label for errors. */
  label?: string;
  /** The checkout whose scripts/bench/child.ts runs (`--compare`). Default: this one. */
  root?: string;
}

/** The command line that runs a checkout's child.ts with `args` on `runtime`. */
function commandLine(
  runtime: Runtime,
  args: string[],
  flags: string[],
  root: string,
): [string, string[]] {
  const child = root === ROOT ? CHILD : join(root, "scripts/bench/child.ts");
  if (runtime === "deno") return [bin("deno"), ["run", "-A", "--quiet", ...flags, child, ...args]];
  if (runtime === "bun") return [bin("bun"), [...flags, child, ...args]];
  return [process.execPath, [...flags, nodeBundle(root), ...args]];
}

/** A running child process of the benchmark. */
export class Child {
  /** Starts a child once the Node bundle is built (see {@linkcode bundleForNode}). */
  static async start(runtime: Runtime, args: string[], options: SpawnOptions = {}): Promise<Child> {
    if (runtime === "node") await bundleForNode(options.root);
    return new Child(runtime, args, options);
  }

  readonly label: string;
  readonly process: ChildProcess;
  /** The `ready` report (its url, ...). */
  readonly ready: Promise<Record<string, unknown>>;
  /** Settles when the process has exited. */
  readonly exited: Promise<number | null>;
  #seq = 0;
  readonly #waiting = new Map<number, (reply: Record<string, unknown>) => void>();
  #stderr = "";
  #failed: Error | undefined;

  constructor(runtime: Runtime, args: string[], options: SpawnOptions = {}) {
    this.label = options.label ?? `${runtime} ${args[0]}`;
    const root = options.root ?? ROOT;
    let [command, argv] = commandLine(runtime, args, options.runtimeFlags ?? [], root);
    if (options.raiseFileLimit) {
      argv = ["-c", 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"', "bash", command, ...argv];
      command = "bash";
    }
    if (options.cpu !== undefined && HAS_TASKSET) {
      argv = ["-c", String(options.cpu), command, ...argv];
      command = "taskset";
    }
    this.process = spawn(command, argv, {
      cwd: root,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    });
    this.process.stderr!.on("data", (chunk) => {
      this.#stderr = (this.#stderr + chunk).slice(-4000);
    });
    this.exited = new Promise((resolve) => this.process.once("exit", (code) => resolve(code)));
    let resolveReady!: (value: Record<string, unknown>) => void;
    let rejectReady!: (error: Error) => void;
    this.ready = new Promise((resolve, reject) => {
      resolveReady = resolve;
      rejectReady = reject;
    });
    this.ready.catch(() => {});
    const lines = createInterface({ input: this.process.stdout! });
    lines.on("line", (line) => {
      if (!line.startsWith(LINE_PREFIX)) return;
      const message = JSON.parse(line.slice(LINE_PREFIX.length)) as Record<string, unknown>;
      if (message.fatal) {
        this.#fail(new Error(`${this.label}: ${message.fatal}`));
        rejectReady(this.#failed!);
      } else if (message.ready) resolveReady(message);
      else if (typeof message.seq === "number") {
        this.#waiting.get(message.seq)?.(message);
        this.#waiting.delete(message.seq);
      }
    });
    void this.exited.then((code) => {
      const error = new Error(
        `${this.label} exited with ${code}${this.#stderr ? `:\n${this.#stderr}` : ""}`,
      );
      this.#fail(error);
      rejectReady(error);
    });
  }

  #fail(error: Error): void {
    this.#failed ??= error;
    for (const waiter of this.#waiting.values()) waiter({ ok: false, error: error.message });
    this.#waiting.clear();
  }

  /** Sends a command; resolves with the answer, rejects when the child reports a failure. */
  async send(cmd: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    if (this.#failed) throw this.#failed;
    const seq = ++this.#seq;
    const reply = await new Promise<Record<string, unknown>>((resolve) => {
      this.#waiting.set(seq, resolve);
      this.process.stdin!.write(`${JSON.stringify({ cmd, seq, ...params })}\n`);
    });
    if (!reply.ok) throw new Error(`${this.label}: ${cmd} failed: ${reply.error}`);
    return reply;
  }

  /** Asks the child to exit; kills it if it has not within `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    try {
      this.process.stdin!.end(`${JSON.stringify({ cmd: "exit", seq: 0 })}\n`);
    } catch {
      // Already gone.
    }
    const timer = setTimeout(() => this.process.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Kills the child at once. */
  async kill(): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    this.process.kill("SIGKILL");
    await this.exited;
  }
}
