#!/usr/bin/env node
/**
 * `bma-harness`: a local harness to drive executors by hand (or by script on stdin).
 *
 *   bma-harness --port 7700                 # then: bma-executor --harness ws://127.0.0.1:7700
 *   bma-harness --unix /tmp/bma.sock
 *
 * Commands (one per line): executors | assign <executor> <session> | call <session> <tool> <json>
 * | bash <session> <command…> | cancel <session> <tool_call_id> | stop <session> [reason]
 * | attach <session> [--id <terminal_id>] [program args…] | drain <executor> | wait [n] | help
 * | quit. Results and progress print as they arrive. `attach` connects this terminal to a
 * terminal on the executor until its program exits or Ctrl-] detaches.
 */
import { parseArgs } from "node:util";
import { Harness, type Session, type Terminal } from "./node.ts";

const USAGE = `bma-harness — a local harness of the BMA Executor Protocol (bma.executor.v1.1)

Usage: bma-harness [--host 127.0.0.1] [--port 7700] [--unix /path.sock] [--heartbeat-ms 15000]

Listens on 127.0.0.1 (and/or a Unix socket) without authentication, for executors on this
machine; any other --host needs --insecure-no-auth. Reads commands from stdin:

  executors                          list connected executors
  assign <executor> <session>        assign a session (<executor> may be "-" for the first)
  call <session> <tool> <json>       call a tool; progress and the result print as they arrive
  bash <session> <command...>        shorthand for call <session> bash {"command": ...}
  cancel <session> <tool_call_id>    cancel a running call
  stop <session> [reason]            stop a session (waits for session.ended)
  attach <session> [--id <terminal_id>] [program args...]
                                     attach this terminal to a terminal of the session (default:
                                     the executor user's login shell); Ctrl-] detaches, and
                                     attach --id <terminal_id> attaches again
  drain <executor>                   drain an executor
  wait [n]                           wait until n executors are connected (default 1)
  help | quit
`;

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** The key that detaches from a terminal: Ctrl-], as in telnet. */
const DETACH = 0x1d;

/**
 * Standard input, as command lines or, while a terminal is attached, as raw bytes for it.
 * Bytes that follow an `attach` line (a script piped in) go to the terminal.
 */
class Input {
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
async function attach(terminal: Terminal, input: Input): Promise<"exited" | "detached"> {
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

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: process.argv.slice(2),
      strict: true,
      options: {
        host: { type: "string" },
        port: { type: "string" },
        unix: { type: "string" },
        "heartbeat-ms": { type: "string" },
        "insecure-no-auth": { type: "boolean" },
        help: { type: "boolean" },
      },
    }));
  } catch (error) {
    process.stderr.write(`bma-harness: ${(error as Error).message.split("\n")[0]} (see --help)\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const host = values.host ?? "127.0.0.1";
  const loopback = host === "127.0.0.1" || host === "::1" || host === "localhost";
  if (!loopback && !values["insecure-no-auth"]) {
    process.stderr.write(
      "bma-harness: serving beyond loopback without authentication needs --insecure-no-auth\n",
    );
    return 2;
  }
  const port = values.port === undefined ? 7700 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`bma-harness: --port takes 0-65535, not "${values.port}"\n`);
    return 2;
  }
  const harness = new Harness({
    insecureNoAuth: true,
    heartbeatIntervalMs: values["heartbeat-ms"] ? Number(values["heartbeat-ms"]) : undefined,
  });
  const servers = [await harness.serve({ hostname: host, port })];
  if (values.unix) servers.push(await harness.serveUnix(values.unix));
  for (const server of servers) out(`listening ${server.url}`);
  harness.onExecutor((event) => out(`executor ${event.type} ${event.executor.id}`));

  const sessions = new Map<string, Session>();
  const terminals = new Map<string, Terminal>();
  const input = new Input(process.stdin);
  const executorById = (id: string) =>
    id === "-"
      ? harness.executors.find((e) => e.connected)
      : harness.executors.find((e) => e.id === id);
  let calls = 0;
  const pending = new Set<Promise<unknown>>();

  const run = async (line: string): Promise<boolean> => {
    const [command, ...args] = line.trim().split(/\s+/);
    switch (command) {
      case "":
        return true;
      case "help":
        process.stdout.write(USAGE);
        return true;
      case "quit":
      case "exit":
        return false;
      case "executors":
        for (const e of harness.executors) {
          out(
            `${e.id} ${e.info.name} ${e.protocol} connected=${e.connected} sessions=${e.sessions.size} tools=${
              (e.capabilities.tools ?? []).join(",")
            }`,
          );
        }
        return true;
      case "wait": {
        const want = Number(args[0] ?? 1);
        while (harness.executors.filter((e) => e.connected).length < want) {
          await harness.waitExecutor();
        }
        out(`ready ${harness.executors.filter((e) => e.connected).length}`);
        return true;
      }
      case "assign": {
        const executor = executorById(args[0]);
        if (!executor) throw new Error(`no executor ${args[0]}`);
        const session = await executor.assignSession({
          session_id: args[1],
          metadata: { source: "harness" },
        });
        await session.ready();
        sessions.set(session.id, session);
        out(`assigned ${session.id} to ${executor.id}`);
        return true;
      }
      case "call":
      case "bash": {
        const session = sessions.get(args[0]);
        if (!session) throw new Error(`no session ${args[0]}`);
        const tool = command === "bash" ? "bash" : args[1];
        const input = command === "bash"
          ? { command: args.slice(1).join(" ") }
          : JSON.parse(args.slice(2).join(" ") || "{}");
        const id = `call_${++calls}`;
        out(`${id} started`);
        const call = session.callTool({ tool, input, tool_call_id: id }, {
          onProgress: (p) => {
            if (p.output) {
              for (const l of p.output.text.replace(/\n$/, "").split("\n")) {
                out(`${id} ${p.output.stream}| ${l}`);
              }
            } else if (p.message) out(`${id} progress| ${p.message}`);
          },
        }).then((result) => {
          const text = result.content.filter((b) => b.type === "text").map((b) =>
            (b as { text: string }).text
          ).join("");
          out(
            `${id} ${result.outcome}${result.is_error ? " (tool error)" : ""}: ${
              JSON.stringify(result.structured_content ?? text)
            }`,
          );
        }, (error) => out(`${id} failed: ${(error as Error).message}`));
        pending.add(call);
        void call.finally(() => pending.delete(call));
        return true;
      }
      case "cancel": {
        const session = sessions.get(args[0]);
        if (!session) throw new Error(`no session ${args[0]}`);
        out(`cancel ${args[1]}: ${JSON.stringify(await session.cancelTool(args[1]))}`);
        return true;
      }
      case "stop": {
        const session = sessions.get(args[0]);
        if (!session) throw new Error(`no session ${args[0]}`);
        await Promise.all(pending);
        const end = await session.stop(args.slice(1).join(" ") || "stopped");
        sessions.delete(session.id);
        out(`stopped ${session.id}: ${JSON.stringify(end)}`);
        return true;
      }
      case "attach": {
        const session = sessions.get(args[0]);
        if (!session) throw new Error(`no session ${args[0]}`);
        const named = args[1] === "--id";
        const id = named ? args[2] : undefined;
        if (named && !id) throw new Error("attach --id takes a terminal id");
        const argv = args.slice(named ? 3 : 1);
        let terminal = id ? terminals.get(id) : undefined;
        if (!terminal) {
          const size = process.stdout.isTTY
            ? { cols: process.stdout.columns, rows: process.stdout.rows }
            : {};
          terminal = await session.terminal({
            ...(id ? { terminal_id: id } : {}),
            ...(argv.length ? { argv } : {}),
            ...size,
          });
          terminals.set(terminal.id, terminal);
        }
        out(`attached ${terminal.id} (Ctrl-] detaches)`);
        const how = await attach(terminal, input);
        if (how === "detached") {
          out(`\r\ndetached ${terminal.id} (attach ${session.id} --id ${terminal.id} returns)`);
        } else {
          terminals.delete(terminal.id);
          out(`\r\nterminal ${terminal.id} exited: code ${await terminal.exited}`);
        }
        return true;
      }
      case "drain": {
        const executor = executorById(args[0]);
        if (!executor) throw new Error(`no executor ${args[0]}`);
        out(`drained ${executor.id}: ${JSON.stringify(await executor.drain())}`);
        return true;
      }
      default:
        throw new Error(`unknown command "${command}" (try help)`);
    }
  };

  let closing = false;
  const shutdown = async () => {
    if (closing) return;
    closing = true;
    await Promise.allSettled(pending);
    for (const server of servers) await server.close();
    await harness.close();
  };
  process.on("SIGTERM", () => void shutdown().then(() => process.exit(0)));
  process.on("SIGINT", () => void shutdown().then(() => process.exit(0)));
  for (let line = await input.line(); line !== undefined; line = await input.line()) {
    try {
      if (!(await run(line))) break;
    } catch (error) {
      out(`error: ${(error as Error).message}`);
    }
  }
  await shutdown();
  return 0;
}

main().then((code) => process.exit(code), (error) => {
  process.stderr.write(`bma-harness: ${(error as Error).message}\n`);
  process.exit(1);
});
