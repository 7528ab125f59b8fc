/**
 * A JSON-lines remote call between the conformance suite and its agents (an executor or a
 * harness running in a child process on Node, Deno or Bun). Requests go on the child's stdin,
 * answers come back on its stdout marked with a prefix, so stray output of the runtime cannot be
 * taken for an answer. Calls run concurrently (a pending tool call while the link is cut).
 *
 * Errors cross as plain data (name, message, and the fields the scenarios check: code, reason,
 * status, data); the in-process agent goes through the same encoding, so every cell sees the
 * same shapes.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { tsCommand } from "../helpers/runtime-command.ts";

/** The repository root. */
export const ROOT: string = fileURLToPath(new URL("../../", import.meta.url));
const MARK = "@@conformance ";

/** A runtime that runs agents. */
export type Runtime = "node" | "deno" | "bun";

/** An error as it crosses the wire. */
export interface WireError {
  name: string;
  message: string;
  code?: number;
  reason?: string;
  status?: number;
  data?: unknown;
}

/** An error rebuilt from the wire: scenarios check `name`, `code`, `reason`, `status`. */
export class AgentError extends Error {
  readonly code?: number;
  readonly reason?: string;
  readonly status?: number;
  readonly data?: unknown;
  constructor(wire: WireError) {
    super(wire.message);
    this.name = wire.name;
    this.code = wire.code;
    this.reason = wire.reason;
    this.status = wire.status;
    this.data = wire.data;
  }
}

/** The wire form of any thrown value. */
export function encodeError(error: unknown): WireError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const e = error as Error & Record<string, unknown>;
  const wire: WireError = { name: e.name, message: e.message };
  if (typeof e.code === "number") wire.code = e.code;
  if (typeof e.reason === "string") wire.reason = e.reason;
  if (typeof e.status === "number") wire.status = e.status;
  if (e.data !== undefined) wire.data = JSON.parse(JSON.stringify(e.data));
  return wire;
}

/** Methods that take and return JSON: what an agent offers. */
// deno-lint-ignore no-explicit-any
type AnyMethod = (...args: any[]) => Promise<unknown>;

/** The callable view of an agent, local or remote: same methods, JSON in and out. */
export type Remote<T> = {
  [K in keyof T as T[K] extends AnyMethod ? K : never]: T[K];
};

/** An agent used in-process, with results and errors passed through the wire encoding. */
export function local<T extends object>(agent: T): Remote<T> {
  return new Proxy({}, {
    get: (_target, method) => async (...args: unknown[]) => {
      const fn = (agent as Record<string | symbol, AnyMethod>)[method];
      if (typeof fn !== "function") throw new Error(`no method ${String(method)}`);
      try {
        const result = await fn.apply(agent, JSON.parse(JSON.stringify(args)));
        return result === undefined ? undefined : JSON.parse(JSON.stringify(result));
      } catch (error) {
        throw new AgentError(encodeError(error));
      }
    },
  }) as Remote<T>;
}

/** Child side: serves an agent's methods on stdin/stdout until stdin ends. */
export function serveAgent(agent: object, onEnd: () => Promise<void>): void {
  const write = (message: unknown) => process.stdout.write(`${MARK}${JSON.stringify(message)}\n`);
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    let request: { id: number; method: string; args: unknown[] };
    try {
      request = JSON.parse(line);
    } catch {
      return;
    }
    const fn = (agent as Record<string, AnyMethod>)[request.method];
    Promise.resolve()
      .then(() => {
        if (typeof fn !== "function") throw new Error(`no method ${request.method}`);
        return fn.apply(agent, request.args);
      })
      .then(
        (result) => write({ id: request.id, result: result ?? null }),
        (error) => write({ id: request.id, error: encodeError(error) }),
      );
  });
  lines.on("close", () => {
    onEnd().finally(() => process.exit(0));
  });
  write({ ready: true });
}

/** Parent side: an agent in a child process. */
export class AgentProcess<T extends object> {
  readonly runtime: Runtime;
  readonly child: ChildProcess;
  /** The remote methods. */
  readonly remote: Remote<T>;
  /** What the child wrote besides answers (shown when something fails). */
  output = "";
  readonly #pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: unknown) => void }
  >();
  readonly #ready: Promise<void>;
  #nextId = 1;
  #exited = false;

  constructor(runtime: Runtime, script: string, env: Record<string, string> = {}) {
    this.runtime = runtime;
    const [command, args] = tsCommand(script, [], runtime);
    this.child = spawn(command, args, {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1", ...env },
    });
    let readyResolve!: () => void;
    let readyReject!: (e: unknown) => void;
    this.#ready = new Promise((resolve, reject) => {
      readyResolve = resolve;
      readyReject = reject;
    });
    createInterface({ input: this.child.stdout! }).on("line", (line) => {
      if (!line.startsWith(MARK)) {
        this.#note(line);
        return;
      }
      const message = JSON.parse(line.slice(MARK.length));
      if (message.ready) return readyResolve();
      const waiter = this.#pending.get(message.id);
      if (!waiter) return;
      this.#pending.delete(message.id);
      if (message.error) waiter.reject(new AgentError(message.error));
      else waiter.resolve(message.result ?? undefined);
    });
    this.child.stderr!.on("data", (chunk) => this.#note(String(chunk)));
    this.child.once("exit", (code, signal) => {
      this.#exited = true;
      const error = new Error(`${runtime} agent exited (${code ?? signal})\n${this.output}`);
      readyReject(error);
      for (const waiter of this.#pending.values()) waiter.reject(error);
      this.#pending.clear();
    });
    this.remote = new Proxy({}, {
      get: (_target, method) => (...args: unknown[]) => this.call(String(method), args),
    }) as Remote<T>;
  }

  /** Resolves once the agent serves calls. */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** Calls a method of the agent. */
  call(method: string, args: unknown[]): Promise<unknown> {
    if (this.#exited) return Promise.reject(new Error(`${this.runtime} agent has exited`));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.child.stdin!.write(`${JSON.stringify({ id, method, args })}\n`);
    });
  }

  /** Kills the agent with SIGKILL (a crash: nothing of it runs again); resolves once it exited. */
  async kill(): Promise<void> {
    if (this.#exited) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.kill("SIGKILL");
    await exited;
  }

  /** Ends the agent: closes its stdin (it cleans up and exits), then kills it if it lingers. */
  async stop(): Promise<void> {
    if (this.#exited) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  }

  #note(text: string): void {
    // Bounded: a chatty child must not grow the parent without limit.
    this.output = (this.output + text + "\n").slice(-20_000);
  }
}
