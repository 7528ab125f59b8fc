/**
 * Pseudo-terminals on Node and Deno through `@lydell/node-pty` (node-pty with prebuilt
 * binaries shipped as npm packages). The library is loaded on first use, so importing this file
 * costs nothing where terminals are not served. On Bun its data callbacks never fire: use
 * `pty.bun.ts` there.
 */
import { fstatSync, readSync, writeSync } from "node:fs";
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
  readonly _socket?: {
    on(event: "end" | "close", listener: () => void): unknown;
    write(data: Uint8Array, callback: (error?: Error | null) => void): unknown;
  };
  onData(listener: (data: Uint8Array) => void): unknown;
  onExit(listener: (exit: { exitCode: number; signal?: number }) => void): unknown;
  write(data: Uint8Array | string): void;
  resize(cols: number, rows: number): void;
  destroy(): void;
}

let loaded: NodePtyModule | Error | undefined;

/** How often the event loop is woken while a terminal's exit is awaited (see `spawn`). */
const EXIT_WAKE_MS = 20;
/**
 * How long input the PTY did not take waits before the next try: from the shortest, doubled
 * while the program takes nothing, to the longest (nothing tells when a PTY has room again).
 */
const INPUT_RETRY_MIN_MS = 1;
const INPUT_RETRY_MAX_MS = 32;
/** Most bytes handed to the PTY's stream at once where `node:fs` cannot reach its fd (Deno). */
const STREAM_INPUT_BYTES = 64 * 1024;

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
  const input = new PtyInput(term);
  term._socket?.on("close", () => input.drop());
  term.onExit(({ exitCode, signal }) => {
    exited = true;
    clearInterval(waking);
    input.drop();
    events.exit({ exitCode: signal ? null : exitCode, signal: signalName(signal) });
  });
  return sessionPty(pid, {
    write: (bytes) => input.write(bytes),
    queuedInput: () => input.queued,
    resize: (cols, rows) => term.resize(cols, rows),
    close: () => {
      input.drop();
      if (exited) return;
      exited = true;
      try {
        term.destroy();
      } catch { /* already closed */ }
    },
  });
};

/**
 * Input on its way to a PTY, never blocking the event loop. node-pty writes through a
 * `tty.ReadStream` on the PTY's master, which libuv cannot reopen non-blocking and so writes in
 * blocking mode: on a descriptor node-pty made non-blocking, libuv retries EAGAIN in a loop, and
 * input beyond what the PTY holds (about 15 KiB) to a program that does not read spins the
 * whole executor at 100 % CPU until the program reads. Here the descriptor is written directly:
 * what the PTY takes now goes, the rest waits in order and is tried again on a timer. Where
 * `node:fs` does not know node-pty's descriptor (Deno), the stream takes one chunk at a time,
 * the next once it has written the last (Deno's stream does not block).
 */
class PtyInput {
  readonly #term: NodePtyTerminal;
  /** Whether `node:fs` reaches the PTY's descriptor (Node), checked once. */
  readonly #direct: boolean;
  readonly #chunks: Uint8Array[] = [];
  #queued = 0;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #retryMs = INPUT_RETRY_MIN_MS;
  /** A chunk the stream has not written yet (Deno). */
  #inStream = false;
  #dropped = false;

  constructor(term: NodePtyTerminal) {
    this.#term = term;
    this.#direct = term._fd !== undefined && reachable(term._fd);
  }

  /** Bytes written that the PTY has not taken yet. */
  get queued(): number {
    return this.#queued;
  }

  write(bytes: Uint8Array): void {
    if (this.#dropped) throw new Error("the PTY is closed");
    this.#chunks.push(bytes);
    this.#queued += bytes.byteLength;
    if (this.#retry === undefined && !this.#inStream) this.#pump();
  }

  /**
   * Forgets what waits, for good: the PTY is closed (its descriptor may be another file's by
   * now) or its program has exited.
   */
  drop(): void {
    this.#dropped = true;
    clearTimeout(this.#retry);
    this.#retry = undefined;
    this.#chunks.length = 0;
    this.#queued = 0;
  }

  #pump(): void {
    this.#retry = undefined;
    if (this.#direct) this.#writeDirect();
    else this.#writeStream();
  }

  #writeDirect(): void {
    const fd = this.#term._fd!;
    let took = false;
    while (!this.#dropped && this.#chunks.length > 0) {
      let written: number;
      try {
        written = writeSync(fd, this.#chunks[0]);
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (code !== "EAGAIN" && code !== "EINTR") return this.drop(); // EIO: closed
        this.#retryMs = took ? INPUT_RETRY_MIN_MS : Math.min(this.#retryMs * 2, INPUT_RETRY_MAX_MS);
        this.#retry = setTimeout(() => this.#pump(), this.#retryMs);
        return;
      }
      took ||= written > 0;
      this.#taken(written);
    }
    this.#retryMs = INPUT_RETRY_MIN_MS;
  }

  #writeStream(): void {
    const stream = this.#term._socket;
    if (this.#dropped || this.#chunks.length === 0 || !stream) return;
    const chunk = this.#chunks[0].subarray(0, STREAM_INPUT_BYTES);
    this.#inStream = true;
    stream.write(chunk, (error) => {
      this.#inStream = false;
      if (this.#dropped) return;
      if (error) return this.drop();
      this.#taken(chunk.byteLength);
      this.#writeStream();
    });
  }

  /** The PTY took `n` bytes from the head. */
  #taken(n: number): void {
    const head = this.#chunks[0];
    if (n >= head.byteLength) this.#chunks.shift();
    else this.#chunks[0] = head.subarray(n);
    this.#queued -= n;
  }
}

/** Whether `node:fs` knows descriptor `fd` (Deno's knows only those it opened itself). */
function reachable(fd: number): boolean {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
}

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
