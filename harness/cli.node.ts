#!/usr/bin/env node
/**
 * `bma-harness`: a local harness to drive executors by hand (or by script on stdin).
 *
 *   bma-harness --port 7700                 # then: bma-executor --harness ws://127.0.0.1:7700
 *   bma-harness --unix /tmp/bma.sock
 *
 * Commands are read one per line and run concurrently: a tool call, a stop or a drain runs while
 * the next command is read and answered. Only `wait` (the way a script sequences) and `attach`
 * (which takes the keyboard) hold the commands after them. Every output line starts with what it
 * is about (a call id, a session id, an executor id or the command's word), so interleaved output
 * stays readable; notes about the harness itself (signals, the end of input) go to stderr.
 * `help` lists the commands.
 */
import { negativeValues } from "../protocol/argv.ts";
import { parseArgs } from "node:util";
import * as z from "zod";
import { CONTRACT_VERSION, TOOL_SPECS } from "../protocol/generated/contract.ts";
import { InvalidOutgoingParamsError, ProtocolError } from "../protocol/errors.ts";
import { ShellWordsError, splitWords } from "./cli-words.ts";
import { SDK_VERSION as VERSION } from "../executor/version.ts";
import { AgentPlatform } from "../agent/platform.ts";
import {
  type ExecutorHandle,
  Harness,
  type HarnessServer,
  inspector,
  randomInspectorToken,
  serveInspector,
  type Session,
  type SessionEventRecord,
  type Terminal,
  type ToolCallResult,
  ToolOutcomeUnknownError,
} from "./node.ts";

const USAGE =
  `bma-harness ${VERSION} — a local harness of the BMA Executor Protocol (bma.executor.v1.1)

Usage: bma-harness [--host 127.0.0.1] [--port 7700] [--unix /path.sock] [--heartbeat-ms 15000]

Listens on 127.0.0.1 (and/or a Unix socket) without authentication, for executors on this
machine; any other --host needs --insecure-no-auth. Reads commands from stdin, one per line.
They run concurrently (a call runs while the next command is answered), except wait and attach,
which hold the commands after them until they are done. A line is split into words as a shell
splits it ('a b', "a b", a\\ b; nothing is expanded): attach ses_1 sh -c 'echo hi; exit 7'. The
JSON of call and the command of bash are the rest of the line, as typed.

Executors and sessions:
  executors                          the executors the harness holds
  sessions                           the live sessions
  tools <executor|session>           the tools an executor advertises, with their input schemas
  assign <executor> [session]        assign a session (<executor> "-": the first connected one;
                                     the session id defaults to ses_<n>)
  drain <executor>                   drain an executor (no new sessions)
Tool calls:
  call <session> <tool> <json>       call a tool; progress and the result print as they arrive
  bash <session> <command...>        shorthand for call <session> bash {"command": ...}
  cancel [<session>] <call_id>       cancel a running call
  stop <session> [reason]            cancel the session's running calls, then stop it (the
                                     executor kills its processes); prints when it has ended
Events and terminals:
  events <session> [--follow]        the session's durable events so far; --follow: and the new
                                     ones as they arrive, until the session ends
  attach <session> [--id <terminal_id>] [program args...]
                                     attach this terminal to a terminal of the session (default:
                                     the executor user's login shell); Ctrl-] detaches, and
                                     attach --id <terminal_id> attaches again
Waiting (holds the commands after it; the way a script sequences):
  wait <n>                           until n executors are connected
  wait <call_id|session>...          until these calls have ended and these sessions have ended
  wait                               until every running call and command has ended
  wait ... --timeout <ms>            give up after ms (an error line), then go on
Other:
  login-link                         a new one-time login URL of the inspector (--ui)
  help                               this text
  quit                               stop (as Ctrl-C does) and exit

Output: one line per event, starting with what it is about: a call id ("call_1 started",
"call_1 stdout| ...", "call_1 completed: {...}", "call_1 failed: ..."), a session id, an
executor id, or the command's word ("assigned", "stopped", "ready", "waited", ...). A command
that fails prints "error: <command>: <why>", with the contract's issue paths when the contract
refuses what was given ("input.content: ..."). Empty lists say so ("no executors connected").

Signals: Ctrl-C (SIGINT) or SIGTERM stops: running calls are canceled and the sessions stopped
(their processes killed), then the harness exits 0; it says on stderr what it waits for, and a
second Ctrl-C exits at once (130). The end of input (Ctrl-D, the end of a script) first waits
for the running calls and commands, then stops the same way. The last line on stdout is
"closed, exit code <n>".

Options:
  --host <address>       the address to listen on (default 127.0.0.1)
  --port <n>             the TCP port (default 7700; 0: any free port)
  --unix <path>          also listen on a Unix socket
  --heartbeat-ms <n>     the heartbeat interval executors are given (default 15000)
  --insecure-no-auth     allow a --host beyond loopback, still without authentication
  --ui                   serve the inspector page on 127.0.0.1 (a port of its own) and print a
                         one-time URL that opens it ("inspector http://127.0.0.1:<port>/login?...");
                         agent executors' turns and approvals are served too
  --ui-port <n>          the inspector's port (default 0: any free port; implies --ui)
  --help                 this text
  --version              the version (and the contract's)

Exit codes: 0 after quit, the end of input or a signal; 1 it could not start (the port is in
use, ...); 2 a bad flag; 130 a second signal.
`;

/** A command line that cannot work as typed: its error line, nothing run. */
class CommandError extends Error {}

/** An error as one line: its message, the JSON-RPC code, and the contract's issue paths. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  let text = error.message;
  if (error instanceof ProtocolError) {
    text += ` (${error.code}${error.reason ? ` ${error.reason}` : ""})`;
  }
  const issues = (error as { issues?: unknown }).issues ??
    (error as { data?: { issues?: unknown } }).data?.issues;
  if (Array.isArray(issues) && issues.length) {
    text += `: ${issues.slice(0, 8).map(describeIssue).join("; ")}`;
  }
  return text;
}

/** One issue of the contract's: `input.content: Invalid input: expected string, ...`. */
function describeIssue(issue: unknown): string {
  const { path, message } = (issue ?? {}) as { path?: unknown; message?: unknown };
  const where = Array.isArray(path) && path.length
    ? path.map((part, i) =>
      typeof part === "number" || /^\d+$/.test(String(part))
        ? `[${part}]`
        : `${i ? "." : ""}${String(part)}`
    ).join("")
    : "(params)";
  return `${where}: ${typeof message === "string" ? message : "invalid"}`;
}

/** A tool's input schema as JSON Schema: the contract's for a built-in tool. */
function builtInInputSchema(tool: string): Record<string, unknown> | undefined {
  const spec = TOOL_SPECS.get(tool);
  if (!spec) return undefined;
  return tidySchema(z.toJSONSchema(spec.input, { io: "input" })) as Record<string, unknown>;
}

/**
 * A JSON Schema without what says nothing to a reader: the bounds of a safe integer, and the
 * empty `additionalProperties` of an object that accepts members beyond its own.
 */
function tidySchema(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(tidySchema);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (key === "$schema") continue;
    if (key === "maximum" && item === Number.MAX_SAFE_INTEGER) continue;
    if (key === "minimum" && item === Number.MIN_SAFE_INTEGER) continue;
    if (key === "additionalProperties" && typeof item === "object" && item !== null) {
      if (Object.keys(item).length === 0) continue;
    }
    out[key] = tidySchema(item);
  }
  return out;
}

/** The text blocks of a result, joined. */
function textOf(result: ToolCallResult): string {
  return (result.content ?? []).filter((b) => b.type === "text").map((b) =>
    (b as { text: string }).text
  ).join("");
}

/**
 * A command line split into words as a shell does (quotes, backslashes; nothing expanded). The
 * JSON of `call` and the command of `bash` are the rest of the line, as typed.
 */
function words(line: string): { word: string | undefined; args: string[]; rest: string } {
  const [word] = splitWords(line, 1).words;
  // call <session> <tool> <json…>, bash <session> <command…>: the rest is not split.
  const max = word === "call" ? 3 : word === "bash" ? 2 : Infinity;
  const split = splitWords(line, max);
  return { word, args: split.words.slice(1), rest: split.rest };
}

function writeOut(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** A note about the harness itself (signals, end of input): on stderr, beside the output. */
function note(line: string): void {
  process.stderr.write(`bma-harness: ${line}\n`);
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

/** A tool call started by a command. */
interface CallJob {
  readonly id: string;
  readonly sessionId: string;
  readonly tool: string;
  /** Settles (never rejects) when the call has ended and its line is printed. */
  readonly done: Promise<void>;
  /** Its outcome once ended (`completed`, `canceled`, ..., or `failed`). */
  outcome: string | undefined;
  /** The executor accepted a cancel of it (`{"canceled": true}`). */
  canceled: boolean;
}

/** A command running in the background. */
interface Job {
  /** What it is, for "waiting for ..." notes. */
  readonly label: string;
  readonly done: Promise<void>;
  /** Waited for by a bare `wait` and by the end of input (a follow is not: it never ends). */
  readonly waitable: boolean;
}

/** The harness and the commands that drive it. */
class Cli {
  readonly #harness: Harness;
  readonly #servers: HarnessServer[];
  readonly #input: Input;
  readonly #calls = new Map<string, CallJob>();
  readonly #jobs = new Set<Job>();
  /** Sessions being assigned: commands naming one wait for its assignment. */
  readonly #assigning = new Map<string, Promise<Session>>();
  /** Sessions a `stop` (or the shutdown) is ending: their end is that command's to print. */
  readonly #stopping = new Set<string>();
  /** The one stop of each session (its "stopped" line printed once), by session id. */
  readonly #stops = new Map<string, Promise<void>>();
  readonly #terminals = new Map<string, Terminal>();
  /** Sessions assigned here, ended ones included (their events can still be read). */
  readonly #known = new Map<string, Session>();
  /** Ends `events --follow` readers at shutdown. */
  readonly #follows = new AbortController();
  #callCount = 0;
  #sessionCount = 0;
  /** Output held while a terminal is attached (it owns the screen), printed at detach. */
  #held: string[] | undefined;
  #quitting: Promise<void> | undefined;
  /** Resolves when stopping begins (a signal during the end of input's wait). */
  readonly #quitBegun: Promise<void>;
  #beginQuit!: () => void;

  /** Mints a one-time login URL of the inspector (with --ui). */
  loginLink: (() => Promise<string>) | undefined;

  constructor(harness: Harness, servers: HarnessServer[], input: Input) {
    this.#harness = harness;
    this.#servers = servers;
    this.#input = input;
    this.#quitBegun = new Promise((resolve) => (this.#beginQuit = resolve));
    harness.onExecutor((event) => this.#out(`executor ${event.type} ${event.executor.id}`));
  }

  get quitting(): boolean {
    return this.#quitting !== undefined;
  }

  #out(line: string): void {
    if (this.#held) this.#held.push(line);
    else writeOut(line);
  }

  /** Runs one command line: at once for the quick ones, in the background for the rest. */
  async run(line: string): Promise<void> {
    let word: string | undefined, args: string[], rest: string;
    try {
      ({ word, args, rest } = words(line));
    } catch (error) {
      if (!(error instanceof ShellWordsError)) throw error;
      const [first] = line.trim().split(/\s+/);
      this.#out(`error: ${first}: ${error.message} (quote as a shell does: 'a b', "a b", a\\ b)`);
      return;
    }
    if (!word) return;
    // What an error line names: the command and its first argument.
    const label = args.length ? `${word} ${args[0]}` : word;
    try {
      switch (word) {
        case "help":
          process.stdout.write(USAGE);
          return;
        case "login-link": {
          if (!this.loginLink) throw new CommandError("no inspector: start bma-harness with --ui");
          this.#out(`inspector ${await this.loginLink()}`);
          return;
        }
        case "executors":
          return this.#listExecutors();
        case "sessions":
          return this.#listSessions();
        case "tools":
          return this.#spawn(label, true, () => this.#tools(args));
        case "assign":
          return this.#assign(args, label);
        case "call":
        case "bash":
          return this.#call(word, args, rest);
        case "cancel":
          return this.#spawn(label, true, () => this.#cancel(args));
        case "stop":
          return this.#spawn(label, true, () => this.#stop(args));
        case "drain":
          return this.#spawn(label, true, () => this.#drain(args));
        case "events":
          return this.#events(args, label);
        case "wait":
          // Held: the commands after it start once it is done.
          await this.#wait(args);
          return;
        case "attach":
          await this.#attach(args);
          return;
        default:
          throw new CommandError(`unknown command "${word}" (try help)`);
      }
    } catch (error) {
      this.#out(`error: ${label}: ${describe(error)}`);
    }
  }

  /** Starts a command in the background; its failure is its error line. */
  #spawn(label: string, waitable: boolean, work: () => Promise<void>): void {
    const done = work().catch((error) => this.#out(`error: ${label}: ${describe(error)}`));
    const job: Job = { label, done, waitable };
    this.#jobs.add(job);
    void done.finally(() => this.#jobs.delete(job));
  }

  // ---- lookups ------------------------------------------------------------------------------

  #executor(id: string | undefined): ExecutorHandle {
    if (!id) throw new CommandError("name an executor (or - for the first connected one)");
    const executors = this.#harness.executors;
    const found = id === "-"
      ? executors.find((e) => e.connected && !e.draining) ?? executors.find((e) => e.connected)
      : this.#harness.executor(id);
    if (found) return found;
    const known = executors.map((e) => e.id).join(", ");
    throw new CommandError(
      id === "-"
        ? "no executors connected"
        : `no executor ${id} (${known ? `known: ${known}` : "no executors connected"})`,
    );
  }

  /** A session by id; one still being assigned is waited for. */
  async #session(id: string | undefined): Promise<Session> {
    if (!id) throw new CommandError("name a session");
    const assigning = this.#assigning.get(id);
    if (assigning) {
      try {
        return await assigning;
      } catch {
        throw new CommandError(`session ${id} was not assigned`);
      }
    }
    const session = this.#harness.sessions.get(id) ?? this.#known.get(id);
    if (session) return session;
    throw new CommandError(`no session named ${id} (${this.#sessionNames()})`);
  }

  /** The live sessions' ids, or how to make one, for an error line. */
  #sessionNames(): string {
    const live = [...this.#harness.sessions.keys()];
    return live.length ? `live: ${live.join(", ")}` : "no sessions: assign one";
  }

  #runningCalls(sessionId?: string): CallJob[] {
    return [...this.#calls.values()].filter((call) =>
      call.outcome === undefined && (sessionId === undefined || call.sessionId === sessionId)
    );
  }

  // ---- listings -----------------------------------------------------------------------------

  #listExecutors(): void {
    const executors = this.#harness.executors;
    if (!executors.some((e) => e.connected)) this.#out("no executors connected");
    for (const e of executors) {
      this.#out(
        `${e.id} ${e.info.name} ${e.protocol} connected=${e.connected} sessions=${e.sessions.size} tools=${
          (e.capabilities.tools ?? []).join(",")
        }${e.draining ? " draining" : ""}`,
      );
    }
  }

  #listSessions(): void {
    const sessions = [...this.#harness.sessions.values()];
    const assigning = [...this.#assigning.keys()].filter((id) => !this.#harness.sessions.has(id));
    if (!sessions.length && !assigning.length) {
      this.#out("no sessions");
      return;
    }
    for (const s of sessions) {
      const status = s.reportedStatus;
      this.#out(
        `${s.id} executor=${s.executor.id} state=${s.state} running_calls=${
          this.#runningCalls(s.id).length
        } events=${s.eventRecords.length}${status ? ` status=${status.status}` : ""}`,
      );
    }
    for (const id of assigning) this.#out(`${id} state=assigning`);
  }

  async #tools(args: string[]): Promise<void> {
    const [target] = args;
    if (!target) throw new CommandError("name an executor or a session");
    let executor = this.#harness.executor(target) ??
      (target === "-" ? this.#executor("-") : undefined);
    if (!executor) {
      const isSession = this.#assigning.has(target) || this.#harness.sessions.has(target) ||
        this.#known.has(target);
      if (!isSession) {
        const executors = this.#harness.executors.map((e) => e.id);
        throw new CommandError(
          `no executor or session named ${target} (${
            executors.length ? `executors: ${executors.join(", ")}` : "no executors connected"
          }; ${this.#sessionNames()}; "executors" and "sessions" list them)`,
        );
      }
      executor = (await this.#session(target)).executor;
    }
    const capabilities = executor.capabilities;
    const tools = capabilities.tools ?? [];
    if (!tools.length) {
      this.#out(`no tools advertised by ${executor.id}`);
      return;
    }
    for (const name of tools) {
      const definition = capabilities.tool_definitions?.[name];
      const schema = builtInInputSchema(name) ?? tidySchema(definition?.input_schema);
      const description = TOOL_SPECS.has(name) ? undefined : definition?.description;
      this.#out(
        `tool ${name} ${schema ? JSON.stringify(schema) : "(no input schema advertised)"}${
          description ? ` — ${description}` : ""
        }`,
      );
    }
  }

  // ---- sessions -----------------------------------------------------------------------------

  #assign(args: string[], label: string): void {
    const executor = this.#executor(args[0]);
    let id = args[1];
    if (!id) {
      do id = `ses_${++this.#sessionCount}`; while (
        this.#harness.sessions.has(id) || this.#known.has(id)
      );
    }
    if (this.#harness.sessions.has(id) || this.#assigning.has(id) || this.#known.has(id)) {
      throw new CommandError(`session ${id} exists`);
    }
    // Settles once "assigned" is printed: what names the session (a call on the next line)
    // prints after it.
    const assigned = (async () => {
      const session = await executor.assignSession({
        session_id: id,
        metadata: { source: "harness" },
      });
      await session.ready();
      this.#known.set(session.id, session);
      this.#out(`assigned ${session.id} to ${executor.id}`);
      // An end nobody asked for here (the executor's, a lease) is news too.
      void session.ended.then((end) => {
        if (!this.#stopping.has(session.id)) this.#out(`${session.id} ended: ${end.reason}`);
      });
      return session;
    })();
    this.#assigning.set(id, assigned);
    assigned.catch(() => {}).finally(() => this.#assigning.delete(id));
    this.#spawn(label, true, async () => {
      await assigned;
    });
  }

  /**
   * Stops a session once: its running calls canceled first (each ends canceled), then the
   * session; "stopped" printed when it has ended. A second stop (`quit` after `stop`) waits for
   * the first instead of printing it again.
   */
  #stopSession(session: Session, reason: string, announce: boolean): Promise<void> {
    let stop = this.#stops.get(session.id);
    if (!stop) {
      this.#stopping.add(session.id);
      stop = (async () => {
        const running = this.#runningCalls(session.id);
        if (running.length && announce) {
          this.#out(`stopping ${session.id}: canceling ${running.map((c) => c.id).join(", ")}`);
        }
        await Promise.allSettled(running.map((call) => this.#cancelCall(session, call.id, reason)));
        const end = await session.stop(reason);
        this.#out(`stopped ${session.id}: ${JSON.stringify(end)}`);
      })();
      this.#stops.set(session.id, stop);
    }
    return stop;
  }

  async #stop(args: string[]): Promise<void> {
    const session = await this.#session(args[0]);
    const reason = args.slice(1).join(" ") || "stopped";
    // Canceled first (each ends with outcome canceled), then the session: no waiting for them.
    await this.#stopSession(session, reason, true);
  }

  async #drain(args: string[]): Promise<void> {
    const executor = this.#executor(args[0]);
    this.#out(`drained ${executor.id}: ${JSON.stringify(await executor.drain())}`);
  }

  // ---- tool calls ---------------------------------------------------------------------------

  #call(word: string, args: string[], rest: string): void {
    const [sessionId] = args;
    if (!sessionId) throw new CommandError("name a session");
    let tool: string;
    let input: Record<string, unknown>;
    if (word === "bash") {
      const command = rest;
      if (!command) throw new CommandError("bash takes a command");
      tool = "bash";
      input = { command };
    } else {
      tool = args[1];
      if (!tool) throw new CommandError("call takes a tool and its JSON input");
      const json = rest || "{}";
      let parsed: unknown;
      try {
        parsed = JSON.parse(json);
      } catch (error) {
        throw new CommandError(`the input is not JSON: ${(error as Error).message}`);
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        throw new CommandError("the input is a JSON object");
      }
      input = parsed as Record<string, unknown>;
    }
    const id = `call_${++this.#callCount}`;
    // Known from now on, so a `wait` or `cancel` on the next line finds it.
    let end!: () => void;
    const done = new Promise<void>((resolve) => (end = resolve));
    const call: CallJob = { id, sessionId, tool, done, outcome: undefined, canceled: false };
    this.#calls.set(id, call);
    const job: Job = { label: `${id} (${tool} in ${sessionId})`, done, waitable: true };
    this.#jobs.add(job);
    void (async () => {
      try {
        const session = await this.#session(sessionId);
        // Once its session is there (and its "assigned" line printed): the order things happen.
        this.#out(`${id} started`);
        const result = await session.callTool({ tool, input, tool_call_id: id }, {
          onProgress: (p) => {
            if (p.output) {
              for (const text of p.output.text.replace(/\n$/, "").split("\n")) {
                this.#out(`${id} ${p.output.stream}| ${text}`);
              }
            } else if (p.message) this.#out(`${id} progress| ${p.message}`);
          },
        });
        call.outcome = result.outcome;
        const shown = result.error ?? result.structured_content ?? textOf(result);
        this.#out(
          `${id} ${result.outcome}${result.is_error ? " (tool error)" : ""}: ${
            JSON.stringify(shown)
          }`,
        );
      } catch (error) {
        if (call.canceled && error instanceof ToolOutcomeUnknownError) {
          // The executor accepted the cancel and then closed (a second signal stops it now)
          // before the canceled result reached the harness: it is canceled all the same.
          call.outcome = "canceled";
          this.#out(
            `${id} canceled: the cancel was accepted; its result never came (${error.reason})`,
          );
        } else {
          call.outcome = "failed";
          this.#out(`${id} failed: ${this.#describeCallError(error, call)}`);
        }
      } finally {
        this.#jobs.delete(job);
        end();
      }
    })();
  }

  /**
   * A tool call's failure in words. Input refused before it was sent names the tool, and whose
   * schema refused it (the contract's for a built-in tool, the executor's own for its tools),
   * with each refused field.
   */
  #describeCallError(error: unknown, call: CallJob): string {
    if (error instanceof InvalidOutgoingParamsError && error.method === "tool.call") {
      const inputIssues = error.issues.filter((issue) => {
        const path = (issue as { path?: unknown }).path;
        return Array.isArray(path) && path[0] === "input";
      });
      if (inputIssues.length === error.issues.length && inputIssues.length) {
        const whose = TOOL_SPECS.has(call.tool)
          ? "the contract's input schema of this built-in tool"
          : "the input schema its executor advertised (see tools " + call.sessionId + ")";
        return `the input of tool ${call.tool} does not match ${whose}: ${
          inputIssues.slice(0, 8).map(describeIssue).join("; ")
        }`;
      }
    }
    return describe(error);
  }

  /** Cancels a call; a cancel the executor accepted makes the call canceled however it ends. */
  async #cancelCall(session: Session, callId: string, reason?: string) {
    const result = await session.cancelTool(callId, reason);
    const call = this.#calls.get(callId);
    if (call && result.canceled) call.canceled = true;
    return result;
  }

  async #cancel(args: string[]): Promise<void> {
    const callId = args.length > 1 ? args[1] : args[0];
    if (!callId) throw new CommandError("name a call");
    const sessionId = args.length > 1 ? args[0] : this.#calls.get(callId)?.sessionId;
    if (!sessionId) throw new CommandError(`no call ${callId}: name its session too`);
    const session = await this.#session(sessionId);
    this.#out(`cancel ${callId}: ${JSON.stringify(await this.#cancelCall(session, callId))}`);
  }

  // ---- events -------------------------------------------------------------------------------

  #events(args: string[], label: string): void {
    const follow = args.includes("--follow") || args.includes("-f");
    const [sessionId] = args.filter((a) => !a.startsWith("-"));
    const line = (r: SessionEventRecord) =>
      `${r.session_id} event ${r.index}${r.turn_id ? ` turn=${r.turn_id}` : ""} ${
        JSON.stringify(r.event)
      }`;
    this.#spawn(label, !follow, async () => {
      const session = await this.#session(sessionId);
      if (!follow) {
        const records = session.eventRecords;
        if (!records.length) this.#out(`no events in ${session.id}`);
        for (const record of records) this.#out(line(record));
        return;
      }
      for await (const record of session.events({ signal: this.#follows.signal })) {
        this.#out(line(record));
      }
      if (session.state === "ended") {
        this.#out(`${session.id} events end: the session ended (${(await session.ended).reason})`);
      }
    });
  }

  // ---- waiting ------------------------------------------------------------------------------

  async #wait(args: string[]): Promise<void> {
    let timeoutMs: number | undefined;
    const targets: string[] = [];
    for (let i = 0; i < args.length; i++) {
      if (args[i] === "--timeout") {
        timeoutMs = Number(args[++i]);
        if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
          throw new CommandError("--timeout takes milliseconds");
        }
      } else targets.push(args[i]);
    }
    const waits: { what: string; done: Promise<string> }[] = [];
    if (!targets.length) {
      const jobs = [...this.#jobs].filter((job) => job.waitable);
      for (const job of jobs) waits.push({ what: job.label, done: job.done.then(() => "") });
    }
    for (const target of targets) {
      if (/^\d+$/.test(target)) {
        waits.push({ what: `${target} executors`, done: this.#executorsConnected(Number(target)) });
        continue;
      }
      const call = this.#calls.get(target);
      if (call) {
        waits.push({ what: target, done: call.done.then(() => `${target} ${call.outcome}`) });
        continue;
      }
      const session = await this.#session(target);
      waits.push({
        what: target,
        done: session.ended.then((end) => `${target} ended (${end.reason})`),
      });
    }
    const pending = new Set(waits.map((w) => w.what));
    const all = Promise.all(
      waits.map((w) => w.done.then((text) => (pending.delete(w.what), text))),
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = timeoutMs === undefined ? undefined : new Promise<"timed out">((resolve) => {
      timer = setTimeout(() => resolve("timed out"), timeoutMs);
    });
    const first = await (timedOut ? Promise.race([all, timedOut]) : all);
    clearTimeout(timer);
    if (first === "timed out") {
      throw new CommandError(
        `timed out after ${timeoutMs} ms, still waiting for ${[...pending].join(", ")}`,
      );
    }
    const texts = first.filter(Boolean);
    if (targets.length && targets.every((t) => /^\d+$/.test(t))) {
      this.#out(`ready ${this.#harness.executors.filter((e) => e.connected).length}`);
    } else if (!targets.length) {
      this.#out(
        waits.length ? `waited ${waits.map((w) => w.what).join(", ")}` : "waited: nothing runs",
      );
    } else this.#out(`waited ${texts.join(", ")}`);
  }

  /** Resolves once at least `want` executors are connected. */
  #executorsConnected(want: number): Promise<string> {
    const count = () => this.#harness.executors.filter((e) => e.connected).length;
    if (count() >= want) return Promise.resolve("");
    return new Promise((resolve) => {
      const listener = this.#harness.onExecutor(() => {
        if (count() < want) return;
        listener.dispose();
        resolve("");
      });
    });
  }

  // ---- terminals ----------------------------------------------------------------------------

  async #attach(args: string[]): Promise<void> {
    const session = await this.#session(args[0]);
    const named = args[1] === "--id";
    const id = named ? args[2] : undefined;
    if (named && !id) throw new CommandError("attach --id takes a terminal id");
    const argv = args.slice(named ? 3 : 1);
    let terminal = id ? this.#terminals.get(id) : undefined;
    if (!terminal) {
      const size = process.stdout.isTTY
        ? { cols: process.stdout.columns, rows: process.stdout.rows }
        : {};
      terminal = await session.terminal({
        ...(id ? { terminal_id: id } : {}),
        ...(argv.length ? { argv } : {}),
        ...size,
      });
      this.#terminals.set(terminal.id, terminal);
    }
    this.#out(`attached ${terminal.id} (Ctrl-] detaches)`);
    this.#held = [];
    let how: "exited" | "detached";
    try {
      how = await attach(terminal, this.#input);
    } finally {
      const held = this.#held;
      this.#held = undefined;
      if (held.length) process.stdout.write("\r\n");
      for (const line of held) writeOut(line);
    }
    if (how === "detached") {
      this.#out(`\r\ndetached ${terminal.id} (attach ${session.id} --id ${terminal.id} returns)`);
    } else {
      this.#terminals.delete(terminal.id);
      this.#out(`\r\nterminal ${terminal.id} exited: code ${await terminal.exited}`);
    }
  }

  // ---- the end ------------------------------------------------------------------------------

  /** What the running commands are, for a note. */
  #running(): string[] {
    return [...this.#jobs].filter((job) => job.waitable).map((job) => job.label);
  }

  /** The end of input: what runs may finish (said so), then the harness stops. */
  async drainInput(): Promise<void> {
    const running = this.#running();
    if (running.length && !this.quitting) {
      note(`end of input: waiting for ${running.join(", ")} (Ctrl-C stops them)`);
    }
    while (!this.quitting) {
      const jobs = [...this.#jobs].filter((job) => job.waitable);
      if (!jobs.length) break;
      await Promise.race([Promise.all(jobs.map((job) => job.done)), this.#quitBegun]);
    }
  }

  /** What stopping will wait for, in words. */
  describeQuit(): string {
    const calls = this.#runningCalls().map((c) => `${c.id} (${c.tool} in ${c.sessionId})`);
    const sessions = [...this.#harness.sessions.values()].filter((s) => s.state !== "ended")
      .map((s) => s.id);
    const parts: string[] = [];
    if (calls.length) parts.push(`canceling ${calls.join(", ")}`);
    if (sessions.length) parts.push(`stopping ${sessions.join(", ")}`);
    return parts.length ? parts.join(", then ") : "closing (nothing runs)";
  }

  /** Stops: running calls canceled, sessions stopped (their processes killed), then closes. */
  quit(reason: string): Promise<void> {
    this.#beginQuit();
    this.#quitting ??= (async () => {
      this.#follows.abort();
      const sessions = [...this.#harness.sessions.values()].filter((s) => s.state !== "ended");
      await Promise.allSettled(
        sessions.map((session) => this.#stopSession(session, reason, false)),
      );
      // The canceled calls' lines come before the last one.
      await Promise.allSettled(this.#runningCalls().map((call) => call.done));
      for (const server of this.#servers) await server.close();
      await this.#harness.close();
    })();
    return this.#quitting;
  }
}

const OPTIONS = {
  host: { type: "string" },
  port: { type: "string" },
  unix: { type: "string" },
  "heartbeat-ms": { type: "string" },
  "insecure-no-auth": { type: "boolean" },
  ui: { type: "boolean" },
  "ui-port": { type: "string" },
  help: { type: "boolean" },
  version: { type: "boolean" },
} as const;

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: negativeValues(process.argv.slice(2), OPTIONS),
      strict: true,
      options: OPTIONS,
    }));
  } catch (error) {
    process.stderr.write(`bma-harness: ${(error as Error).message.split("\n")[0]} (see --help)\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`bma-harness ${VERSION} (contract ${CONTRACT_VERSION})\n`);
    return 0;
  }
  const host = values.host ?? "127.0.0.1";
  const loopback = host === "127.0.0.1" || host === "::1" || host === "localhost";
  if (!loopback && !values["insecure-no-auth"]) {
    process.stderr.write(
      "bma-harness: serving beyond loopback without authentication needs --insecure-no-auth (see --help)\n",
    );
    return 2;
  }
  const port = values.port === undefined ? 7700 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`bma-harness: --port takes 0-65535, not "${values.port}" (see --help)\n`);
    return 2;
  }
  const heartbeat = values["heartbeat-ms"];
  const heartbeatMs = heartbeat === undefined ? undefined : Number(heartbeat);
  if (heartbeatMs !== undefined && (!Number.isInteger(heartbeatMs) || heartbeatMs <= 0)) {
    process.stderr.write(
      `bma-harness: --heartbeat-ms must be a positive integer (milliseconds), not "${heartbeat}" (see --help)\n`,
    );
    return 2;
  }
  const withUi = values.ui === true || values["ui-port"] !== undefined;
  const uiPort = values["ui-port"] === undefined ? 0 : Number(values["ui-port"]);
  if (!Number.isInteger(uiPort) || uiPort < 0 || uiPort > 65535) {
    process.stderr.write(
      `bma-harness: --ui-port takes 0-65535, not "${values["ui-port"]}" (see --help)\n`,
    );
    return 2;
  }
  const harness = new Harness({
    insecureNoAuth: true,
    heartbeatIntervalMs: heartbeatMs,
    // The page starts agent turns and answers their approvals.
    ...(withUi ? { agent: new AgentPlatform() } : {}),
  });
  const servers: HarnessServer[] = [];
  try {
    servers.push(await harness.serve({ hostname: host, port }));
    if (values.unix) servers.push(await harness.serveUnix(values.unix));
  } catch (error) {
    process.stderr.write(`bma-harness: cannot listen: ${(error as Error).message}\n`);
    await harness.close();
    return 1;
  }
  for (const server of servers) writeOut(`listening ${server.url}`);
  let loginLink: (() => Promise<string>) | undefined;
  if (withUi) {
    // The page's token stays in this process: what is printed is a URL that works once.
    const page = inspector(harness, {
      token: randomInspectorToken(),
      loginHint: "Type login-link in the terminal running bma-harness: it prints a new one.",
    });
    try {
      const web = await serveInspector(page, { port: uiPort });
      servers.push({
        url: web.url,
        httpUrl: web.url,
        close: async () => {
          page.close();
          await web.close();
        },
      });
      loginLink = () => page.loginUrl(web.url);
      writeOut(`inspector ${await loginLink()}`);
    } catch (error) {
      process.stderr.write(
        `bma-harness: cannot serve the inspector: ${(error as Error).message}\n`,
      );
      page.close();
      for (const server of servers) await server.close();
      await harness.close();
      return 1;
    }
  }

  const input = new Input(process.stdin);
  const cli = new Cli(harness, servers, input);
  cli.loginLink = loginLink;
  const finish = (code: number) => {
    writeOut(`closed, exit code ${code}`);
    process.exit(code);
  };
  let signals = 0;
  const onSignal = (signal: "SIGINT" | "SIGTERM") => {
    if (++signals > 1) {
      note(`${signal} again: exiting at once`);
      finish(130);
      return;
    }
    const again = signal === "SIGINT" ? "Ctrl-C again" : "another signal";
    note(`${signal}: ${cli.describeQuit()}; ${again} exits at once`);
    void cli.quit(signal).then(() => finish(0));
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));

  let quit = false;
  for (let line = await input.line(); line !== undefined; line = await input.line()) {
    if (cli.quitting) break;
    const word = line.trim().split(/\s+/)[0];
    if (word === "quit" || word === "exit") {
      quit = true;
      break;
    }
    await cli.run(line);
  }
  if (!quit) await cli.drainInput();
  if (!cli.quitting) {
    const what = cli.describeQuit();
    if (what !== "closing (nothing runs)") note(what);
  }
  await cli.quit(quit ? "quit" : "end of input");
  writeOut("closed, exit code 0");
  return 0;
}

main().then((code) => process.exit(code), (error) => {
  process.stderr.write(`bma-harness: ${(error as Error).message}\n`);
  process.exit(1);
});
