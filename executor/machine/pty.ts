/**
 * The one seam between the terminal table and a runtime's pseudo-terminals: a {@linkcode PtyHost}
 * starts a program on a new PTY and hands back a small {@linkcode Pty}. `pty.node.ts` implements
 * it with `@lydell/node-pty` (Node and Deno), `pty.bun.ts` with `Bun.spawn({ terminal })`.
 */

/** What a PTY is started with. Everything is decided by the caller (defaults included). */
export interface PtySpawnOptions {
  /** Program and arguments (`argv[0]` is looked up on `PATH` from `env`). */
  readonly argv: readonly string[];
  /** Working directory (already confined to the workdir). */
  readonly cwd: string;
  /** The whole environment of the program. */
  readonly env: Readonly<Record<string, string>>;
  /** Columns of the window. */
  readonly cols: number;
  /** Rows of the window. */
  readonly rows: number;
}

/** How the program on a PTY ended. */
export interface PtyExit {
  /** Its exit code; `null` when a signal ended it. */
  readonly exitCode: number | null;
  /** The signal that ended it, if one did (e.g. `SIGHUP`). */
  readonly signal: string | null;
}

/** What a PTY reports, given when it is started so that no early byte is missed. */
export interface PtyEvents {
  /** Output of the PTY, in order. */
  data(bytes: Uint8Array): void;
  /**
   * The program has exited and the PTY's output has been drained; called once, after the last
   * `data`.
   */
  exit(exit: PtyExit): void;
}

/** A program running on a pseudo-terminal. */
export interface Pty {
  /** The program's pid: the leader of the terminal's session and process group. */
  readonly pid: number;
  /**
   * Writes input, as if typed, without ever blocking: what the PTY does not take now waits in
   * memory, in order, until the program reads.
   */
  write(bytes: Uint8Array): void;
  /**
   * Bytes given to {@linkcode write} that the PTY has not taken yet. Optional for a host of
   * one's own: without it, the input a terminal holds is not bounded.
   */
  queuedInput?(): number;
  /** Sets the window size (the foreground process gets SIGWINCH). */
  resize(cols: number, rows: number): void;
  /**
   * Sends a signal to every process of the terminal's session (its process group, and the other
   * groups a shell with job control made in it). False when none was there to receive it.
   */
  signal(signal: "SIGHUP" | "SIGKILL"): boolean;
  /** Whether any process of the terminal's session is still alive (the leader or a job). */
  alive(): boolean;
  /** Releases the PTY (its file descriptors). Idempotent. */
  close(): void;
}

/** Starts programs on pseudo-terminals: one per runtime. */
export interface PtyHost {
  /** Which implementation this is (for logs): `node-pty`, `bun`. */
  readonly name: string;
  /** Whether PTYs can be started here (the library loads, the OS has PTYs). */
  available(): boolean;
  /** The program a terminal runs when `terminal.open` names none: the user's login shell. */
  defaultArgv(): string[];
  /** Starts `options.argv`; throws {@linkcode PtySpawnError} when the program cannot start. */
  spawn(options: PtySpawnOptions, events: PtyEvents): Pty;
}

/** The program of a terminal could not be started (not found, not executable, no PTY). */
export class PtySpawnError extends Error {
  /** `message` says what could not start; `cause` is the library's error, if any. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PtySpawnError";
  }
}
