/**
 * The `bash` tool: a command line run with `bash -c` (`sh -c` where bash is missing) as a
 * process unit of the session (its own process group, and cgroup where there is one) inside the
 * session workdir. Cancel and timeout end the whole unit (SIGTERM, then SIGKILL after the grace
 * period to whatever is left, the leader gone or not); output streams to `onOutput` as it
 * arrives.
 */
import { existsSync } from "node:fs";
import { type Clock, systemClock } from "../../protocol/clock.ts";
import type { BashInput, BashResult } from "../../protocol/generated/contract.ts";
import { ChildEnvironment, NON_INTERACTIVE_LAYER } from "./child-env.node.ts";
import { exitCodeOf, ProcessUnit, type SpawnUnitOptions } from "./process-group.node.ts";
import type { Workdir } from "./workdir.node.ts";

/** Output kept per stream before the middle is dropped (the executor previews and uploads it). */
const MAX_KEPT_CHARS = 32 * 1024 * 1024;

/** Options of {@linkcode runBash}. */
export interface RunBashOptions {
  workdir: Workdir;
  /**
   * Starts the command as a unit of the session (`SessionProcesses.spawn`). Default: a unit of
   * its own, tracked by nothing else.
   */
  spawn?: (
    argv: readonly string[],
    options: Omit<SpawnUnitOptions, "cgroup">,
  ) => Promise<ProcessUnit>;
  /** Aborting ends the process unit; `runBash` then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Time between SIGTERM and SIGKILL. Default 2 s. */
  graceMs?: number;
  /** Receives output as it arrives, decoded as UTF-8 on character boundaries. */
  onOutput?: (stream: "stdout" | "stderr", text: string) => void;
  /**
   * The command's whole environment. Default: the default child environment policy (see
   * `child-env.node.ts`) with the input's `env` on top.
   */
  env?: Record<string, string>;
  /** Measures the input's `timeout_ms`. Default: the system clock. */
  clock?: Clock;
}

/** The command ran past its `timeout_ms` and its process group was ended. */
export class BashTimeoutError extends Error {
  /** What the command printed before it was ended. */
  readonly partial: BashResult;
  constructor(timeoutMs: number, partial: BashResult) {
    super(`command timed out after ${timeoutMs} ms`);
    this.name = "BashTimeoutError";
    this.partial = partial;
  }
}

/**
 * The shell of a command, before the command line: bash reads no start-up file (neither the
 * user's nor the system's, whatever its stdin is); `sh` reads none when not interactive.
 */
const SHELL_ARGV = existsSync("/bin/bash")
  ? ["/bin/bash", "--noprofile", "--norc", "-c"]
  : ["/bin/sh", "-c"];

let defaultEnvironment: ChildEnvironment | undefined;
/** The default child environment (for `runBash` without an `env`), made on first use. */
function defaultPolicy(): ChildEnvironment {
  return defaultEnvironment ??= new ChildEnvironment({}, { containsSecret: () => false });
}

/** Runs one `bash` tool call. */
export async function runBash(input: BashInput, options: RunBashOptions): Promise<BashResult> {
  const cwd = await options.workdir.resolve(input.cwd ?? ".");
  options.signal?.throwIfAborted();
  const spawn = options.spawn ?? ((argv, spawnOptions) => ProcessUnit.spawn(argv, spawnOptions));
  const env = options.env ?? defaultPolicy().build(NON_INTERACTIVE_LAYER, input.env);
  const unit = await spawn([...SHELL_ARGV, input.command], { cwd, env });
  const child = unit.child;
  const out = new StreamText("stdout", options.onOutput);
  const err = new StreamText("stderr", options.onOutput);
  child.stdout!.on("data", (chunk: Uint8Array) => out.push(chunk));
  child.stderr!.on("data", (chunk: Uint8Array) => err.push(chunk));
  // "close" waits for the pipes too, so no output is lost.
  const closed = new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => resolve([code, signal]));
  });
  let ending: "aborted" | "timed_out" | undefined;
  const end = (why: "aborted" | "timed_out") => {
    if (ending) return;
    ending = why;
    void unit.terminate(options.graceMs ?? 2_000).then(() => {
      // Everything of the unit is gone; a pipe still open was passed to a process out of reach
      // (one that left the process group, without a cgroup): stop waiting for it.
      child.stdout?.destroy();
      child.stderr?.destroy();
    });
  };
  const onAbort = () => end("aborted");
  options.signal?.addEventListener("abort", onAbort, { once: true });
  if (options.signal?.aborted) onAbort();
  const clock = options.clock ?? systemClock;
  const timer = input.timeout_ms
    ? clock.setTimeout(() => end("timed_out"), input.timeout_ms)
    : undefined;
  try {
    const [code, signal] = await closed;
    const result: BashResult = {
      stdout: out.finish(),
      stderr: err.finish(),
      exit_code: exitCodeOf(child.exitCode ?? code, child.signalCode ?? signal),
      ...(out.dropped || err.dropped ? { truncated: true } : {}),
    };
    if (ending === "aborted") throw options.signal!.reason;
    if (ending === "timed_out") throw new BashTimeoutError(input.timeout_ms!, result);
    return result;
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}

/** One output stream: decoded incrementally, forwarded, and kept (head and tail past the cap). */
class StreamText {
  readonly #decoder = new TextDecoder();
  #head = "";
  #tail = "";
  dropped = false;
  constructor(
    readonly stream: "stdout" | "stderr",
    readonly onOutput: RunBashOptions["onOutput"],
  ) {}
  push(chunk: Uint8Array): void {
    this.#keep(this.#decoder.decode(chunk, { stream: true }));
  }
  finish(): string {
    this.#keep(this.#decoder.decode());
    return this.dropped ? `${this.#head}\n[... output dropped ...]\n${this.#tail}` : this.#head;
  }
  #keep(text: string): void {
    if (!text) return;
    this.onOutput?.(this.stream, text);
    if (!this.dropped && this.#head.length + text.length <= MAX_KEPT_CHARS) {
      this.#head += text;
      return;
    }
    this.dropped = true;
    this.#tail = (this.#tail + text).slice(-MAX_KEPT_CHARS / 2);
    if (this.#head.length > MAX_KEPT_CHARS / 2) {
      this.#head = this.#head.slice(0, MAX_KEPT_CHARS / 2);
    }
  }
}
