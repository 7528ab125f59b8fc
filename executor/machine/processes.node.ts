/**
 * The process capability (`process.*`, "the machine tool path"): programs started by argv as
 * process units of the session (own process group, and cgroup where there is one) inside the
 * session workdir, stdin writable, stdout/stderr kept as offset-addressed logs that stream out
 * as `process.output` and can be caught up with `process.read`, signals to the whole unit (the
 * default) or the process alone, wait, list, and an end for all of them.
 *
 * A process's state is its own: it has exited when the program has, although output keeps
 * being read until every pipe closes (a descendant may hold one open).
 */
import { randomUUID } from "node:crypto";
import { stat } from "node:fs/promises";
import type {
  ProcessInfo,
  ProcessListResult,
  ProcessOutputParams,
  ProcessReadParams,
  ProcessReadResult,
  ProcessSignalParams,
  ProcessSignalResult,
  ProcessStartParams,
  ProcessStartResult,
  ProcessWaitParams,
  ProcessWaitResult,
  ProcessWriteParams,
  ProcessWriteResult,
} from "../../protocol/generated/contract.ts";
import { type Clock, systemClock, type TimerHandle } from "../../protocol/clock.ts";
import {
  ForbiddenError,
  NotFoundError,
  ResourceExhaustedError,
} from "../../protocol/generated/errors.ts";
import { decodeChunk, encodeChunk, OutputBuffer, utf8Boundary } from "./output-buffer.ts";
import { MAX_TIMER_MS } from "../../protocol/clock.ts";
import { type ProcessUnit, SpawnError, type SpawnUnitOptions } from "./process-group.node.ts";
import { PathOutsideWorkdirError, type Workdir } from "./workdir.node.ts";
import { answerForSystemError } from "./system-resources.ts";

/** Options of a {@linkcode ProcessTable}. */
export interface ProcessTableOptions {
  sessionId: string;
  workdir: Workdir;
  /** Starts a process as a unit of the session (`SessionProcesses.spawn`). */
  spawn: (
    argv: readonly string[],
    options: Omit<SpawnUnitOptions, "cgroup">,
  ) => Promise<ProcessUnit>;
  /** The environment of a process, given the `env` it asks for. */
  env: (extra: Record<string, string> | undefined) => Record<string, string>;
  /** Streams output as it arrives (the executor sends it as `process.output`; lossy). */
  onOutput?: (params: ProcessOutputParams) => void;
  /** Time between SIGTERM and SIGKILL. Default 2 s. */
  graceMs?: number;
  /** Bytes kept per stream for `process.read`. Default 8 MiB. */
  bufferBytes?: number;
  /** Measures `process.start`'s and `process.wait`'s `timeout_ms`. Default: the system clock. */
  clock?: Clock;
}

interface Entry {
  info: ProcessInfo;
  unit: ProcessUnit;
  stdout: OutputBuffer;
  stderr: OutputBuffer;
  exited: Promise<void>;
  timer?: TimerHandle;
  /** Bytes written to stdin that the program has not taken yet. */
  stdinQueued: number;
}

const DEFAULT_READ_BYTES = 64 * 1024;
/**
 * Most bytes written to a program's stdin that it has not read yet: each is held in memory
 * until the program reads it, so a program that never reads would otherwise hold every write.
 * A write beyond it is refused (-32009 `stdin_full`), to be sent again once the program reads.
 */
const STDIN_QUEUE_BYTES = 8 * 1024 * 1024;
/**
 * How long output may keep arriving after the program exited before `process.wait` answers: its
 * pipes normally reach end-of-file at once, unless a descendant holds them open.
 */
const DRAIN_AFTER_EXIT_MS = 100;

/** The processes of one session. */
export class ProcessTable {
  readonly #options: ProcessTableOptions;
  readonly #entries = new Map<string, Entry>();

  constructor(options: ProcessTableOptions) {
    this.#options = options;
  }

  /** `process.start`: idempotent by a harness-chosen `process_id`. */
  async start(params: ProcessStartParams): Promise<ProcessStartResult> {
    const existing = params.process_id ? this.#entries.get(params.process_id) : undefined;
    if (existing) {
      return { process_id: existing.info.process_id, pid: existing.info.pid, duplicate: true };
    }
    let cwd: string;
    try {
      cwd = await this.#options.workdir.resolve(params.cwd ?? ".");
    } catch (error) {
      if (error instanceof PathOutsideWorkdirError) {
        throw new ForbiddenError("path outside the workdir", { reason: "path_outside_workdir" });
      }
      throw error;
    }
    await existingDirectory(cwd);
    const id = params.process_id ?? `p_${randomUUID()}`;
    let unit: ProcessUnit;
    try {
      unit = await this.#options.spawn(params.argv, {
        cwd,
        env: this.#options.env(params.env),
        stdin: true,
      });
    } catch (error) {
      if (!(error instanceof SpawnError)) throw error;
      // Out of file descriptors or processes: retryable, not a program that cannot start.
      const exhausted = answerForSystemError(error.cause);
      if (exhausted !== error.cause) throw exhausted;
      throw new NotFoundError("cannot start the program", {
        reason: "spawn_failed",
        field: "argv",
      });
    }
    // A concurrent start with the same id won the race: this one is not wanted.
    const raced = params.process_id ? this.#entries.get(params.process_id) : undefined;
    if (raced) {
      void unit.terminate(0);
      return { process_id: raced.info.process_id, pid: raced.info.pid, duplicate: true };
    }
    const child = unit.child;
    const entry: Entry = {
      info: {
        process_id: id,
        argv: params.argv,
        pid: child.pid,
        cwd,
        running: true,
        started_at: new Date().toISOString(),
      },
      unit,
      stdout: new OutputBuffer(this.#options.bufferBytes),
      stderr: new OutputBuffer(this.#options.bufferBytes),
      exited: Promise.resolve(),
      stdinQueued: 0,
    };
    this.#pipe(entry, "stdout");
    this.#pipe(entry, "stderr");
    child.stdin?.on("error", () => {}); // a closed stdin pipe is reported by write()
    const pipesClosed = new Promise<void>((resolve) => child.once("close", () => resolve()));
    entry.exited = new Promise((resolve) => {
      unit.leaderExited.then(() => {
        entry.info.running = false;
        entry.info.exit_code = child.exitCode;
        entry.info.signal = child.signalCode;
        entry.info.exited_at = new Date().toISOString();
        if (entry.timer !== undefined) this.#clock.clearTimeout(entry.timer);
        // The last output normally follows at once; a descendant holding a pipe does not delay
        // the answer for long.
        const drained = setTimeout(resolve, DRAIN_AFTER_EXIT_MS);
        pipesClosed.then(() => {
          clearTimeout(drained);
          resolve();
        });
      });
    });
    if (params.timeout_ms) {
      entry.timer = this.#clock.setTimeout(
        () => void unit.terminate(this.#grace),
        params.timeout_ms,
      );
    }
    this.#entries.set(id, entry);
    return { process_id: id, pid: child.pid };
  }

  /** `process.write`: bytes to stdin; `eof` closes it. */
  async write(params: ProcessWriteParams): Promise<ProcessWriteResult> {
    const entry = this.#get(params.process_id);
    const stdin = entry.unit.child.stdin;
    const bytes = decodeChunk(params.data, params.encoding);
    if (!stdin || stdin.destroyed || stdin.writableEnded) {
      if (bytes.byteLength === 0 && params.eof) return { written: 0 };
      throw stdinClosed();
    }
    if (bytes.byteLength > 0) {
      // One write of any size (the frame bounds it) is taken while nothing waits.
      // Counted here: Bun's stdin stream reports no `writableLength`.
      if (entry.stdinQueued > 0 && entry.stdinQueued + bytes.byteLength > STDIN_QUEUE_BYTES) {
        throw new ResourceExhaustedError(
          "stdin is full: the program has not read what it was sent",
          { reason: "stdin_full" },
        );
      }
      // A write fails only when the pipe is gone: the program closed its stdin, or exited.
      entry.stdinQueued += bytes.byteLength;
      await new Promise<void>((resolve, reject) =>
        stdin.write(bytes, (error) => {
          entry.stdinQueued -= bytes.byteLength;
          if (error) reject(stdinClosed());
          else resolve();
        })
      );
    }
    if (params.eof) stdin.end();
    return { written: bytes.byteLength };
  }

  /** `process.read`: catch up from an offset, waiting up to `wait_ms` for new output. */
  async read(params: ProcessReadParams, signal?: AbortSignal): Promise<ProcessReadResult> {
    const entry = this.#get(params.process_id);
    const buffer = entry[params.stream];
    const offset = params.offset ?? 0;
    if (params.wait_ms) {
      const timeout = AbortSignal.timeout(Math.min(params.wait_ms, MAX_TIMER_MS));
      await buffer.waitBeyond(offset, signal ? AbortSignal.any([signal, timeout]) : timeout);
    }
    const slice = buffer.read(offset, params.max_bytes ?? DEFAULT_READ_BYTES);
    // Cut on a character boundary so text stays text (unless the stream ended there).
    const keep = slice.eof ? slice.bytes.length : utf8Boundary(slice.bytes) || slice.bytes.length;
    const bytes = slice.bytes.subarray(0, keep);
    const { data, encoding } = encodeChunk(bytes);
    const next = slice.offset + bytes.byteLength;
    return {
      process_id: params.process_id,
      stream: params.stream,
      offset: slice.offset,
      data,
      encoding,
      next_offset: next,
      eof: buffer.closed && next === buffer.end,
    };
  }

  /**
   * `process.signal`: to the whole unit (`group`, the default: the process group and, with a
   * cgroup, every process in it), or to the process alone.
   */
  signal(params: ProcessSignalParams): ProcessSignalResult {
    const entry = this.#get(params.process_id);
    const signal = params.signal ?? "SIGTERM";
    if (params.group === false) return { delivered: entry.unit.signalLeader(signal) };
    if (!entry.info.running && !entry.unit.alive()) return { delivered: false };
    return { delivered: entry.unit.signal(signal) };
  }

  /** `process.wait`: until it exits, or `timeout_ms` passes (`exited: false`; 0 answers now). */
  async wait(params: ProcessWaitParams, signal?: AbortSignal): Promise<ProcessWaitResult> {
    const entry = this.#get(params.process_id);
    if (entry.info.running || params.timeout_ms !== 0) {
      let timer: TimerHandle | undefined;
      let onAbort: (() => void) | undefined;
      const stops: Promise<unknown>[] = [entry.exited];
      if (params.timeout_ms !== undefined) {
        const ms = params.timeout_ms;
        stops.push(new Promise<void>((resolve) => (timer = this.#clock.setTimeout(resolve, ms))));
      }
      if (signal) {
        stops.push(
          new Promise<void>((resolve) => {
            onAbort = () => resolve();
            signal.addEventListener("abort", onAbort, { once: true });
          }),
        );
      }
      try {
        await Promise.race(stops);
      } finally {
        if (timer !== undefined) this.#clock.clearTimeout(timer);
        if (onAbort) signal?.removeEventListener("abort", onAbort);
      }
    }
    return {
      process_id: params.process_id,
      exited: !entry.info.running,
      ...(entry.info.running ? {} : { exit_code: entry.info.exit_code, signal: entry.info.signal }),
    };
  }

  /** `process.list`. */
  list(): ProcessListResult {
    return { processes: [...this.#entries.values()].map((e) => ({ ...e.info })) };
  }

  /**
   * Ends every process (SIGTERM, then SIGKILL after `graceMs`) and waits until none of them,
   * nor anything they started, is left.
   */
  async closeAll(graceMs = this.#grace): Promise<void> {
    await Promise.all([...this.#entries.values()].map((e) => e.unit.terminate(graceMs)));
  }

  get #clock(): Clock {
    return this.#options.clock ?? systemClock;
  }

  get #grace(): number {
    return this.#options.graceMs ?? 2_000;
  }

  #get(id: string): Entry {
    const entry = this.#entries.get(id);
    if (!entry) throw new NotFoundError("unknown process", { reason: "unknown_process" });
    return entry;
  }

  #pipe(entry: Entry, stream: "stdout" | "stderr"): void {
    const source = entry.unit.child[stream]!;
    const buffer = entry[stream];
    let pending = new Uint8Array(0); // an incomplete UTF-8 character held for the next chunk
    const emit = (bytes: Uint8Array, eof: boolean) => {
      const offset = buffer.end;
      buffer.append(bytes);
      if (eof) buffer.close();
      if (!this.#options.onOutput || (bytes.byteLength === 0 && !eof)) return;
      const { data, encoding } = encodeChunk(bytes);
      this.#options.onOutput({
        session_id: this.#options.sessionId,
        process_id: entry.info.process_id,
        stream,
        offset,
        data,
        encoding,
        ...(eof ? { eof: true } : {}),
      });
    };
    source.on("data", (chunk: Uint8Array) => {
      const joined = new Uint8Array(pending.length + chunk.length);
      joined.set(pending);
      joined.set(chunk, pending.length);
      const cut = utf8Boundary(joined);
      pending = joined.slice(cut);
      emit(joined.subarray(0, cut), false);
    });
    source.on("end", () => emit(pending, true));
  }
}

/**
 * Refuses a working directory that is not one (-32002 `spawn_failed`, `field` `cwd`): the spawn
 * would fail with the program's ENOENT, as if the program were missing.
 */
export async function existingDirectory(cwd: string): Promise<void> {
  const found = await stat(cwd).catch(() => undefined);
  if (!found?.isDirectory()) {
    throw new NotFoundError("the working directory is not a directory", {
      reason: "spawn_failed",
      field: "cwd",
    });
  }
}

function stdinClosed(): NotFoundError {
  return new NotFoundError("stdin is closed", { reason: "stdin_closed" });
}
