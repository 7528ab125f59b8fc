/**
 * `bma-harness`'s standard streams: its output lines (stdout), its notes about itself (stderr),
 * and standard input read as command lines or, while a terminal is attached, as raw bytes sent to
 * that terminal (`attach`: raw mode, resizes, Ctrl-] to detach). What the commands do lives in
 * `harness-commands.node.ts`; this module only moves bytes and lines.
 */
import type { Terminal } from "../harness/node.ts";

/** One line of output, on stdout. */
export function writeOut(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** A note about the harness itself (signals, end of input): on stderr, beside the output. */
export function note(line: string): void {
  process.stderr.write(`bma-harness: ${line}\n`);
}

/** The key that detaches from a terminal: Ctrl-], as in telnet. */
const DETACH = 0x1d;

/**
 * Standard input, as command lines or, while a terminal is attached, as raw bytes for it.
 * Bytes that follow an `attach` line (a script piped in) go to the terminal.
 */
export class Input {
  #text = "";
  #lines: string[] = [];
  #ended = false;
  #wake: (() => void) | undefined;
  #raw: ((bytes: Uint8Array) => void) | undefined;
  readonly #decoder = new TextDecoder();

  constructor(stream: NodeJS.ReadStream) {
    stream.on("data", (chunk: Uint8Array) => this.#take(chunk));
    stream.on("end", () => {
      this.#ended = true;
      this.#wake?.();
    });
  }

  /** The next command line; `undefined` at the end of input. */
  async line(): Promise<string | undefined> {
    for (;;) {
      const line = this.#lines.shift();
      if (line !== undefined) return line;
      if (this.#ended) {
        const rest = this.#text;
        this.#text = "";
        return rest === "" ? undefined : rest;
      }
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }

  /** Sends raw bytes to `sink` from now on (what was typed ahead first) until `release`. */
  capture(sink: (bytes: Uint8Array) => void): void {
    this.#raw = sink;
    const ahead = [...this.#lines.map((line) => `${line}\n`), this.#text].join("");
    this.#lines = [];
    this.#text = "";
    if (ahead) this.#take(new TextEncoder().encode(ahead));
  }

  /** Takes lines again; `rest` (what followed the detach key) is read as typed. */
  release(rest?: Uint8Array): void {
    this.#raw = undefined;
    if (rest?.byteLength) this.#take(rest);
  }

  get ended(): boolean {
    return this.#ended;
  }

  #take(chunk: Uint8Array): void {
    const sink = this.#raw;
    if (sink) {
      sink(chunk);
      return;
    }
    this.#text += this.#decoder.decode(chunk, { stream: true });
    const parts = this.#text.split("\n");
    this.#text = parts.pop()!;
    this.#lines.push(...parts.map((line) => line.replace(/\r$/, "")));
    this.#wake?.();
  }
}

/**
 * Connects the user's terminal to `terminal`: raw mode, every key to the remote side, its output
 * to stdout, window size changes (SIGWINCH) as resizes. Ends when the program exits, the
 * session ends, or Ctrl-] is typed; the user's terminal is restored in every case.
 */
export async function attach(terminal: Terminal, input: Input): Promise<"exited" | "detached"> {
  const stdin = process.stdin;
  const tty = stdin.isTTY === true;
  let detach!: () => void;
  const detached = new Promise<"detached">((resolve) => (detach = () => resolve("detached")));
  const stop = new AbortController();
  let typing = Promise.resolve();
  const type = (bytes: Uint8Array) => {
    if (bytes.byteLength === 0) return;
    // In order, one write at a time; a failed write is reported and the next ones still go.
    typing = typing.then(() => terminal.write(bytes)).then(
      () => {},
      (error) => void process.stderr.write(`\r\nbma-harness: ${(error as Error).message}\r\n`),
    );
  };
  const restore = () => {
    if (tty) stdin.setRawMode(false);
  };
  const resize = () => {
    const [cols, rows] = [process.stdout.columns, process.stdout.rows];
    if (cols > 0 && rows > 0) void terminal.resize(cols, rows).catch(() => {});
  };
  if (tty) stdin.setRawMode(true);
  process.on("exit", restore);
  if (process.stdout.isTTY) {
    process.on("SIGWINCH", resize);
    resize();
  }
  input.capture((bytes) => {
    const at = bytes.indexOf(DETACH);
    if (at < 0) return type(bytes);
    type(bytes.subarray(0, at));
    input.release(bytes.subarray(at + 1));
    detach();
    stop.abort();
  });
  const shown = (async () => {
    for await (const bytes of terminal.output({ signal: stop.signal })) {
      process.stdout.write(bytes);
    }
    return "exited" as const;
  })();
  try {
    return await Promise.race([shown, detached]);
  } finally {
    stop.abort();
    await shown.catch(() => {});
    input.release();
    process.off("SIGWINCH", resize);
    process.off("exit", restore);
    restore();
  }
}
