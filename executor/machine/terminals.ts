/**
 * The terminal capability (`terminal.*`) of one session, runtime-neutral: programs on
 * pseudo-terminals from an injected {@linkcode PtyHost}, their output kept as an
 * offset-addressed log that streams out as `terminal.output` and can be caught up with
 * `terminal.read`, input, resize, and an end for each of them (SIGHUP to the terminal's
 * processes, SIGKILL after the grace period, the PTY closed).
 *
 * "The terminal's processes" are those of the PTY's session ({@linkcode Pty.signal}) and, when
 * the machine placed the program in a scope of its own ({@linkcode TerminalScope}: a cgroup of
 * the session), every process in that scope, a `setsid` descendant included.
 */
import type {
  TerminalCloseParams,
  TerminalCloseResult,
  TerminalInputParams,
  TerminalInputResult,
  TerminalOpenParams,
  TerminalOpenResult,
  TerminalOutputParams,
  TerminalReadParams,
  TerminalReadResult,
  TerminalResizeParams,
  TerminalResizeResult,
} from "../../protocol/generated/contract.ts";
import { NotFoundError, ResourceExhaustedError } from "../../protocol/generated/errors.ts";
import type { Disposable } from "../../protocol/peer.ts";
import { traceContextOf, traceEnvironment } from "../../protocol/trace-context.ts";
import type { ExecutorClient } from "../client.ts";
import { decodeChunk, encodeChunk, OutputBuffer, utf8Boundary } from "./output-buffer.ts";
import { type Clock, MAX_TIMER_MS } from "../../protocol/clock.ts";
import { LossyOutput } from "./lossy-output.ts";
import { type Pty, type PtyExit, type PtyHost, PtySpawnError } from "./pty.ts";

/** Options of a {@linkcode TerminalTable}. */
export interface TerminalTableOptions {
  sessionId: string;
  /** Starts the PTYs. */
  pty: PtyHost;
  /**
   * Resolves `terminal.open`'s `cwd` inside the session workdir; throws the contract's error
   * (-32001 `path_outside_workdir`) for a path outside it.
   */
  resolveCwd(path: string): Promise<string>;
  /**
   * The whole environment of a terminal's program, given what the terminal adds (`TERM` and
   * `terminal.open`'s `env`): the machine puts `extra` through the same child-environment policy
   * as every other source (its `drop` list, no secret of the executor's).
   */
  env(extra: Readonly<Record<string, string>>): Record<string, string>;
  /**
   * Starts a terminal's program as a process of its session, to be ended with the others:
   * calls `launch` once (with the argv to start, e.g. wrapped to enter a cgroup, and that scope)
   * and resolves with what it returned, or throws (the contract's error, or a
   * {@linkcode PtySpawnError}). Default: `launch(argv)`.
   */
  place?(
    argv: readonly string[],
    launch: LaunchTerminal,
    context: { readonly cwd: string; readonly env: Readonly<Record<string, string>> },
  ): Promise<TerminalMember>;
  /** Streams output as it arrives (the executor sends it as `terminal.output`; lossy). */
  onOutput?: (params: TerminalOutputParams) => void;
  /** Time between SIGHUP and SIGKILL. Default 2 s. */
  graceMs?: number;
  /** Bytes of output kept per terminal for `terminal.read`. Default 8 MiB. */
  bufferBytes?: number;
  /** Terminals open at once in the session. Default 64. */
  maxOpen?: number;
  /**
   * Terminals open (or opening) on the whole executor now, and how many it takes: past it a
   * `terminal.open` is refused as past `maxOpen`. Default: no executor-wide bound.
   */
  executor?: { open(): number; readonly max: number };
}

/**
 * Where the machine keeps a terminal's processes beyond the PTY's session (a cgroup of the
 * session): what `setsid` takes out of the session stays in it.
 */
export interface TerminalScope {
  /** Sends `signal` to every process in the scope; true when any received it. */
  signal(signal: "SIGHUP" | "SIGKILL"): boolean;
  /** Whether any process is in the scope (zombies do not count). */
  alive(): boolean;
}

/** A started terminal, as the session's process tracking sees it. */
export interface TerminalMember {
  /** The pid of the terminal's program, the leader of the PTY's session. */
  readonly pid: number;
  /**
   * Ends the terminal (SIGHUP to its processes, SIGKILL after `graceMs`, the PTY closed);
   * resolves once none of its processes is left. Joins an end already under way.
   */
  terminate(graceMs: number): Promise<void>;
  /** Resolves once the terminal has ended, by {@linkcode terminate} or by itself. */
  readonly ended: Promise<void>;
}

/**
 * Starts the terminal's program on its PTY: `argv` as given (the program, or a wrapper that
 * enters `scope` and execs it), the terminal's other processes looked for in `scope` too.
 * Throws {@linkcode PtySpawnError} (or the contract's error) when it cannot start.
 */
export type LaunchTerminal = (argv: readonly string[], scope?: TerminalScope) => TerminalMember;

type State = "open" | "closing" | "closed";

interface Entry {
  readonly id: string;
  readonly pty: Pty;
  readonly scope: TerminalScope | undefined;
  readonly buffer: OutputBuffer;
  state: State;
  exit: PtyExit | undefined;
  /** Resolves when the program has exited and its output is drained. */
  readonly exited: Promise<void>;
  /** Resolves when no process of the terminal is left and the PTY is closed. */
  ended: Promise<void> | undefined;
  /** Resolves once {@linkcode Entry.ended} has (however the end came about). */
  readonly done: Promise<void>;
  finish(): void;
}

/** Most bytes one `terminal.read` answers with, whatever `max_bytes` asks (frames stay small). */
const MAX_READ_BYTES = 1024 * 1024;
const DEFAULT_READ_BYTES = 64 * 1024;
/**
 * Most input a terminal holds that its program has not read (each byte is held in memory), as
 * for a process's stdin: a `terminal.input` beyond it is refused (-32009 `input_full`), to be
 * sent again once the program reads.
 */
const INPUT_QUEUE_BYTES = 8 * 1024 * 1024;
/** Closed terminals kept readable per session, beyond which the oldest are forgotten. */
const KEPT_CLOSED = 64;
/** How often a terminal's processes are looked for while they are given time to end. */
const SWEEP_POLL_MS = 25;
/** How long to wait for the processes to vanish after SIGKILL, at least. */
const KILL_WAIT_MS = 5_000;

/** The terminals of one session. */
export class TerminalTable {
  readonly #options: TerminalTableOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #opening = new Map<string, Promise<TerminalOpenResult>>();
  #counter = 0;

  constructor(options: TerminalTableOptions) {
    this.#options = options;
  }

  /** `terminal.open`: idempotent by a harness-chosen `terminal_id`. */
  open(params: TerminalOpenParams): Promise<TerminalOpenResult> {
    const requested = params.terminal_id;
    if (requested !== undefined) {
      const existing = this.#entries.get(requested);
      if (existing) {
        return Promise.resolve({ terminal_id: requested, pid: existing.pty.pid, duplicate: true });
      }
      // A retry while the first open is still starting the program answers the same terminal.
      const opening = this.#opening.get(requested);
      if (opening) return opening.then((opened) => ({ ...opened, duplicate: true }));
    }
    const executor = this.#options.executor;
    if (this.openCount >= (this.#options.maxOpen ?? 64)) {
      return Promise.reject(
        new ResourceExhaustedError("too many terminals open", { reason: "too_many_terminals" }),
      );
    }
    if (executor && executor.open() >= executor.max) {
      return Promise.reject(
        new ResourceExhaustedError("too many terminals open on this executor", {
          reason: "too_many_terminals",
        }),
      );
    }
    const id = requested ?? `t_${++this.#counter}_${crypto.randomUUID().slice(0, 8)}`;
    const opening = this.#start(id, params).finally(() => this.#opening.delete(id));
    this.#opening.set(id, opening);
    return opening;
  }

  /** Terminals open or opening in the session. */
  get openCount(): number {
    let open = this.#opening.size;
    for (const entry of this.#entries.values()) if (entry.state !== "closed") open++;
    return open;
  }

  /** `terminal.input`: bytes to the PTY, as typed. */
  input(params: TerminalInputParams): TerminalInputResult {
    const entry = this.#live(params.terminal_id);
    const bytes = decodeChunk(params.data, params.encoding);
    const queued = entry.pty.queuedInput?.() ?? 0;
    if (queued > 0 && queued + bytes.byteLength > INPUT_QUEUE_BYTES) {
      throw new ResourceExhaustedError(
        "the terminal's input is full: its program has not read what it was sent",
        { reason: "input_full" },
      );
    }
    if (bytes.byteLength > 0) this.#onPty(entry, () => entry.pty.write(bytes));
    return { written: bytes.byteLength };
  }

  /** `terminal.resize`. */
  resize(params: TerminalResizeParams): TerminalResizeResult {
    const entry = this.#live(params.terminal_id);
    this.#onPty(entry, () => entry.pty.resize(params.cols, params.rows));
    return { cols: params.cols, rows: params.rows };
  }

  /** `terminal.read`: catch up from an offset, waiting up to `wait_ms` for new output. */
  async read(params: TerminalReadParams, signal?: AbortSignal): Promise<TerminalReadResult> {
    const entry = this.#get(params.terminal_id);
    const buffer = entry.buffer;
    const offset = params.offset ?? 0;
    if (params.wait_ms) {
      const timeout = AbortSignal.timeout(Math.min(params.wait_ms, MAX_TIMER_MS));
      await buffer.waitBeyond(offset, signal ? AbortSignal.any([signal, timeout]) : timeout);
    }
    const most = Math.min(params.max_bytes ?? DEFAULT_READ_BYTES, MAX_READ_BYTES);
    const slice = buffer.read(offset, most);
    // Cut on a character boundary so text stays text (unless the output ended there).
    const keep = slice.eof ? slice.bytes.length : utf8Boundary(slice.bytes) || slice.bytes.length;
    const bytes = slice.bytes.subarray(0, keep);
    const { data, encoding } = encodeChunk(bytes);
    const next = slice.offset + bytes.byteLength;
    const eof = buffer.closed && next === buffer.end;
    return {
      terminal_id: params.terminal_id,
      offset: slice.offset,
      data,
      encoding,
      next_offset: next,
      eof,
      ...(eof ? { exit_code: entry.exit?.exitCode ?? null } : {}),
    };
  }

  /**
   * `terminal.close`: SIGHUP to the terminal's processes, SIGKILL after the grace period, the
   * PTY closed; answers once they are gone. `closed: false` for an unknown or exited terminal.
   */
  async close(params: TerminalCloseParams): Promise<TerminalCloseResult> {
    const entry = this.#entries.get(params.terminal_id);
    if (!entry) return { closed: false };
    if (entry.exit) {
      // It exited by itself (or another close ended it): wait for its processes, report it.
      await this.#end(entry, this.#grace);
      return { closed: false, exit_code: entry.exit.exitCode };
    }
    await this.#end(entry, this.#grace);
    return { closed: true, exit_code: (entry as Entry).exit?.exitCode ?? null };
  }

  /** Ends every terminal of the session and waits until none of their processes is left. */
  async closeAll(graceMs = this.#grace): Promise<void> {
    await Promise.allSettled([...this.#opening.values()]);
    await Promise.all([...this.#entries.values()].map((entry) => this.#end(entry, graceMs)));
  }

  get #grace(): number {
    return this.#options.graceMs ?? 2_000;
  }

  async #start(id: string, params: TerminalOpenParams): Promise<TerminalOpenResult> {
    const options = this.#options;
    const cwd = await options.resolveCwd(params.cwd ?? ".");
    // The request's own trace context (`params._meta`), under its own `env` (which wins).
    const env = options.env({
      TERM: "xterm-256color",
      ...traceEnvironment(traceContextOf(params)),
      ...params.env,
    });
    const buffer = new OutputBuffer(options.bufferBytes);
    let pending = new Uint8Array(0); // an incomplete UTF-8 character held for the next chunk
    // The entry exists once spawn() returned; what the PTY reports before that waits for it.
    const started: { entry?: Entry } = {};
    const early: Uint8Array[] = [];
    const emit = (bytes: Uint8Array, exit?: PtyExit) => {
      const offset = buffer.end;
      buffer.append(bytes);
      if (exit) buffer.close();
      if (!options.onOutput || (bytes.byteLength === 0 && !exit)) return;
      const { data, encoding } = encodeChunk(bytes);
      options.onOutput({
        session_id: options.sessionId,
        terminal_id: id,
        offset,
        data,
        encoding,
        ...(exit ? { eof: true, exit_code: exit.exitCode } : {}),
      });
    };
    const data = (chunk: Uint8Array) => {
      if (!started.entry) {
        early.push(chunk);
        return;
      }
      const joined = new Uint8Array(pending.length + chunk.length);
      joined.set(pending);
      joined.set(chunk, pending.length);
      const cut = utf8Boundary(joined);
      pending = joined.slice(cut);
      emit(joined.subarray(0, cut));
    };
    let exited!: () => void;
    let earlyExit: PtyExit | undefined;
    const exit = (how: PtyExit) => {
      const entry = started.entry;
      if (!entry) {
        earlyExit = how;
        return;
      }
      if (entry.exit) return;
      entry.exit = how;
      emit(pending, how);
      pending = new Uint8Array(0);
      exited();
      // Whatever the program left running in its session ends with it.
      if (entry.state === "open") void this.#end(entry, this.#grace);
    };
    const launch: LaunchTerminal = (argv, scope) => {
      if (started.entry) throw new Error("a terminal is launched once");
      const pty = options.pty.spawn({
        argv,
        cwd,
        env,
        cols: params.cols ?? 80,
        rows: params.rows ?? 24,
      }, { data, exit });
      let finish!: () => void;
      const entry: Entry = started.entry = {
        id,
        pty,
        scope,
        buffer,
        state: "open",
        exit: undefined,
        exited: new Promise<void>((resolve) => (exited = resolve)),
        ended: undefined,
        done: new Promise<void>((resolve) => (finish = resolve)),
        finish: () => finish(),
      };
      this.#entries.set(id, entry);
      this.#forgetOldClosed();
      for (const chunk of early.splice(0)) data(chunk);
      if (earlyExit) exit(earlyExit);
      return {
        pid: pty.pid,
        terminate: (graceMs) => this.#end(entry, graceMs),
        ended: entry.done,
      };
    };
    const argv = params.argv ?? options.pty.defaultArgv();
    try {
      if (options.place) await options.place(argv, launch, { cwd, env });
      else launch(argv);
    } catch (error) {
      // Started, then refused (the session began to end meanwhile): it does not outlive this.
      if (started.entry) void this.#end(started.entry, 0);
      if (error instanceof PtySpawnError) {
        throw new NotFoundError(error.message, { reason: "spawn_failed", field: "argv" });
      }
      throw error;
    }
    const entry = started.entry;
    if (!entry) throw new Error("the terminal's program was not launched");
    return { terminal_id: id, pid: entry.pty.pid };
  }

  /** Ends a terminal once: SIGHUP, SIGKILL after `graceMs` to whatever is left, PTY closed. */
  #end(entry: Entry, graceMs: number): Promise<void> {
    if (entry.ended) return entry.ended;
    entry.state = "closing";
    entry.ended = (async () => {
      if (!entry.exit || alive(entry)) signal(entry, "SIGHUP");
      const gone = await this.#whenGone(entry, graceMs);
      if (!gone) {
        signal(entry, "SIGKILL");
        // SIGKILL cannot be ignored; the bound only keeps a wedged process from holding us.
        if (!(await this.#whenGone(entry, Math.max(graceMs, KILL_WAIT_MS)))) {
          signal(entry, "SIGKILL");
        }
      }
      entry.pty.close();
      entry.state = "closed";
    })().finally(() => entry.finish());
    return entry.ended;
  }

  /**
   * Resolves true once the program has exited and none of the terminal's processes is alive,
   * false when `ms` passed first.
   */
  async #whenGone(entry: Entry, ms: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let expired = false;
    const deadline = new Promise<void>((resolve) =>
      timer = setTimeout(() => {
        expired = true;
        resolve();
      }, ms)
    );
    try {
      await Promise.race([entry.exited, deadline]);
      while (!expired && alive(entry)) {
        // Jobs the hang-up did not end yet (or that ignore it): look again shortly.
        await Promise.race([new Promise((r) => setTimeout(r, SWEEP_POLL_MS)), deadline]);
      }
      return !expired;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Keeps at most {@linkcode KEPT_CLOSED} closed terminals (their output) per session. */
  #forgetOldClosed(): void {
    let closed = 0;
    for (const entry of [...this.#entries.values()].reverse()) {
      if (entry.state !== "closed") continue;
      if (++closed > KEPT_CLOSED) this.#entries.delete(entry.id);
    }
  }

  /** Runs an operation on a PTY that may have closed since its program exited. */
  #onPty(entry: Entry, operation: () => void): void {
    try {
      operation();
    } catch (error) {
      if (entry.exit || !alive(entry)) {
        throw new NotFoundError("the terminal has exited", { reason: "terminal_closed" });
      }
      throw error;
    }
  }

  #get(id: string): Entry {
    const entry = this.#entries.get(id);
    if (!entry) throw new NotFoundError("unknown terminal", { reason: "unknown_terminal" });
    return entry;
  }

  #live(id: string): Entry {
    const entry = this.#get(id);
    if (entry.exit || entry.state === "closed") {
      throw new NotFoundError("the terminal has exited", { reason: "terminal_closed" });
    }
    return entry;
  }
}

/** Whether any process of the terminal is alive: in the PTY's session or in its scope. */
function alive(entry: Entry): boolean {
  return entry.pty.alive() || (entry.scope?.alive() ?? false);
}

/** Signals every process of the terminal (both are tried); false when none received it. */
function signal(entry: Entry, name: "SIGHUP" | "SIGKILL"): boolean {
  const inSession = entry.pty.signal(name);
  const inScope = entry.scope?.signal(name) ?? false;
  return inSession || inScope;
}

/** Options of {@linkcode serveTerminals}. */
export interface ServeTerminalsOptions {
  /** Starts the PTYs. */
  pty: PtyHost;
  /**
   * Resolves a `cwd` inside the session workdir; what it throws answers `terminal.open` (a
   * `ForbiddenError` with reason `path_outside_workdir` for one outside).
   */
  resolveCwd(path: string): Promise<string>;
  /**
   * The whole environment of a session's terminal program, given what the terminal adds (`TERM`
   * and the request's `env`): through the session's child-environment policy.
   */
  env(sessionId: string, extra: Readonly<Record<string, string>>): Record<string, string>;
  /** Starts a terminal's program as a process of its session (see `TerminalTableOptions`). */
  place?(
    sessionId: string,
    argv: readonly string[],
    launch: LaunchTerminal,
    context: { readonly cwd: string; readonly env: Readonly<Record<string, string>> },
  ): Promise<TerminalMember>;
  /** Time between SIGHUP and SIGKILL for `terminal.close`. Default 2 s. */
  graceMs?: number;
  /** Bytes of output kept per terminal for `terminal.read`. Default 8 MiB. */
  bufferBytes?: number;
  /** Terminals open at once per session. Default 64. */
  maxOpen?: number;
  /** Terminals open at once over all sessions. Default 128. */
  maxOpenPerExecutor?: number;
  /** Times the second try of output a congested link dropped. Default: the system clock. */
  clock?: Clock;
}

/**
 * Serves `terminal.*` on a client (which advertises capability `terminal`): one
 * {@linkcode TerminalTable} per held session, ended with the session (its cleanup waits until
 * no process of its terminals is left). Dispose to withdraw the methods and end every terminal.
 */
export function serveTerminals(client: ExecutorClient, options: ServeTerminalsOptions): Disposable {
  const tables = new Map<string, TerminalTable>();
  const place = options.place;
  const output = new LossyOutput<TerminalOutputParams>(
    {
      send: (params) => client.notify("terminal.output", params),
      congested: () => client.congested,
    },
    (params) => `${params.session_id}\n${params.terminal_id}`,
    options.clock,
  );
  const executor = {
    max: options.maxOpenPerExecutor ?? 128,
    open: () => {
      let open = 0;
      for (const table of tables.values()) open += table.openCount;
      return open;
    },
  };
  const unknownSession = () => new NotFoundError("unknown session", { reason: "unknown_session" });
  const held = (sessionId: string): TerminalTable => {
    let table = tables.get(sessionId);
    if (table) return table;
    const session = client.session(sessionId);
    // A terminal must end with its session: none for one that is not held, or already ending.
    if (!session || session.state === "stopping" || session.state === "ended") {
      throw unknownSession();
    }
    const created = table = new TerminalTable({
      sessionId,
      pty: options.pty,
      resolveCwd: options.resolveCwd,
      env: (extra) => options.env(sessionId, extra),
      place: place && ((argv, launch, context) => place(sessionId, argv, launch, context)),
      onOutput: (params) => output.send(params),
      graceMs: options.graceMs,
      bufferBytes: options.bufferBytes,
      maxOpen: options.maxOpen,
      executor,
    });
    tables.set(sessionId, created);
    session.onCleanup(async (cleanup) => {
      await created.closeAll(cleanup.graceMs);
      output.forgetSession(sessionId);
      if (tables.get(sessionId) === created) tables.delete(sessionId);
    });
    return created;
  };
  const existing = (sessionId: string): TerminalTable => {
    const table = tables.get(sessionId);
    if (table) return table;
    if (!client.session(sessionId)) throw unknownSession();
    throw new NotFoundError("unknown terminal", { reason: "unknown_terminal" });
  };
  const registrations: Disposable[] = [
    client.onRequest("terminal.open", (params) => held(params.session_id).open(params)),
    client.onRequest("terminal.input", (params) => existing(params.session_id).input(params)),
    client.onRequest("terminal.resize", (params) => existing(params.session_id).resize(params)),
    client.onRequest(
      "terminal.read",
      (params, ctx) => existing(params.session_id).read(params, ctx.signal),
    ),
    client.onRequest(
      "terminal.close",
      (params) => tables.get(params.session_id)?.close(params) ?? { closed: false },
    ),
  ];
  return {
    dispose: () => {
      for (const registration of registrations) registration.dispose();
      for (const table of tables.values()) void table.closeAll();
      tables.clear();
      output.dispose();
    },
  };
}
