/**
 * Pseudo-terminals on Bun through its built-in `Bun.spawn(argv, { terminal })` (node-pty's data
 * callbacks do not fire on Bun). The program leads its own session on the PTY, as with node-pty.
 */
import { type PtyHost, PtySpawnError } from "./pty.ts";
import { loginShell, resolveProgram } from "./pty.node.ts";
import { sessionPty } from "./pty-session.node.ts";

/** Bun's terminal and subprocess, typed locally so other checkers compile this file. */
interface BunTerminal {
  readonly closed: boolean;
  /** Writes what the PTY takes now; returns the number of bytes written. */
  write(data: Uint8Array): number;
  resize(cols: number, rows: number): void;
  close(): void;
}
interface BunSubprocess {
  readonly pid: number;
  readonly exited: Promise<number>;
  readonly exitCode: number | null;
  readonly signalCode: string | null;
  readonly terminal?: BunTerminal;
}
interface BunTerminalOptions {
  cols: number;
  rows: number;
  name: string;
  data(terminal: BunTerminal, bytes: Uint8Array): void;
  drain(terminal: BunTerminal): void;
  exit(terminal: BunTerminal, status: number, signal: string | null): void;
}
interface BunRuntime {
  spawn(argv: string[], options: {
    cwd: string;
    env: Record<string, string>;
    terminal: BunTerminalOptions;
  }): BunSubprocess;
}

function bun(): BunRuntime | undefined {
  return (globalThis as { Bun?: BunRuntime }).Bun;
}

/**
 * How long the PTY may stay open after its program exited (a process holding it that the
 * hang-up did not end): then it is closed and the exit reported.
 */
const DRAIN_AFTER_EXIT_MS = 500;

const spawn: PtyHost["spawn"] = (options, events) => {
  const runtime = bun();
  if (!runtime) throw new PtySpawnError("pty.bun.ts needs the Bun runtime");
  const file = resolveProgram(options.argv[0], options.env, options.cwd);
  // Input the terminal did not take yet, written on `drain`, in order.
  const queue: Uint8Array[] = [];
  let queued = 0;
  // What the terminal took since its last `drain`: Bun's writer holds what the PTY does not take
  // and answers as if all were written, and calls `drain` once it holds nothing (after every
  // write).
  let held = 0;
  const flush = (terminal: BunTerminal | undefined) => {
    while (terminal && !terminal.closed && queue.length > 0) {
      const head = queue[0];
      const written = Math.min(Math.max(terminal.write(head), 0), head.byteLength);
      queued -= written;
      held += written;
      if (written >= head.byteLength) queue.shift();
      else {
        if (written > 0) queue[0] = head.subarray(written);
        return;
      }
    }
  };
  let drained!: () => void;
  const ptyClosed = new Promise<void>((resolve) => (drained = resolve));
  let child: BunSubprocess;
  try {
    child = runtime.spawn([file, ...options.argv.slice(1)], {
      cwd: options.cwd,
      env: { ...options.env },
      terminal: {
        cols: options.cols,
        rows: options.rows,
        name: options.env.TERM ?? "xterm-256color",
        // Copied: the callback's view may be of a buffer Bun reads into again.
        data: (_, bytes) => events.data(bytes.slice()),
        drain: (terminal) => {
          held = 0;
          flush(terminal);
        },
        exit: () => drained(),
      },
    });
  } catch (error) {
    throw new PtySpawnError(`cannot start the program: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const terminal = child.terminal;
  const pid = child.pid;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    // Input the program will never read is not held.
    queue.length = 0;
    queued = 0;
    held = 0;
    try {
      if (terminal && !terminal.closed) terminal.close();
    } catch { /* already closed */ }
  };
  void child.exited.then(async () => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      ptyClosed,
      new Promise<void>((resolve) => (timer = setTimeout(resolve, DRAIN_AFTER_EXIT_MS))),
    ]);
    clearTimeout(timer);
    close();
    events.exit({ exitCode: child.signalCode ? null : child.exitCode, signal: child.signalCode });
  });
  return sessionPty(pid, {
    write: (bytes) => {
      queue.push(bytes);
      queued += bytes.byteLength;
      flush(terminal);
    },
    queuedInput: () => queued + held,
    resize: (cols, rows) => terminal?.resize(cols, rows),
    close,
  });
};

/** PTYs through `Bun.spawn({ terminal })`: Bun on Linux and macOS. */
export const bunPty: PtyHost = {
  name: "bun",
  available: () => bun() !== undefined && process.platform !== "win32",
  defaultArgv: loginShell,
  spawn,
};
