/**
 * `bma-executor`: an executor on this machine, as one command (and as one compiled file), run by
 * the entry of the runtime it runs on (`executor.node.ts`, `executor.deno.ts`,
 * `executor.bun.ts`) with that runtime's record: its dialer, its server and its PTYs.
 *
 *   bma-executor --harness ws://127.0.0.1:7700 --workdir ./work
 *   BMA_BASE_URL=… BMA_ENVIRONMENT_ID=… bma-executor --credential-file - < key
 *   BMA_BASE_URL=… BMA_ENVIRONMENT_KEY=… BMA_ENVIRONMENT_ID=… bma-executor
 *
 * Logs go to stderr (the SDK's own lines, through its injected logger; this file adds only what
 * the SDK cannot know: signals, a work directory it cannot use, which flag named a URL that is no
 * harness), stdout carries the lines for scripts (`registered <id>`, again for each new id, and
 * `stopped, exit code <n>`); secrets are never printed. SIGTERM/SIGINT at any point exit 0: a
 * registered executor drains (no new sessions, current work finishes within --drain-ms), a
 * second signal stops at once (running calls canceled, their processes killed), a third exits
 * without waiting.
 */
import { argOptions, argvErrorLine, negativeValues, repeatedFlagLine, shownValue } from "./argv.ts";
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { hostname } from "node:os";
import { arch, platform } from "node:process";
import { parseArgs } from "node:util";
import { ExecutorClient, type ExecutorClientOptions } from "../executor/mod.ts";
import { serveMachine } from "../executor/machine/serve.node.ts";
import { readMcpConfig } from "../executor/machine/mcp.node.ts";
import { checkWorkdir, WorkdirError } from "../executor/machine/workdir-check.node.ts";
import {
  ALWAYS_WITHHELD,
  type ChildEnvironmentOptions,
} from "../executor/machine/child-env.node.ts";
import { type Logger, redact, redactUrls } from "../protocol/logger.ts";
import { CONTRACT_VERSION } from "../protocol/generated/contract.ts";
import type { ExecutorClosedInfo } from "../executor/connection-loop.ts";
import { SDK_VERSION as VERSION } from "../executor/version.ts";
import { concatBytes } from "../transport/bytes.ts";
import { localSocketPath } from "../transport/server.ts";
import { assertSocketPathFits, socketUrl } from "../transport/socket-path.node.ts";
import { NotAHarnessError } from "../executor/errors.ts";
import { executorOptions, type Runtime } from "../runtime/runtime.ts";
import { outliveOutputReaders } from "./output-streams.node.ts";

const USAGE =
  `bma-executor ${VERSION} — an executor of the BMA Executor Protocol (bma.executor.v1.1)

Usage: bma-executor [options]

Connect to a harness with --harness (or BMA_HARNESS_URL), or to a BMA deployment with
BMA_BASE_URL plus BMA_ENVIRONMENT_KEY and BMA_ENVIRONMENT_ID (or BMA_MACHINE_TOKEN and
BMA_MACHINE_ID). The credential may come from a file instead (--credential-file, or
BMA_ENVIRONMENT_KEY_FILE / BMA_MACHINE_TOKEN_FILE): a credential in this process's environment
can be read from /proc/<pid>/environ by any process of the same user. A local harness takes no
credential: --credential-file with --harness is an error, and a credential in the environment
is not used (a warning names it).

Processes the executor starts get only PATH HOME USER LOGNAME SHELL LANG LANGUAGE LC_* TERM TZ
TMPDIR of its environment (plus --env-keep), never its credential.

Options:
  --harness <url>        ws://, wss:// or unix:///path.sock of a local harness
  --workdir <dir>        directory the tools and processes are confined to (default: .);
                         it must exist: a missing one is refused at start (create it with
                         mkdir -p), never created
  --name <name>          executor name (default: the host name)
  --max-sessions <n>     sessions held at once
  --max-running-tool-calls <n>
                         tool calls running at once (default 256); later ones wait their turn
  --mcp-config <file>    an mcp.json ("mcpServers") of MCP servers for the MCP channel
  --grace-ms <n>         SIGTERM-to-SIGKILL grace for tool processes (default 2000)
  --credential-file <f>  read the credential from file f ("-": standard input); a machine token
                         when BMA_MACHINE_ID is set, else an environment key (BMA_BASE_URL only)
  --env-keep <name>      pass this variable (or NAME* prefix; "*" for all) to processes too
  --env-drop <name>      never pass this variable (or NAME* prefix), from any source
  --env-set <NAME=value> set this variable in every process
  --env-clear            pass none of the default variables, only --env-keep ones
  --drain-ms <n>         on SIGTERM/SIGINT, how long current work may finish (default 30000)
  --log-level <level>    debug | info | warn | error (default info)
  --log-format <format>  pretty | json (default pretty)
  --help                 this text
  --version              the version (and the contract's)

Output: logs on stderr (--log-format pretty: "<time> <LEVEL> <message> {fields}", or one JSON
object per line), never a secret nor a tool's input: "connection attempt failed: retrying" with
the url, the cause (ECONNREFUSED, ...) and retry_in_ms; "registered" with the executor id
("re-registered" when a reconnect resumed it, "registered anew: ..." with previous_executor_id
when the harness gave a new id); "tool call ended" per call with its id, tool, outcome and
duration_ms ("tool call started" at debug); "stopped" with the reason. Stdout has the lines for scripts: "registered <executor_id>"
(again with the new id whenever a registration gives one: a harness restarted without its
store) and, last, "stopped, exit code <n>".

Signals: SIGTERM, SIGINT (Ctrl-C) or SIGHUP stops, at any point. Registered, it drains first:
no new sessions, current work may finish within --drain-ms. A second signal stops now (running
calls canceled, their processes killed); a third exits without waiting.

Each flag is given once (a value flag given twice is an error); a number is a positive integer
written in digits.

Exit codes: 0 stopped by a signal; 1 stopped for another reason (the credential or the
registration refused, the harness ended the connection for good); 2 a bad flag or environment
(a --workdir that does not exist, a --harness URL that answers HTTP 404: no harness there);
130 a third signal.
`;

/** What connects to a BMA deployment, and goes unused with a local harness (names only). */
const IGNORED_WITH_HARNESS = [
  "BMA_BASE_URL",
  "BMA_ENVIRONMENT_KEY",
  "BMA_ENVIRONMENT_KEY_FILE",
  "BMA_MACHINE_TOKEN",
  "BMA_MACHINE_TOKEN_FILE",
] as const;

/** A usage error: printed as one line, exit code 2. */
class UsageError extends Error {}

const LEVELS = ["debug", "info", "warn", "error"] as const;
type Level = typeof LEVELS[number];

function stderrLogger(level: Level, format: "pretty" | "json"): Logger {
  const threshold = LEVELS.indexOf(level);
  const write = (at: Level, message: string, fields?: Record<string, unknown>) => {
    if (LEVELS.indexOf(at) < threshold) return;
    const safe = fields ? redact(fields) : undefined;
    message = redactUrls(message);
    const time = new Date().toISOString();
    if (format === "json") {
      process.stderr.write(`${JSON.stringify({ time, level: at, message, ...safe })}\n`);
    } else {
      const extra = safe && Object.keys(safe).length ? ` ${JSON.stringify(safe)}` : "";
      process.stderr.write(`${time} ${at.toUpperCase().padEnd(5)} ${message}${extra}\n`);
    }
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
  };
}

function parsesAsUrl(text: string): boolean {
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}

function positiveInt(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  // Digits only: Number() would also take "1e3", "0x10" and " 7 ", and round a long one.
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n <= 0) {
    throw new UsageError(`--${name} must be a positive integer, not ${shownValue(value)}`);
  }
  return n;
}

interface Config {
  options: ExecutorClientOptions;
  environment: ChildEnvironmentOptions;
  mcpConfig: string | undefined;
  workdir: string;
  graceMs: number;
  drainMs: number;
  logger: Logger;
  /** Where the harness URL came from (`--harness`, `BMA_HARNESS_URL`), when it was given. */
  harnessFrom: string | undefined;
}

/** Reads a credential from a file ("-": standard input), without its trailing newline. */
async function readCredential(file: string, logger: Logger): Promise<string> {
  let text: string;
  logger.debug("reading the credential", { from: file === "-" ? "standard input" : file });
  try {
    if (file === "-") {
      const chunks: Uint8Array[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Uint8Array);
      text = new TextDecoder().decode(concatBytes(chunks));
    } else {
      text = await readFile(file, "utf8");
      if (platform !== "win32" && (statSync(file).mode & 0o077) !== 0) {
        logger.warn("the credential file can be read by other users: chmod 600 it", { file });
      }
    }
  } catch (error) {
    throw new UsageError(`cannot read the credential from ${file}: ${(error as Error).message}`);
  }
  const credential = text.trim();
  if (!credential) throw new UsageError(`${file === "-" ? "standard input" : file} is empty`);
  return credential;
}

function nameValue(flag: string, pairs: string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const eq = pair.indexOf("=");
    // Not quoted: the value of a variable is as likely a secret as not.
    if (eq < 0) throw new UsageError(`--${flag} takes NAME=value: a value has no "="`);
    if (eq === 0) throw new UsageError(`--${flag} takes NAME=value: a value has no NAME`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

const OPTIONS = argOptions({
  values: [
    "harness",
    "workdir",
    "name",
    "max-sessions",
    "max-running-tool-calls",
    "mcp-config",
    "grace-ms",
    "drain-ms",
    "log-level",
    "log-format",
    "credential-file",
  ],
  lists: ["env-keep", "env-drop", "env-set"],
  switches: ["env-clear", "help", "version"],
});

/**
 * The work directory, refused at start when the tools could not use it (`checkWorkdir`, the
 * rule `serveMachine` applies too, which also warns when it is read-only): missing (the message
 * says how to create it), not a directory, or not readable and searchable.
 */
function usableWorkdir(dir: string): string {
  try {
    checkWorkdir(dir);
  } catch (error) {
    if (error instanceof WorkdirError) throw new UsageError(`--workdir ${dir} ${error.problem}`);
    throw error;
  }
  return dir;
}

async function configure(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<Config | "help" | "version"> {
  let parsed;
  try {
    parsed = parseArgs({
      args: negativeValues(argv, OPTIONS),
      strict: true,
      allowPositionals: false,
      options: OPTIONS,
      tokens: true,
    });
  } catch (error) {
    throw new UsageError(argvErrorLine(error, argv));
  }
  const repeated = repeatedFlagLine(parsed.tokens, OPTIONS);
  if (repeated) throw new UsageError(repeated);
  const v = parsed.values;
  if (v.help) return "help";
  if (v.version) return "version";
  const level = (v["log-level"] ?? "info") as Level;
  if (!LEVELS.includes(level)) throw new UsageError(`--log-level is one of ${LEVELS.join(", ")}`);
  // `text` as bma-harness serve spells it.
  const given = v["log-format"] ?? "pretty";
  const format = given === "text" ? "pretty" : given;
  if (format !== "pretty" && format !== "json") {
    throw new UsageError("--log-format is pretty or json");
  }
  const logger = stderrLogger(level, format);
  const environment: ChildEnvironmentOptions = {
    keep: v["env-keep"],
    drop: v["env-drop"],
    set: nameValue("env-set", v["env-set"]),
    defaults: !v["env-clear"],
  };
  // Given empty, the flag would fall through to BMA_BASE_URL: a remote target, with the credential.
  if (v.harness === "") throw new UsageError("--harness is empty");
  const harnessUrl = v.harness ?? env.BMA_HARNESS_URL;
  const credential: Partial<Config["options"]> = {};
  let harnessFrom: string | undefined;
  if (harnessUrl) {
    const from = v.harness ? "--harness" : "BMA_HARNESS_URL";
    if (!/^(wss?:\/\/|unix:\/\/)/.test(harnessUrl)) {
      throw new UsageError(
        `${from} takes ws://, wss:// or unix:///path.sock, not ${shownValue(harnessUrl)}`,
      );
    }
    // A URL that does not parse would be dialed, and refused, forever.
    if (!harnessUrl.startsWith("unix:") && !parsesAsUrl(harnessUrl)) {
      throw new UsageError(`${from} is not a valid URL: ${shownValue(harnessUrl)}`);
    }
    credential.harnessUrl = harnessUrl;
    if (harnessUrl.startsWith("unix:")) {
      const path = localSocketPath(harnessUrl);
      // Dialed, it would be refused at every attempt.
      try {
        assertSocketPathFits(path, "connect to");
      } catch (error) {
        throw new UsageError(`${from}: ${(error as Error).message}`);
      }
      // unix://s/x.sock names s/x.sock from the working directory; its logs name it whole.
      credential.harnessUrl = socketUrl(path);
    }
    harnessFrom = from;
    // A local harness takes no credential: one given on the command line is a mistake (a file
    // never read, so never checked); one in the environment may be the shell's, so it is named.
    if (v["credential-file"] !== undefined) {
      throw new UsageError(
        `--credential-file is for BMA_BASE_URL (a BMA deployment); ${from} connects to a ` +
          "local harness, which takes no credential",
      );
    }
    const ignored = IGNORED_WITH_HARNESS.filter((name) => (env[name] ?? "") !== "");
    if (ignored.length > 0) {
      logger.warn(
        `${from} connects to a local harness, which takes no credential: ` +
          `${ignored.join(", ")} ${ignored.length === 1 ? "is" : "are"} not used`,
      );
    }
  } else {
    const baseUrl = env.BMA_BASE_URL;
    if (!baseUrl) {
      throw new UsageError(
        "no harness: give --harness, BMA_HARNESS_URL or BMA_BASE_URL with a credential",
      );
    }
    if (!/^https?:\/\//.test(baseUrl) || !parsesAsUrl(baseUrl)) {
      throw new UsageError(
        `BMA_BASE_URL takes an http:// or https:// URL, not ${shownValue(baseUrl)}`,
      );
    }
    credential.baseUrl = baseUrl;
    let machineToken = env.BMA_MACHINE_TOKEN;
    let environmentKey = env.BMA_ENVIRONMENT_KEY;
    if (env.BMA_MACHINE_TOKEN_FILE) {
      machineToken = await readCredential(env.BMA_MACHINE_TOKEN_FILE, logger);
    }
    if (env.BMA_ENVIRONMENT_KEY_FILE) {
      environmentKey = await readCredential(env.BMA_ENVIRONMENT_KEY_FILE, logger);
    }
    const file = v["credential-file"];
    if (file !== undefined) {
      const secret = await readCredential(file, logger);
      if (env.BMA_MACHINE_ID) machineToken = secret;
      else environmentKey = secret;
    }
    if (
      (machineToken === env.BMA_MACHINE_TOKEN && machineToken) ||
      (environmentKey === env.BMA_ENVIRONMENT_KEY && environmentKey)
    ) {
      logger.warn(
        "the credential is in this process's environment, readable in /proc/<pid>/environ by " +
          "any process of the same user: prefer --credential-file",
      );
    }
    if (machineToken) {
      if (!env.BMA_MACHINE_ID) throw new UsageError("BMA_MACHINE_TOKEN needs BMA_MACHINE_ID");
      credential.machineToken = machineToken;
      credential.machineId = env.BMA_MACHINE_ID;
    } else if (environmentKey) {
      if (!env.BMA_ENVIRONMENT_ID) {
        throw new UsageError("BMA_ENVIRONMENT_KEY needs BMA_ENVIRONMENT_ID");
      }
      credential.environmentKey = environmentKey;
      credential.environmentId = env.BMA_ENVIRONMENT_ID;
    } else {
      throw new UsageError(
        "missing credential: set BMA_ENVIRONMENT_KEY and BMA_ENVIRONMENT_ID, or BMA_MACHINE_TOKEN and BMA_MACHINE_ID (or --credential-file)",
      );
    }
  }
  if (v.name === "") throw new UsageError("--name is empty (the default is the host name)");
  return {
    options: {
      ...credential,
      executor: { name: v.name ?? hostname(), os: platform, arch, version: VERSION },
      maxSessions: positiveInt("max-sessions", v["max-sessions"]),
      maxRunningToolCalls: positiveInt("max-running-tool-calls", v["max-running-tool-calls"]),
      logger,
    },
    environment,
    mcpConfig: v["mcp-config"],
    workdir: usableWorkdir(v.workdir ?? "."),
    graceMs: positiveInt("grace-ms", v["grace-ms"]) ?? 2_000,
    drainMs: positiveInt("drain-ms", v["drain-ms"]) ?? 30_000,
    logger,
    harnessFrom,
  };
}

/** What a signal does: the first stops (draining when registered), a second stops now, a third exits. */
type SignalHandler = (signal: "SIGTERM" | "SIGINT" | "SIGHUP") => void;

async function main(runtime: Runtime): Promise<number> {
  outliveOutputReaders();
  // From the very start: a signal while the options (or a credential on stdin) are read ends the
  // process cleanly too.
  let onSignal: SignalHandler = () => {
    process.stdout.write("stopped, exit code 0\n");
    process.exit(0);
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  // A job of a shell that exits gets SIGHUP: it stops as SIGTERM stops it.
  process.on("SIGHUP", () => onSignal("SIGHUP"));
  let config: Awaited<ReturnType<typeof configure>>;
  try {
    config = await configure(process.argv.slice(2), process.env);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`bma-executor: ${redactUrls(error.message)} (see --help)\n`);
      return 2;
    }
    throw error;
  }
  if (config === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if (config === "version") {
    process.stdout.write(`bma-executor ${VERSION} (contract ${CONTRACT_VERSION})\n`);
    return 0;
  }
  const { logger, drainMs } = config;
  let mcpServers;
  try {
    mcpServers = config.mcpConfig ? await readMcpConfig(config.mcpConfig) : undefined;
  } catch (error) {
    process.stderr.write(
      `bma-executor: cannot read --mcp-config: ${(error as Error).message} (see --help)\n`,
    );
    return 2;
  }
  const client = new ExecutorClient(executorOptions(runtime, {
    ...config.options,
    ...(mcpServers ? { capabilities: { mcp: { servers: Object.keys(mcpServers) } } } : {}),
  }));
  // The credential is in memory now: nothing this process starts later inherits its variables
  // (the child environment policy withholds them anyway).
  for (const name of ALWAYS_WITHHELD) delete process.env[name];
  serveMachine(client, {
    workdir: config.workdir,
    graceMs: config.graceMs,
    mcpServers,
    environment: config.environment,
    // Terminals on this runtime's PTYs (Bun's own on Bun, compiled with `bun build --compile`).
    pty: runtime.pty,
  });
  let registered = false;
  let signals = 0;
  let stopping: Promise<ExecutorClosedInfo> | undefined;
  onSignal = (signal) => {
    signals++;
    if (signals === 1 && registered) {
      const sessions = client.sessions.map((session) => session.id);
      logger.info("draining: current work may finish, then the executor stops", {
        signal,
        drain_ms: drainMs,
        sessions,
        next: "another signal stops now",
      });
      stopping = client.stop({ graceMs: drainMs, reason: signal });
    } else if (signals === 1) {
      logger.info("stopping before registering", { signal, state: client.state });
      stopping = client.stop({ reason: signal });
    } else if (signals === 2) {
      logger.info("stopping now: running tool calls are canceled", {
        signal,
        next: "another signal exits without waiting",
      });
      void client.stop();
    } else {
      logger.warn("exiting without waiting", { signal });
      process.stdout.write("stopped, exit code 130\n");
      process.exit(130);
    }
  };
  // The SDK logs "registered" / "re-registered" / "registered anew" with its fields; stdout has
  // the id for scripts, again whenever a registration gives a new one (a harness that restarted
  // without its store).
  let shownId: string | undefined;
  const announce = (id: string | undefined) => {
    if (id === undefined || id === shownId) return;
    shownId = id;
    process.stdout.write(`registered ${id}\n`);
  };
  client.onStateChange((state) => {
    // The client takes the new id right after it says "connected": read it once that is done.
    if (state === "connected") queueMicrotask(() => announce(client.executorId));
  });
  try {
    const registration = await client.start();
    registered = true;
    announce(registration.executor_id);
  } catch (error) {
    // A refusal the connection loop ended on is logged by the SDK ("connection refused for
    // good", then "stopped"); only a start that never began is this file's to report.
    if (!stopping && client.state === "idle") {
      logger.error("could not start", { error: String(error) });
      process.stdout.write("stopped, exit code 1\n");
      return 1;
    }
  }
  const closed = await client.closed;
  if (closed.error instanceof NotAHarnessError) {
    // A --harness that is no harness (HTTP 404), as the SDK decided: said here too, beside the
    // SDK's log line, with where to look.
    const from = config.harnessFrom ? ` (check ${config.harnessFrom})` : "";
    process.stderr.write(`bma-executor: ${redactUrls(closed.error.message)}${from}\n`);
  } else if (closed.reason === "config" && closed.error) {
    process.stderr.write(`bma-executor: ${redactUrls(closed.error.message)}\n`);
  }
  const configError = closed.reason === "config" || closed.reason === "not_a_harness";
  const code = stopping ? 0 : configError ? 2 : 1;
  process.stdout.write(`stopped, exit code ${code}\n`);
  return code;
}

/** Runs `bma-executor` with `runtime`'s pieces on this process's arguments, then exits. */
export function runExecutorCli(runtime: Runtime): void {
  main(runtime).then((code) => process.exit(code), (error) => {
    process.stderr.write(`bma-executor: ${redactUrls((error as Error).message)}\n`);
    process.exit(1);
  });
}
