/**
 * What the benchmark's processes share: the runtime they run on, the line protocol between the
 * orchestrator (`main.ts`) and its children (`child.ts`), the load loops, and the frame every
 * case sends, so the raw echo carries a frame of exactly the size of a tool call's.
 */
import { createInterface } from "node:readline";

/** The runtime this process runs on. */
export const RUNTIME: "node" | "deno" | "bun" = "Deno" in globalThis
  ? "deno"
  : "Bun" in globalThis
  ? "bun"
  : "node";

/** The subprotocol every case negotiates. */
export const PROTOCOL = "bma.executor.v1.1";

/** The tool every case calls, and its input: small, like a real call's. */
export const TOOL = "echo";
/** The `text` input of each call. */
export const INPUT_TEXT = "print the working directory and list it: pwd && ls -la";
/** The session every tool-call case runs in. */
export const SESSION_ID = "ses_bench";

/**
 * The `tool.call` frame the harness sends for one call (the id and tool_call_id are as long as
 * the real ones): the raw echo sends a frame of this size.
 */
export function toolCallFrame(): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id: 100_000,
    method: "tool.call",
    params: {
      session_id: SESSION_ID,
      tool_call_id: `call_${"0".repeat(24)}`,
      tool: TOOL,
      input: { text: INPUT_TEXT },
    },
  });
}

/** What a measurement answers. */
export interface Measured {
  /** Operations completed. */
  count: number;
  /** Over how many ms. */
  ms: number;
  /** CPU time this process used meanwhile (user + system), µs: a cross-check under load. */
  cpuUs?: number;
}

/**
 * Runs `op` with `inflight` operations outstanding at any time for `ms` milliseconds (each
 * lane starts the next operation when its previous one has finished) and counts completions.
 */
export async function measureLoop(
  op: () => Promise<unknown>,
  inflight: number,
  ms: number,
): Promise<Measured> {
  let count = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  const end = started + ms;
  let stop = false;
  const lane = async () => {
    while (!stop) {
      await op();
      count++;
      if (performance.now() >= end) stop = true;
    }
  };
  await Promise.all(Array.from({ length: inflight }, lane));
  const used = process.cpuUsage(cpu);
  return { count, ms: performance.now() - started, cpuUs: used.user + used.system };
}

/** A command from the orchestrator. */
export interface Command {
  cmd: string;
  [key: string]: unknown;
}

/** Prefix of the lines a child writes for the orchestrator (anything else is a log line). */
export const LINE_PREFIX = "@bench ";

/** Tells the orchestrator something (one JSON line on stdout). */
export function report(message: Record<string, unknown>): void {
  process.stdout.write(`${LINE_PREFIX}${JSON.stringify(message)}\n`);
}

/**
 * Serves the orchestrator's commands, one at a time, in order: each answer is reported with the
 * command's `seq`. Resolves when stdin closes or the command `exit` arrives.
 */
export function serveCommands(
  handle: (command: Command) => Promise<Record<string, unknown>>,
): Promise<void> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin });
    let chain = Promise.resolve();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      lines.close();
      resolve();
    };
    lines.on("line", (line) => {
      if (!line.trim()) return;
      const command = JSON.parse(line) as Command;
      chain = chain.then(async () => {
        if (done) return;
        if (command.cmd === "exit") {
          report({ seq: command.seq, ok: true });
          finish();
          return;
        }
        try {
          report({ seq: command.seq, ok: true, ...(await handle(command)) });
        } catch (error) {
          report({ seq: command.seq, ok: false, error: String((error as Error)?.stack ?? error) });
        }
      });
    });
    lines.on("close", () => void chain.then(finish));
  });
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
