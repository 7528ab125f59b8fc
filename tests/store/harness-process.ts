/**
 * A harness process of tests/store/holder-harness.ts on this runtime, for the one-writer tests
 * (SQLite and PostgreSQL): its lines on stdout one by one, its log, and its commands.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { tsCommand } from "../helpers/runtime-command.ts";

const HARNESS = fileURLToPath(new URL("./holder-harness.ts", import.meta.url));
const children = new Set<ChildProcess>();

/** Kills every harness process still running (a test's `after`). */
export function stopHarnessProcesses(): void {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
}

/** A harness process: its lines on stdout one by one, its log, and a way to command it. */
export class HarnessProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  log = "";
  readonly #lines: string[] = [];
  #waiting: ((line: string) => void) | undefined;

  /** A harness on `store`: a SQLite file, or `postgres://…#table`. */
  constructor(store: string, mode: "plain" | "takeover") {
    const [command, args] = tsCommand(HARNESS, [store, mode]);
    this.child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    children.add(this.child);
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
    let buffered = "";
    this.child.stdout!.setEncoding("utf8");
    this.child.stdout!.on("data", (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        const waiting = this.#waiting;
        this.#waiting = undefined;
        if (waiting) waiting(line);
        else this.#lines.push(line);
      }
    });
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (chunk: string) => (this.log += chunk));
  }

  /** The next line it prints. */
  next(): Promise<string> {
    const line = this.#lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve, reject) => {
      this.#waiting = resolve;
      this.exited.then((code) => reject(new Error(`harness exited ${code}: ${this.log}`)));
    });
  }

  /** Sends a command; its answer. */
  ask(command: string): Promise<string> {
    this.child.stdin!.write(`${command}\n`);
    return this.next();
  }

  /** The URL it listens on (its first line). */
  async listening(): Promise<string> {
    const line = await this.next();
    assert.match(line, /^listening ws:\/\//, this.log);
    return line.slice("listening ".length);
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    assert.equal(await this.ask("close"), "closed");
    await this.exited;
  }
}

/** Polls `check` until it holds (every 20 ms, 20 s at most). */
export async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}
