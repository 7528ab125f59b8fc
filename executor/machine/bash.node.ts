/**
 * The `bash` tool: a command line run with `bash -c` (`sh -c` where bash is missing) as a
 * process unit of the session (its own process group, and cgroup where there is one) inside the
 * session workdir. Cancel and timeout end the whole unit (SIGTERM, then SIGKILL after the grace
 * period to whatever is left, the leader gone or not); output streams to `onOutput` as it
 * arrives.
 *
 * Each stream's bytes are captured exactly for its artifact (`BASH_OUTPUT` on the result): held
 * in memory up to {@linkcode BASH_MEMORY_BYTES}, past that spooled to a private temp file (up to
 * {@linkcode BASH_OUTPUT_MAX_BYTES}) with only a head and a tail kept in memory, so that the
 * memory a call holds for output is bounded however much it prints and however many run.
 */
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openAsBlob,
  openSync,
  rmSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Clock, systemClock } from "../../protocol/clock.ts";
import type { BashInput, BashResult } from "../../protocol/generated/contract.ts";
import { BASH_OUTPUT, type BashResultOutput, type CapturedOutput } from "../tool-results.ts";
import type { ArtifactByteStream } from "../artifacts.ts";
import { ChildEnvironment, NON_INTERACTIVE_LAYER } from "./child-env.node.ts";
import { concatBytes } from "../../transport/bytes.ts";
import { fileStream } from "./file-stream.node.ts";
import { utf8Boundary } from "./output-buffer.ts";
import { exitCodeOf, ProcessUnit, type SpawnUnitOptions } from "./process-group.node.ts";
import type { Workdir } from "./workdir.node.ts";

/**
 * Bytes of a stream held in memory; past them the stream is spooled to a temp file and only its
 * first and last half of this stay in memory (the result's text and the artifact's preview).
 */
export const BASH_MEMORY_BYTES: number = 256 * 1024;

/** Bytes of a stream kept for its artifact; past them bytes are counted, not kept. */
export const BASH_OUTPUT_MAX_BYTES: number = 1024 * 1024 * 1024;

/** Options of {@linkcode runBash}. */
export interface RunBashOptions {
  workdir: Workdir;
  /**
   * Starts the command as a unit of the session (`SessionProcesses.spawn`). Default: a unit of
   * its own, tracked by nothing else.
   */
  spawn?: (
    argv: readonly string[],
    options: Omit<SpawnUnitOptions, "cgroup">,
  ) => Promise<ProcessUnit>;
  /** Aborting ends the process unit; `runBash` then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Time between SIGTERM and SIGKILL. Default 2 s. */
  graceMs?: number;
  /** Receives output as it arrives, decoded as UTF-8 on character boundaries. */
  onOutput?: (stream: "stdout" | "stderr", text: string) => void;
  /**
   * The command's whole environment. Default: the default child environment policy (see
   * `child-env.node.ts`) with the input's `env` on top.
   */
  env?: Record<string, string>;
  /** Measures the input's `timeout_ms`. Default: the system clock. */
  clock?: Clock;
  /** Where a stream past {@linkcode BASH_MEMORY_BYTES} is spooled. Default: the OS temp dir. */
  spoolDir?: string;
  /** Bytes of a stream kept for its artifact. Default {@linkcode BASH_OUTPUT_MAX_BYTES}. */
  maxOutputBytes?: number;
}

/** The command ran past its `timeout_ms` and its process group was ended. */
export class BashTimeoutError extends Error {
  /** What the command printed before it was ended. */
  readonly partial: BashResult;
  constructor(timeoutMs: number, partial: BashResult) {
    super(`command timed out after ${timeoutMs} ms`);
    this.name = "BashTimeoutError";
    this.partial = partial;
  }
}

/**
 * The shell of a command, before the command line: bash reads no start-up file (neither the
 * user's nor the system's, whatever its stdin is); `sh` reads none when not interactive.
 */
const SHELL_ARGV = existsSync("/bin/bash")
  ? ["/bin/bash", "--noprofile", "--norc", "-c"]
  : ["/bin/sh", "-c"];

let defaultEnvironment: ChildEnvironment | undefined;
/** The default child environment (for `runBash` without an `env`), made on first use. */
function defaultPolicy(): ChildEnvironment {
  return defaultEnvironment ??= new ChildEnvironment({}, { containsSecret: () => false });
}

/** Runs one `bash` tool call. */
export async function runBash(input: BashInput, options: RunBashOptions): Promise<BashResult> {
  const cwd = await options.workdir.resolve(input.cwd ?? ".");
  options.signal?.throwIfAborted();
  const spawn = options.spawn ?? ((argv, spawnOptions) => ProcessUnit.spawn(argv, spawnOptions));
  const env = options.env ?? defaultPolicy().build(NON_INTERACTIVE_LAYER, input.env);
  const unit = await spawn([...SHELL_ARGV, input.command], { cwd, env });
  const child = unit.child;
  const out = new StreamCapture("stdout", options);
  const err = new StreamCapture("stderr", options);
  child.stdout!.on("data", (chunk: Uint8Array) => out.push(chunk));
  child.stderr!.on("data", (chunk: Uint8Array) => err.push(chunk));
  // "close" waits for the pipes too, so no output is lost.
  const closed = new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => resolve([code, signal]));
  });
  let ending: "aborted" | "timed_out" | undefined;
  const end = (why: "aborted" | "timed_out") => {
    if (ending) return;
    ending = why;
    void unit.terminate(options.graceMs ?? 2_000).then(() => {
      // Everything of the unit is gone; a pipe still open was passed to a process out of reach
      // (one that left the process group, without a cgroup): stop waiting for it.
      child.stdout?.destroy();
      child.stderr?.destroy();
    });
  };
  const onAbort = () => end("aborted");
  options.signal?.addEventListener("abort", onAbort, { once: true });
  if (options.signal?.aborted) onAbort();
  const clock = options.clock ?? systemClock;
  const timer = input.timeout_ms
    ? clock.setTimeout(() => end("timed_out"), input.timeout_ms)
    : undefined;
  let result: BashResult & BashResultOutput;
  try {
    const [code, signal] = await closed;
    result = {
      stdout: out.finish(),
      stderr: err.finish(),
      exit_code: exitCodeOf(child.exitCode ?? code, child.signalCode ?? signal),
      ...(out.spooled || err.spooled ? { truncated: true } : {}),
    };
    if (ending === "aborted") throw options.signal!.reason;
  } catch (error) {
    out.release();
    err.release();
    throw error;
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
  // Enumerable, so a handler's `{ ...result }` carries it; a symbol, so it never reaches JSON.
  result[BASH_OUTPUT] = { stdout: out, stderr: err };
  if ((out.spooled || err.spooled) && options.signal) {
    // Released by the rendering after the upload; a call aborted before that releases it here.
    const signal = options.signal;
    const release = () => {
      out.release();
      err.release();
    };
    signal.addEventListener("abort", release, { once: true });
    out.onRelease = err.onRelease = () => signal.removeEventListener("abort", release);
  }
  if (ending === "timed_out") throw new BashTimeoutError(input.timeout_ms!, result);
  return result;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const lenientUtf8 = new TextDecoder();

/** Spool directories not released by anyone (a result never rendered): removed when collected. */
const unreleased = new FinalizationRegistry<string>((dir) => {
  rmSync(dir, { recursive: true, force: true });
});

/** A spool file: a 0700 directory of its own in the temp dir, and the file in it. */
interface Spool {
  readonly dir: string;
  readonly path: string;
  fd: number | undefined;
}

/**
 * One output stream: decoded incrementally and forwarded, and captured byte for byte (in memory,
 * then spooled to a temp file past {@linkcode BASH_MEMORY_BYTES}).
 */
class StreamCapture implements CapturedOutput {
  readonly #decoder = new TextDecoder();
  readonly #stream: "stdout" | "stderr";
  readonly #onOutput: RunBashOptions["onOutput"];
  readonly #spoolDir: string | undefined;
  /** Bytes kept at most; lowered to what is kept when the spool file cannot be written. */
  #maxBytes: number;
  /** In memory: every chunk; spooled: the latest chunks, at least half the memory bound. */
  #chunks: Uint8Array[] = [];
  #held = 0;
  /** The text of what is held in memory (not spooled yet). */
  #text = "";
  #head: Uint8Array | undefined;
  #whole: Uint8Array | undefined;
  #spool: Spool | undefined;
  /**
   * What the artifact keeps when no temp file could be made (a full or unwritable temp dir):
   * the bytes held in memory when the stream outgrew it.
   */
  #inMemory: Uint8Array | undefined;
  /** Why the temp file failed (`ENOSPC`), when it did: the artifact stops short there. */
  spoolFailure: string | undefined;
  /** Checks the spooled bytes as they come (the held ones were checked when they were spooled). */
  #checker: TextDecoder | undefined;
  #valid = true;
  text = "";
  totalBytes = 0;
  keptBytes = 0;
  /** Called once released (detaches the abort listener). */
  onRelease: (() => void) | undefined;

  constructor(stream: "stdout" | "stderr", options: RunBashOptions) {
    this.#stream = stream;
    this.#onOutput = options.onOutput;
    this.#spoolDir = options.spoolDir;
    this.#maxBytes = options.maxOutputBytes ?? BASH_OUTPUT_MAX_BYTES;
  }

  /** Whether the stream outgrew memory and went to a temp file. */
  get spooled(): boolean {
    return this.#head !== undefined;
  }

  push(chunk: Uint8Array): void {
    const text = this.#decoder.decode(chunk, { stream: true });
    if (text) this.#onOutput?.(this.#stream, text);
    this.totalBytes += chunk.byteLength;
    if (this.#head === undefined) {
      if (this.#held + chunk.byteLength <= BASH_MEMORY_BYTES) {
        this.#chunks.push(chunk);
        this.#held += chunk.byteLength;
        this.keptBytes = Math.min(this.#held, this.#maxBytes);
        this.#text += text;
        return;
      }
      this.#chunks.push(chunk);
      this.#held += chunk.byteLength;
      this.#startSpool();
      return;
    }
    this.#spoolBytes(chunk);
  }

  finish(): string {
    const rest = this.#decoder.decode();
    if (rest) this.#onOutput?.(this.#stream, rest);
    if (this.#head === undefined) {
      this.text = this.#text + rest;
      return this.text;
    }
    if (this.#spool?.fd !== undefined) {
      closeSync(this.#spool.fd);
      this.#spool.fd = undefined;
    }
    if (this.#valid) {
      try {
        this.#checker!.decode();
      } catch {
        this.#valid = false;
      }
    }
    const head = this.#head.subarray(0, utf8Boundary(this.#head));
    // Right after the spool began, the tail still holds the head's bytes: never twice.
    const latest = this.tail;
    const overlap = this.#head.byteLength - (this.totalBytes - latest.byteLength);
    const tail = characterStart(latest.subarray(Math.max(0, overlap)));
    const between = this.totalBytes - head.byteLength - tail.byteLength;
    this.text = `${lenientUtf8.decode(head)}\n[... ${between} bytes not held in memory ...]\n${
      lenientUtf8.decode(tail)
    }`;
    return this.text;
  }

  get head(): Uint8Array {
    return this.#head ?? this.#wholeBytes();
  }

  get tail(): Uint8Array {
    return this.#head === undefined ? this.#wholeBytes() : concat(this.#chunks, this.#held);
  }

  get utf8(): boolean {
    if (this.#head !== undefined) return this.#valid;
    try {
      strictUtf8.decode(this.#wholeBytes().subarray(0, this.keptBytes));
      return true;
    } catch {
      return false;
    }
  }

  body(): Promise<Blob | Uint8Array | ArtifactByteStream> {
    if (this.#head === undefined) {
      return Promise.resolve(this.#wholeBytes().subarray(0, this.keptBytes));
    }
    // Read from the file as it is sent: a file-backed Blob on Node and Bun (sent with its
    // length); Deno's `openAsBlob` reads the file whole, so there a stream of it is sent.
    const spool = this.#spool;
    if (spool) {
      if (!("Deno" in globalThis)) return openAsBlob(spool.path);
      return Promise.resolve(() => fileStream(spool.path));
    }
    return Promise.resolve(this.#inMemory ?? new Uint8Array(0));
  }

  release(): void {
    this.#inMemory = undefined;
    const spool = this.#spool;
    this.#spool = undefined;
    if (spool) {
      unreleased.unregister(this);
      if (spool.fd !== undefined) closeSync(spool.fd);
      rmSync(spool.dir, { recursive: true, force: true });
    }
    const onRelease = this.onRelease;
    this.onRelease = undefined;
    onRelease?.();
  }

  #wholeBytes(): Uint8Array {
    return this.#whole ??= concat(this.#chunks, this.#held);
  }

  #startSpool(): void {
    try {
      // mkdtemp makes the directory 0700; the file is 0600 and must not exist yet.
      const dir = mkdtempSync(join(this.#spoolDir ?? tmpdir(), "bma-bash-"));
      this.#spool = { dir, path: join(dir, this.#stream), fd: undefined };
      unreleased.register(this, dir, this);
      this.#spool.fd = openSync(this.#spool.path, "wx", 0o600);
    } catch (error) {
      // No temp file (the temp dir is not writable, or full): the artifact keeps what memory
      // held, up to its last whole character, and says why it stops there.
      this.spoolFailure = errorCode(error);
      if (this.#spool) {
        unreleased.unregister(this);
        rmSync(this.#spool.dir, { recursive: true, force: true });
      }
      this.#spool = undefined;
    }
    const held = concat(this.#chunks, this.#held);
    this.#head = held.slice(0, BASH_MEMORY_BYTES / 2);
    this.#chunks = [];
    this.#held = 0;
    this.#text = "";
    this.keptBytes = 0;
    this.#checker = new TextDecoder("utf-8", { fatal: true });
    if (this.spoolFailure !== undefined) {
      const kept = held.slice(0, Math.min(this.#maxBytes, utf8Boundary(held)));
      this.#inMemory = kept;
      this.#maxBytes = this.keptBytes = kept.byteLength;
      try {
        this.#checker.decode(kept, { stream: true });
      } catch {
        this.#valid = false;
      }
      this.#keepTail(held);
      return;
    }
    this.#spoolBytes(held);
  }

  #spoolBytes(bytes: Uint8Array): void {
    const room = this.#maxBytes - this.keptBytes;
    const kept = bytes.byteLength <= room ? bytes : bytes.subarray(0, Math.max(0, room));
    if (kept.byteLength > 0 && this.#spool?.fd !== undefined) {
      try {
        for (let at = 0; at < kept.byteLength;) {
          at += writeSync(this.#spool.fd, kept, at, kept.byteLength - at);
        }
      } catch (error) {
        // The disk filled up: the artifact is what was written before, and says it was cut.
        this.spoolFailure = errorCode(error);
        this.#maxBytes = this.keptBytes;
        closeSync(this.#spool.fd);
        this.#spool.fd = undefined;
        return this.#keepTail(bytes);
      }
      this.keptBytes += kept.byteLength;
      if (this.#valid) {
        try {
          this.#checker!.decode(kept, { stream: true });
        } catch {
          this.#valid = false;
        }
      }
    }
    this.#keepTail(bytes);
  }

  /** The tail: the latest chunks, no fewer bytes than half the memory bound. */
  #keepTail(bytes: Uint8Array): void {
    this.#chunks.push(bytes);
    this.#held += bytes.byteLength;
    while (this.#held - this.#chunks[0].byteLength >= BASH_MEMORY_BYTES / 2) {
      this.#held -= this.#chunks.shift()!.byteLength;
    }
  }
}

/** A system error's code (`ENOSPC`), or what else failed. */
function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "failed";
}

/** The chunks as one array (the chunk itself when there is one). */
function concat(chunks: readonly Uint8Array[], length: number): Uint8Array {
  return chunks.length === 1 ? chunks[0] : concatBytes(chunks, length);
}

/** `bytes` from its first character start on (a tail cut inside a character). */
function characterStart(bytes: Uint8Array): Uint8Array {
  let start = 0;
  while (start < bytes.length && start < 3 && (bytes[start] & 0xc0) === 0x80) start++;
  return bytes.subarray(start);
}
