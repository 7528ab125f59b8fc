/**
 * Wires the machine tools into an {@linkcode ExecutorClient}: the `bash` and file tools confined
 * to the workdir, the process capability (`process.*`), file transfer, skills, workspace backup,
 * Git credentials and the MCP channel; with a `pty`, the terminal capability (`terminal.*`,
 * `terminals.ts`) too.
 *
 * Every process the executor starts for a session (bash calls, `process.start`, MCP servers,
 * terminals) gets the child environment of {@linkcode ServeMachineOptions.environment} (never
 * the executor's credential, tokens, or Git passwords; a request's own `env` goes through the
 * same policy) and is tracked as a process of that session (its process group or PTY session,
 * and a cgroup where the executor has one), so that when the session ends all of them are
 * ended (SIGTERM, SIGHUP for terminals, SIGKILL after the grace period to every survivor)
 * before `session.ended` is sent.
 *
 * A capability request for a session the executor does not hold is refused with -32002
 * `unknown_session` before anything starts.
 *
 * A work directory the tools could not use (missing, not a directory, not readable) is refused
 * at once, before anything is served ({@linkcode WorkdirError}).
 *
 * Every process it starts is ended with the executor's process too, however that ends (its
 * reaper, `reaper.node.ts`).
 */
import type { Clock } from "../../protocol/clock.ts";
import type {
  HarnessRequestMethod,
  ProcessOutputParams,
  RequestMap,
} from "../../protocol/generated/contract.ts";
import { ForbiddenError, NotFoundError } from "../../protocol/generated/errors.ts";
import { FrameTooLargeError } from "../../protocol/errors.ts";
import { linkedSignal } from "../../protocol/abort.ts";
import type { Disposable, RequestContext } from "../../protocol/peer.ts";
import { traceContextOf, traceEnvironment } from "../../protocol/trace-context.ts";
import type { ExecutorClient } from "../client.ts";
import { clientInternals } from "../extension.ts";
import type { ExecutorSession } from "../sessions.ts";
import { ToolError, ToolTimeoutError } from "../tool-results.ts";
import { BashTimeoutError, runBash } from "./bash.node.ts";
import { type Cgroup, CgroupTree, inCgroup } from "./cgroup.node.ts";
import {
  ChildEnvironment,
  type ChildEnvironmentOptions,
  NON_INTERACTIVE_LAYER,
} from "./child-env.node.ts";
import { editTool, FileToolError, globTool, grepTool, readTool, writeTool } from "./files.node.ts";
import { GitCredentialStore } from "./git-credentials.node.ts";
import type { McpServerConfig } from "./mcp-config.ts";
import { LossyOutput } from "./lossy-output.ts";
import { McpRelay } from "./mcp.node.ts";
import { existingDirectory, ProcessTable } from "./processes.node.ts";
import type { PtyHost } from "./pty.ts";
import { resolveProgram } from "./pty.node.ts";
import { cgroupSource, SessionProcesses } from "./session-processes.node.ts";
import { serveTerminals, type TerminalScope } from "./terminals.ts";
import { DEFAULT_MACHINE_LIMITS, type MachineLimits } from "./limits.ts";
import {
  backupWorkspace,
  downloadFile,
  installSkill,
  PendingUploads,
  removeDropped,
  sweepUploads,
  uploadFile,
} from "./transfer.node.ts";
import { PathOutsideWorkdirError, Workdir } from "./workdir.node.ts";
import { checkWorkdir } from "./workdir-check.node.ts";
import { answerForSystemError } from "./system-resources.ts";
import { join } from "node:path";

/** Options of {@linkcode serveMachine}. */
export interface ServeMachineOptions {
  /**
   * The directory every tool and process is confined to. It must exist and be readable and
   * searchable: otherwise `serveMachine` throws {@linkcode WorkdirError}.
   */
  workdir: string;
  /** Time between SIGTERM and SIGKILL for bash calls and processes. Default 2 s. */
  graceMs?: number;
  /**
   * Measures the `timeout_ms` of bash calls, `process.start` and `process.wait`, and the 15
   * minutes after which a chunked `file.upload` not continued is dropped. Default: the system
   * clock.
   */
  clock?: Clock;
  /** Variables set in every child (the same as `environment.set`, which wins). */
  env?: Record<string, string>;
  /**
   * The environment of every child process: by default only `PATH`, `HOME`, `USER`, `LOGNAME`,
   * `SHELL`, `LANG`, `LANGUAGE`, `LC_*`, `TERM`, `TZ` and `TMPDIR` of the executor's own;
   * `keep` adds variables, `drop` withholds them from every source, `set` fixes values. The
   * executor's credential variables and any value containing a secret it holds are withheld
   * whatever this says.
   */
  environment?: ChildEnvironmentOptions;
  /**
   * Track each session's processes in a cgroup v2 of its own (Linux, where the executor's
   * cgroup is writable), so that descendants that leave their process group are ended too.
   * Default `true` (used where possible); `false`: process groups only; a path: the cgroup
   * directory to create the session cgroups in.
   */
  cgroups?: boolean | string;
  /** MCP servers for the MCP channel (the `mcpServers` map of an `mcp.json`). */
  mcpServers?: Record<string, McpServerConfig>;
  /** Longest line (one MCP message) an MCP server may write. Default 16 MiB. */
  mcpMaxLineBytes?: number;
  /** Where `skill.install` puts skills. Default `<workdir>/.bma/skills`. */
  skillsRoot?: string;
  /** Fetch for skill archives and backup uploads. Default: the global fetch. */
  fetch?: typeof fetch;
  /** Bounds of the file tools, file transfer, skills and backups (defaults in the README). */
  limits?: Partial<MachineLimits>;
  /** Where the private directory of the Git credential sockets is made. Default: the temp dir. */
  gitSocketDir?: string;
  /**
   * Pseudo-terminals for `terminal.*` (the runtime entry points pass their runtime's). Without
   * one, or where it cannot start PTYs, terminals are neither served nor advertised.
   */
  pty?: PtyHost | false;
}

/** A file tool failure the model can act on becomes a tool error (`is_error: true`). */
async function asToolError<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof FileToolError) throw new ToolError(error.message);
    throw error;
  }
}

/** What the machine holds for one session. */
interface MachineSession {
  readonly session: ExecutorSession;
  readonly processes: SessionProcesses;
  readonly table: ProcessTable;
  /** Aborted (with `unknown_session`) once the session starts ending. */
  readonly ending: AbortController;
  /**
   * Requests of the session whose work its end stops and waits for (`workspace.backup`,
   * `skill.install`, `file.download`'s hash), or only waits for (`file.upload`'s chunks, before
   * its uploads in progress are dropped).
   */
  readonly work: Set<Promise<unknown>>;
}

/** `work`, counted among `machine`'s until it settles: the session's end waits for it. */
function sessionWork<T>(machine: MachineSession, work: Promise<T>): Promise<T> {
  machine.work.add(work);
  const done = () => machine.work.delete(work);
  work.then(done, done);
  return work;
}

/**
 * {@linkcode sessionWork} stopped by the session's end or the request's own signal: `start` gets
 * a signal following both, released once the work settles (nothing stays on the session's).
 */
function stoppableSessionWork<T>(
  machine: MachineSession,
  requestSignal: AbortSignal,
  start: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const linked = linkedSignal([machine.ending.signal, requestSignal]);
  const work = sessionWork(machine, start(linked.signal));
  work.then(linked.release, linked.release);
  return work;
}

/**
 * The requests served here whose contract lists -32009: a machine out of file descriptors or
 * processes answers them that (retryable), not -32603 (`system-resources.ts`).
 */
const EXHAUSTIBLE: ReadonlySet<string> = new Set(["process.start", "process.write", "mcp.open"]);

/** Requests that start or store something: refused once the session is ending. */
type SessionRequest = {
  [M in HarnessRequestMethod]: RequestMap[M]["params"] extends { session_id: string } ? M
    : never;
}[HarnessRequestMethod];

function unknownSession(): NotFoundError {
  return new NotFoundError("unknown session", { reason: "unknown_session" });
}

/** A terminal's cgroup leaf, where the terminal table looks for its processes too. */
function cgroupScope(cgroup: Cgroup): TerminalScope {
  return {
    signal: (signal) => {
      if (signal !== "SIGKILL") return cgroup.signal(signal);
      if (cgroup.populated() !== true) return false;
      cgroup.kill();
      return true;
    },
    alive: () => cgroup.populated() === true,
  };
}

/**
 * `process.start` params whose `env` holds the request's own trace context (`TRACEPARENT`,
 * `TRACESTATE` from `params._meta`) under the requested variables; the params as they are
 * without one.
 */
function withTraceEnv<P extends { env?: Record<string, string> }>(params: P): P {
  const trace = traceEnvironment(traceContextOf(params));
  return trace ? { ...params, env: { ...trace, ...params.env } } : params;
}

/**
 * Registers the machine tools and the process capability; dispose to withdraw them. `dispose()`
 * withdraws them and ends every process, terminal and MCP server of the machine in the
 * background; `await using machine = serveMachine(…)` (`Symbol.asyncDispose`) does the same and
 * resolves once they are gone. Throws {@linkcode WorkdirError} (serving nothing) for a work
 * directory the tools could not use.
 */
export function serveMachine(
  client: ExecutorClient,
  options: ServeMachineOptions,
): Disposable & AsyncDisposable {
  const internals = clientInternals(client);
  const logger = internals.logger;
  if (!checkWorkdir(options.workdir).writable) {
    logger.warn("the work directory is read-only for this user: write, edit and bash may fail", {
      workdir: options.workdir,
    });
  }
  const workdir = new Workdir(options.workdir);
  const limits: MachineLimits = { ...DEFAULT_MACHINE_LIMITS, ...options.limits };
  const graceMs = options.graceMs ?? 2_000;
  const git = new GitCredentialStore({ parentDir: options.gitSocketDir, logger });
  const childEnv = new ChildEnvironment(
    { ...options.environment, set: { ...options.env, ...options.environment?.set } },
    {
      containsSecret: (value) => internals.scrub(value) !== value || git.containsSecret(value),
      onWithheld: (name, why) => logger.debug("variable withheld from a child", { name, why }),
    },
  );
  /** A child's environment; a terminal's shell is interactive and gets no shell level. */
  const envFor = (sessionId: string, extra?: Record<string, string>, interactive = false) =>
    git.configure(
      sessionId,
      childEnv.build(interactive ? undefined : NON_INTERACTIVE_LAYER, extra),
    );
  const cgroups = cgroupSource(options.cgroups, (parent) => CgroupTree.open(parent), logger);
  const machines = new Map<string, MachineSession>();
  // Chunked uploads of every session of the workdir; leftovers of an executor gone before are
  // looked for now, in the background (an upload waits for that look to finish).
  const uploads = new PendingUploads(options.clock ? () => options.clock!.now() : Date.now);
  const onSweepError = (error: unknown) =>
    logger.debug("looking for leftover upload temporaries failed", { error: String(error) });
  const firstSweep = sweepUploads(workdir, uploads, onSweepError);
  let mcp: McpRelay | undefined;
  const processOutput = new LossyOutput<ProcessOutputParams>(
    {
      send: (params) => client.notify("process.output", params),
      congested: () => client.congested,
    },
    (params) => `${params.session_id}\n${params.process_id}\n${params.stream}`,
    options.clock,
  );

  /** The machine state of a session, made (with its cleanup hook) on first use. */
  const machineOf = (session: ExecutorSession): MachineSession => {
    const existing = machines.get(session.id);
    if (existing?.session === session) return existing;
    const sessionId = session.id;
    const processes = new SessionProcesses(sessionId, cgroups, logger);
    const table = new ProcessTable({
      sessionId,
      workdir,
      graceMs,
      clock: options.clock,
      spawn: (argv, spawnOptions) => processes.spawn(argv, spawnOptions),
      env: (extra) => envFor(sessionId, extra),
      onOutput: (params) => processOutput.send(params),
    });
    const machine: MachineSession = {
      session,
      processes,
      table,
      ending: new AbortController(),
      work: new Set(),
    };
    machines.set(sessionId, machine);
    session.onCleanup(async (cleanup) => {
      // A backup or a skill install still running is stopped (answered `unknown_session`):
      // `session.ended` means that nothing of the session goes on.
      machine.ending.abort(unknownSession());
      try {
        await Promise.all([
          mcp?.closeSession(sessionId, cleanup.graceMs),
          processes.end(cleanup.graceMs),
          // The session's uploads in progress go with it, once no chunk of it is running.
          Promise.allSettled(machine.work).then(() =>
            removeDropped(workdir, uploads.takeSession(sessionId))
          ).catch((error) =>
            logger.debug("dropping the session's uploads failed", { error: String(error) })
          ),
        ]);
      } finally {
        if (machines.get(sessionId) === machine) machines.delete(sessionId);
        processOutput.forgetSession(sessionId);
        await git.drop(sessionId);
      }
    });
    return machine;
  };

  /**
   * The machine state of a session the executor holds; -32002 `unknown_session` otherwise. A
   * session that is ending takes no request that would start or store something new.
   */
  const held = (sessionId: string, starting: boolean): MachineSession => {
    const session = client.session(sessionId);
    if (!session || session.state === "ended") throw unknownSession();
    const existing = machines.get(sessionId);
    if (session.state === "stopping") {
      // Its cleanup hooks are already running: nothing new may be attached to it.
      if (starting || existing?.session !== session) throw unknownSession();
      return existing;
    }
    return machineOf(session);
  };

  /** Serves a capability request of a session, refused for a session not held. */
  const serve = <M extends SessionRequest>(
    method: M,
    starting: boolean,
    handler: (
      params: RequestMap[M]["params"],
      machine: MachineSession,
      ctx: RequestContext,
    ) => RequestMap[M]["result"] | Promise<RequestMap[M]["result"]>,
  ): Disposable =>
    client.onRequest(method, (params, ctx) => {
      const machine = held((params as { session_id: string }).session_id, starting);
      if (!EXHAUSTIBLE.has(method)) return handler(params, machine, ctx);
      let answer: RequestMap[M]["result"] | Promise<RequestMap[M]["result"]>;
      try {
        answer = handler(params, machine, ctx);
      } catch (error) {
        throw answerForSystemError(error);
      }
      return answer instanceof Promise
        ? answer.catch((error) => {
          throw answerForSystemError(error);
        })
        : answer;
    });

  const fetchFn = options.fetch ?? fetch;
  const registrations: Disposable[] = [
    client.tools.bash.handle(async (input, ctx) => {
      const { processes } = held(ctx.sessionId, true);
      try {
        return await runBash(input, {
          workdir,
          spawn: (argv, spawnOptions) => processes.spawn(argv, spawnOptions),
          signal: ctx.signal,
          graceMs,
          clock: options.clock,
          // The call's own trace context, under the command's own `env` (which wins).
          env: envFor(
            ctx.sessionId,
            ctx.trace ? { ...traceEnvironment(ctx.trace), ...input.env } : input.env,
          ),
          onOutput: (stream, text) => ctx.progress({ output: { stream, text } }),
        });
      } catch (error) {
        if (error instanceof BashTimeoutError) {
          // Outcome `timed_out` (the contract's BashInput), with the output so far and
          // `timeout(1)`'s exit code.
          throw new ToolTimeoutError(error.message, {
            result: {
              ...error.partial,
              stderr: `${error.partial.stderr}${error.message}\n`,
              exit_code: 124,
            },
          });
        }
        if (error instanceof PathOutsideWorkdirError) {
          throw new ToolError(error.message);
        }
        throw error;
      }
    }),
    client.tools.read.handle((input, ctx) =>
      asToolError(readTool(input, workdir, limits, ctx.signal))
    ),
    client.tools.write.handle((input) => asToolError(writeTool(input, workdir))),
    client.tools.edit.handle((input) => asToolError(editTool(input, workdir, limits))),
    client.tools.glob.handle((input, ctx) =>
      asToolError(globTool(input, workdir, limits, ctx.signal))
    ),
    client.tools.grep.handle((input, ctx) =>
      asToolError(grepTool(input, workdir, limits, ctx.signal))
    ),
    serve("process.start", true, (params, { table }) => table.start(withTraceEnv(params))),
    serve("process.write", false, (params, { table }) => table.write(params)),
    serve("process.read", false, (params, { table }, ctx) => table.read(params, ctx.signal)),
    serve("process.signal", false, (params, { table }) => table.signal(params)),
    serve("process.wait", false, (params, { table }, ctx) => table.wait(params, ctx.signal)),
    serve("process.list", false, (_params, { table }) => table.list()),
    serve(
      "file.upload",
      true,
      (params, machine) =>
        sessionWork(machine, uploadFile(params, workdir, { uploads, onSweepError })),
    ),
    // Its hash reads the whole file: the session's end (or the connection's) stops that.
    serve(
      "file.download",
      false,
      (params, machine, ctx) =>
        stoppableSessionWork(
          machine,
          ctx.signal,
          (signal) => downloadFile(params, workdir, limits, signal),
        ),
    ),
    // Its fetch and unpacking: the session's end (or the request's cancel, the connection's)
    // stops them, and nothing is installed.
    serve(
      "skill.install",
      true,
      (params, machine, ctx) =>
        stoppableSessionWork(
          machine,
          ctx.signal,
          (signal) =>
            installSkill(
              params,
              options.skillsRoot ?? join(workdir.root, ".bma", "skills"),
              fetchFn,
              { workdir, limits, signal },
            ),
        ),
    ),
    serve(
      "workspace.backup",
      true,
      (params, machine) =>
        sessionWork(
          machine,
          backupWorkspace(params, workdir, fetchFn, limits, machine.ending.signal),
        ),
    ),
    serve("git.credentials", true, (params) => git.store(params)),
  ];
  if (options.pty && options.pty.available()) {
    registrations.push(serveTerminals(client, {
      pty: options.pty,
      graceMs,
      clock: options.clock,
      maxOpen: limits.terminalsPerSession,
      maxOpenPerExecutor: limits.terminals,
      resolveCwd: (path) =>
        workdir.resolve(path).then(async (cwd) => {
          await existingDirectory(cwd);
          return cwd;
        }, (error) => {
          throw error instanceof PathOutsideWorkdirError
            ? new ForbiddenError("path outside the workdir", { reason: "path_outside_workdir" })
            : answerForSystemError(error);
        }),
      // The child environment bash gets, the terminal's own variables through the same policy.
      env: (sessionId, extra) => envFor(sessionId, extra, true),
      // A process of the session like any other: in a cgroup leaf of its own where there is
      // one (so a `setsid` descendant is still found), ended with the session.
      place: (sessionId, argv, launch, { cwd, env }) =>
        held(sessionId, true).processes.adopt((cgroup) => {
          if (!cgroup) return launch(argv);
          // The wrapper's shell would start whatever it is given: the program is looked up
          // first, so that a missing one is still refused as spawn_failed.
          const program = resolveProgram(argv[0], env, cwd);
          return launch(inCgroup(cgroup, [program, ...argv.slice(1)]), cgroupScope(cgroup));
        }),
    }));
  }
  if (options.mcpServers && Object.keys(options.mcpServers).length > 0) {
    const relay = new McpRelay(options.mcpServers, {
      message: (params) => {
        try {
          client.notify("mcp.message", params);
        } catch (error) {
          // Too large for a frame: the relay closes the channel. Not connected: dropped (the
          // channel ended with the connection).
          if (error instanceof FrameTooLargeError) throw error;
        }
      },
      congested: () => client.congested,
      closed: (params) => void client.call("mcp.close", params).catch(() => {}),
      unavailable: (sessionId) => {
        try {
          client.sessionStatus(sessionId, "error", "mcp_unavailable");
        } catch { /* reported again on the next open */ }
      },
      workdir: () => workdir.resolve("."),
      spawn: (sessionId, argv, { cwd, env }) =>
        held(sessionId, true).processes.spawn(argv, {
          cwd,
          env: envFor(sessionId, env),
          stdin: true,
          stderr: "ignore",
        }),
    }, {
      graceMs,
      maxLineBytes: options.mcpMaxLineBytes,
      maxChannelsPerSession: limits.mcpChannelsPerSession,
      maxChannels: limits.mcpChannels,
      logger,
    });
    mcp = relay;
    let connected = client.state === "connected";
    registrations.push(
      // The harness ends every channel with the connection (`disconnected`): their servers go.
      client.onStateChange((state) => {
        if (connected && state !== "connected") void relay.closeAll();
        connected = state === "connected";
      }),
      serve("mcp.open", true, (params) => relay.open(params)),
      client.onNotification("mcp.message", (params) => relay.deliver(params)),
      client.onRequest("mcp.close", (params) => relay.close(params)),
    );
  }
  /** Withdraws everything once; resolves when the machine's processes are gone. */
  let withdrawn: Promise<void> | undefined;
  const withdraw = (): Promise<void> => {
    if (withdrawn) return withdrawn;
    for (const registration of registrations) registration.dispose();
    processOutput.dispose();
    const machinesLeft = [...machines.values()];
    machines.clear();
    withdrawn = Promise.all([
      ...machinesLeft.map((machine) => {
        const sessionId = machine.session.id;
        return Promise.all([mcp?.closeSession(sessionId), machine.processes.end(graceMs)]);
      }),
      firstSweep,
    ]).finally(() => git.close()).then(() => {});
    return withdrawn;
  };
  return {
    dispose: () => {
      withdraw().catch((error) =>
        logger.debug("ending the machine's processes failed", { error: String(error) })
      );
    },
    [Symbol.asyncDispose]: withdraw,
  };
}
