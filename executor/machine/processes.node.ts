/**
 * The process capability (`process.*`, "the machine tool path"): programs started by argv in
 * their own process group inside the session workdir, stdin writable, stdout/stderr kept as
 * offset-addressed logs that stream out as `process.output` and can be caught up with
 * `process.read`, signals to the process or its group, wait, list, and an end for all of them.
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
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
import { ForbiddenError, NotFoundError } from "../../protocol/generated/errors.ts";
import { encodeChunk, OutputBuffer, utf8Boundary } from "./output-buffer.ts";
import { signalGroup, spawnGroup, terminateGroup } from "./process-group.node.ts";
import { PathOutsideWorkdirError, type Workdir } from "./workdir.node.ts";

/** Options of a {@linkcode ProcessTable}. */
export interface ProcessTableOptions {
  sessionId: string;
  workdir: Workdir;
  /** Streams output as it arrives (the executor sends it as `process.output`; lossy). */
  onOutput?: (params: ProcessOutputParams) => void;
  /** Time between SIGTERM and SIGKILL. Default 2 s. */
  graceMs?: number;
  /** Bytes kept per stream for `process.read`. Default 8 MiB. */
  bufferBytes?: number;
}

interface Entry {
  info: ProcessInfo;
  child: ChildProcess;
  stdout: OutputBuffer;
  stderr: OutputBuffer;
  exited: Promise<void>;
  timer?: ReturnType<typeof setTimeout>;
}

const DEFAULT_READ_BYTES = 64 * 1024;

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
    const id = params.process_id ?? `p_${randomUUID()}`;
    const child = spawnGroup(params.argv, { cwd, env: params.env, stdin: true });
    const spawned = await new Promise<Error | undefined>((resolve) => {
      child.once("spawn", () => resolve(undefined));
      child.once("error", (error) => resolve(error));
    });
    if (spawned) {
      throw new NotFoundError("cannot start the program", {
        reason: "spawn_failed",
        field: "argv",
      });
    }
    const entry: Entry = {
      info: {
        process_id: id,
        argv: params.argv,
        pid: child.pid,
        cwd,
        running: true,
        started_at: new Date().toISOString(),
      },
      child,
      stdout: new OutputBuffer(this.#options.bufferBytes),
      stderr: new OutputBuffer(this.#options.bufferBytes),
      exited: Promise.resolve(),
    };
    this.#pipe(entry, "stdout");
    this.#pipe(entry, "stderr");
    child.stdin?.on("error", () => {}); // a closed stdin pipe is reported by write()
    entry.exited = new Promise((resolve) => {
      child.once("close", (code, signal) => {
        entry.info.running = false;
        entry.info.exit_code = code;
        entry.info.signal = signal;
        entry.info.exited_at = new Date().toISOString();
        clearTimeout(entry.timer);
        resolve();
      });
    });
    if (params.timeout_ms) {
      entry.timer = setTimeout(() => void terminateGroup(child, this.#grace), params.timeout_ms);
    }
    this.#entries.set(id, entry);
    return { process_id: id, pid: child.pid };
  }

  /** `process.write`: bytes to stdin; `eof` closes it. */
  async write(params: ProcessWriteParams): Promise<ProcessWriteResult> {
    const entry = this.#get(params.process_id);
    const stdin = entry.child.stdin;
    const bytes = params.encoding === "base64"
      ? Uint8Array.from(atob(params.data), (c) => c.charCodeAt(0))
      : new TextEncoder().encode(params.data);
    if (!stdin || stdin.destroyed || stdin.writableEnded) {
      if (bytes.byteLength === 0 && params.eof) return { written: 0 };
      throw new NotFoundError("stdin is closed", { reason: "stdin_closed" });
    }
    if (bytes.byteLength > 0) {
      await new Promise<void>((resolve, reject) =>
        stdin.write(bytes, (error) => (error ? reject(error) : resolve()))
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
      const timeout = AbortSignal.timeout(params.wait_ms);
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

  /** `process.signal`: to the process, or with `group` to its whole group. */
  signal(params: ProcessSignalParams): ProcessSignalResult {
    const entry = this.#get(params.process_id);
    const signal = params.signal ?? "SIGTERM";
    if (!entry.info.running) return { delivered: false };
    const delivered = params.group ? signalGroup(entry.child, signal) : entry.child.kill(signal);
    return { delivered };
  }

  /** `process.wait`: until it exits, or `timeout_ms` passes (`exited: false`). */
  async wait(params: ProcessWaitParams, signal?: AbortSignal): Promise<ProcessWaitResult> {
    const entry = this.#get(params.process_id);
    const stops: Promise<unknown>[] = [entry.exited];
    if (params.timeout_ms) {
      stops.push(new Promise((r) => setTimeout(r, params.timeout_ms).unref?.()));
    }
    if (signal) stops.push(new Promise((r) => signal.addEventListener("abort", r, { once: true })));
    await Promise.race(stops);
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

  /** Ends every process of the session (SIGTERM, then SIGKILL) and waits for them. */
  async closeAll(): Promise<void> {
    await Promise.all(
      [...this.#entries.values()].map((e) =>
        terminateGroup(e.child, this.#grace).then(() => e.exited)
      ),
    );
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
    const source = entry.child[stream]!;
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
