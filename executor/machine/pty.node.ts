/**
 * Pseudo-terminals on Node and Deno through `@lydell/node-pty` (node-pty with prebuilt
 * binaries shipped as npm packages). The library is loaded on first use, so importing this file
 * costs nothing where terminals are not served. On Bun its data callbacks never fire: use
 * `pty.bun.ts` there.
 */
import { readSync } from "node:fs";
import { createRequire } from "node:module";
import { findExecutable } from "./executable.node.ts";
import { type PtyHost, PtySpawnError } from "./pty.ts";
import { loginUser } from "./login-user.node.ts";
import { sessionPty, signalName } from "./pty-session.node.ts";

/** The part of `@lydell/node-pty` used here, typed locally. */
interface NodePtyModule {
  spawn(file: string, args: string[], options: {
    name: string;
    cols: number;
    rows: number;
    cwd: string;
    env: Record<string, string>;
    encoding: null;
  }): NodePtyTerminal;
}
interface NodePtyTerminal {
  readonly pid: number;
  /** node-pty's master side (private in 1.1.0): the PTY's file descriptor and its stream. */
  readonly _fd?: number;
  readonly _socket?: { on(event: "end" | "close", listener: () => void): unknown };
  onData(listener: (data: Uint8Array) => void): unknown;
  onExit(listener: (exit: { exitCode: number; signal?: number }) => void): unknown;
  write(data: Uint8Array | string): void;
  resize(cols: number, rows: number): void;
  destroy(): void;
}

let loaded: NodePtyModule | Error | undefined;

/** How often the event loop is woken while a terminal's exit is awaited (see `spawn`). */
const EXIT_WAKE_MS = 20;

function load(): NodePtyModule {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)("@lydell/node-pty") as NodePtyModule;
    } catch (error) {
      loaded = error instanceof Error ? error : new Error(String(error));
    }
  }
  if (loaded instanceof Error) {
    throw new PtySpawnError(`@lydell/node-pty cannot be loaded: ${loaded.message}`, {
      cause: loaded,
    });
  }
  return loaded;
}

/** The user's login shell, run as a login shell. */
export function loginShell(): string[] {
  return [loginUser()?.shell || process.env.SHELL || "/bin/sh", "-l"];
}

/**
 * Finds the program as `execvp` would (a name with a slash relative to `cwd`, else on `PATH`),
 * so that a missing one is an error of `terminal.open` rather than a message on the terminal.
 */
export function resolveProgram(name: string, env: Readonly<Record<string, string>>, cwd: string) {
  const file = findExecutable(name, env.PATH, cwd);
  if (file !== undefined) return file;
  throw new PtySpawnError(`cannot start the program: ${name} not found or not executable`);
}

const spawn: PtyHost["spawn"] = (options, events) => {
  const library = load();
  const file = resolveProgram(options.argv[0], options.env, options.cwd);
  let term: NodePtyTerminal;
  try {
    term = library.spawn(file, options.argv.slice(1), {
      name: options.env.TERM ?? "xterm-256color",
      cols: options.cols,
      rows: options.rows,
      cwd: options.cwd,
      env: { ...options.env },
      encoding: null,
    });
  } catch (error) {
    throw new PtySpawnError(`cannot start the program: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const pid = term.pid;
  let exited = false;
  term.onData((data) => events.data(data));
  // libuv takes a short read after POLLHUP for the end of a PTY master (libuv#4992, fixed in
  // libuv releases after Node 20's): a program that writes and exits at once loses its last
  // bytes. What is still in the PTY is read here, before node-pty closes it and reports the exit.
  term._socket?.on("end", () => {
    if (term._fd === undefined) return;
    const chunk = new Uint8Array(64 * 1024);
    for (;;) {
      let n: number;
      try {
        n = readSync(term._fd, chunk);
      } catch {
        return; // EAGAIN (drained) or EIO (closed)
      }
      if (n <= 0) return;
      events.data(chunk.slice(0, n));
    }
  });
  // node-pty reports the exit once the PTY's output is drained (its socket closed), from its
  // waitpid thread. Deno runs such a thread's callback only when its event loop wakes for
  // something else: until the exit is in, a timer wakes it.
  let waking: ReturnType<typeof setInterval> | undefined;
  term._socket?.on("close", () => {
    if (!exited) waking ??= setInterval(() => {}, EXIT_WAKE_MS);
  });
  term.onExit(({ exitCode, signal }) => {
    exited = true;
    clearInterval(waking);
    events.exit({ exitCode: signal ? null : exitCode, signal: signalName(signal) });
  });
  return sessionPty(pid, {
    write: (bytes) => term.write(bytes),
    resize: (cols, rows) => term.resize(cols, rows),
    close: () => {
      if (exited) return;
      exited = true;
      try {
        term.destroy();
      } catch { /* already closed */ }
    },
  });
};

/** PTYs through `@lydell/node-pty`: Node and Deno (not Windows, not Bun). */
export const nodePty: PtyHost = {
  name: "node-pty",
  available() {
    if (process.platform === "win32" || "Bun" in globalThis) return false;
    try {
      load();
      return true;
    } catch {
      return false;
    }
  },
  defaultArgv: loginShell,
  spawn,
};
