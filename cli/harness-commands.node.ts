/**
 * The commands of `bma-harness`, run against its `Harness`: listings, sessions, tool calls,
 * events, waiting, terminals, and stopping at the end. One command line in, its output lines out
 * (through `harness-stdio.node.ts`, held while a terminal owns the screen). The entry point
 * (`harness.node.ts`) reads the flags, starts the servers and feeds the lines in.
 */
import { TOOL_SPECS } from "../protocol/generated/contract.ts";
import { jsonSyntaxError } from "../protocol/logger.ts";
import { ShellWordsError } from "./shell-words.ts";
import { CommandError, words } from "./harness-command-line.ts";
import {
  builtInInputSchema,
  describe,
  describeCallError,
  textOf,
  tidySchema,
} from "./harness-describe.ts";
import { attach, type Input, note, writeOut } from "./harness-stdio.node.ts";
import { USAGE } from "./harness-usage.ts";
import {
  type ExecutorHandle,
  type Harness,
  type HarnessServer,
  type Session,
  type SessionEventRecord,
  type Terminal,
  ToolOutcomeUnknownError,
} from "../harness/node.ts";

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
export class Cli {
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
        throw new CommandError(`the input is ${jsonSyntaxError(error)}`);
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
        // A timed-out bash call carries its output so far beside the error.
        const shown = result.error && result.structured_content
          ? { ...result.structured_content, error: result.error }
          : result.error ?? result.structured_content ?? textOf(result);
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
          this.#out(`${id} failed: ${describeCallError(error, call)}`);
        }
      } finally {
        this.#jobs.delete(job);
        end();
      }
    })();
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
        ...(id ? { terminalId: id } : {}),
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

  /**
   * Stops: running calls canceled, sessions stopped (their processes killed), then closes. The
   * sessions of an executor that is away are not waited for (nothing can reach it: their calls
   * would settle only when its lease expires); the close ends them.
   */
  quit(reason: string): Promise<void> {
    this.#beginQuit();
    this.#quitting ??= (async () => {
      this.#follows.abort();
      const reachable = (sessionId: string) =>
        this.#harness.sessions.get(sessionId)?.executor.connected === true;
      const sessions = [...this.#harness.sessions.values()].filter((s) =>
        s.state !== "ended" && reachable(s.id)
      );
      await Promise.allSettled(
        sessions.map((session) => this.#stopSession(session, reason, false)),
      );
      const done = (calls: CallJob[]) => Promise.allSettled(calls.map((call) => call.done));
      await done(this.#runningCalls().filter((call) => reachable(call.sessionId)));
      for (const server of this.#servers) await server.close();
      await this.#harness.close();
      // The canceled calls' lines come before the last one, those the close ended too.
      await done(this.#runningCalls());
    })();
    return this.#quitting;
  }
}
