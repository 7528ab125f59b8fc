/** What the CLI tests share: reading a child's output line by line, and its exit code. */
import type { ChildProcess, SpawnOptions } from "node:child_process";
import type { Readable } from "node:stream";
import { type Finished, finished, RUNTIME, spawnTs } from "../helpers/runtime-command.ts";

/** How long one expected line may take before the test fails, saying what came instead. */
export const LINE_TIMEOUT_MS = 30_000;

/** The lines of a stream, awaited one pattern at a time. */
export class Lines {
  readonly lines: string[] = [];
  #partial = "";
  #ended = false;
  #wake: (() => void) | undefined;
  readonly #name: string;

  constructor(stream: Readable, name: string) {
    this.#name = name;
    stream.on("data", (chunk) => {
      this.#partial += String(chunk);
      const parts = this.#partial.split("\n");
      this.#partial = parts.pop()!;
      this.lines.push(...parts.map((line) => line.replace(/\r$/, "")));
      this.#wake?.();
    });
    stream.on("end", () => {
      this.#ended = true;
      if (this.#partial) this.lines.push(this.#partial);
      this.#wake?.();
    });
  }

  /** The index of the first line at or after `from` matching `pattern`, or -1. */
  indexOf(pattern: RegExp, from = 0): number {
    for (let i = from; i < this.lines.length; i++) if (pattern.test(this.lines[i])) return i;
    return -1;
  }

  /** Resolves with the first line matching `pattern` (at or after line `from`) and its index. */
  async match(pattern: RegExp, from = 0): Promise<{ match: RegExpExecArray; index: number }> {
    const deadline = Date.now() + LINE_TIMEOUT_MS;
    for (;;) {
      for (let i = from; i < this.lines.length; i++) {
        const match = pattern.exec(this.lines[i]);
        if (match) return { match, index: i };
      }
      const left = deadline - Date.now();
      if (this.#ended || left <= 0) {
        throw new Error(
          `${this.#name}: no line matches ${pattern} ${
            this.#ended ? "before the end" : `within ${LINE_TIMEOUT_MS} ms`
          }; it printed:\n${this.lines.join("\n")}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }
}

/**
 * The exit code of a child that was sent SIGTERM or SIGINT and handles it. Deno's
 * node:child_process reports such a child as killed by the signal (code null) even when it
 * exited itself, so on Deno the code the CLI prints last ("exit code N") stands in for it.
 */
export function exitCodeAfterSignal(result: Finished): number | null {
  if (RUNTIME === "deno" && result.code === null && result.signal !== null) {
    const printed = /exit code (\d+)\s*$/.exec(result.stdout);
    return printed ? Number(printed[1]) : null;
  }
  return result.code;
}

/** Resolves when the child has exited, with its code and signal (no output collected). */
export function exited(
  child: ChildProcess,
): Promise<{ code: number | null; signal: string | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once("close", (code, signal) => resolve({ code, signal })));
}

/** Parsed `--log-format json` lines of a stderr (other lines skipped). */
export function jsonLogs(lines: readonly string[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of lines) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // Not a log record.
    }
  }
  return out;
}

/** A CLI child process with its output as lines and its end collected. */
export interface RunningCli {
  readonly child: ChildProcess;
  readonly stdout: Lines;
  readonly stderr: Lines;
  /** Settles when it has exited, with all it printed. */
  readonly result: Promise<Finished>;
  /** Writes one command line to its stdin. */
  send(line: string): void;
}

/** Starts `script` on this runtime with stdin, stdout and stderr piped. */
export function launchCli(
  script: string,
  args: string[],
  options: SpawnOptions = {},
): RunningCli {
  const child = spawnTs(script, args, { stdio: ["pipe", "pipe", "pipe"], ...options });
  const result = finished(child);
  const stdout = new Lines(child.stdout!, `${script} stdout`);
  const stderr = new Lines(child.stderr!, `${script} stderr`);
  if (process.env.BMA_TEST_LOG) child.stderr!.on("data", (c) => process.stderr.write(String(c)));
  return { child, stdout, stderr, result, send: (line) => child.stdin!.write(`${line}\n`) };
}

/**
 * Sends `signal` to the child. Through `process.kill`, not `child.kill`: Deno's ChildProcess
 * sends only the first signal it is asked to (a second Ctrl-C would never arrive).
 */
export function sendSignal(child: ChildProcess, signal: NodeJS.Signals): void {
  process.kill(child.pid!, signal);
}
