#!/usr/bin/env node
/**
 * `bma-harness`: a local harness to drive executors by hand (or by script on stdin); and
 * `bma-harness serve`, the harness as a service (`harness-serve.node.ts`).
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
 *
 * This file reads the flags, starts the servers (and the inspector with --ui), feeds standard
 * input's lines to the commands and handles the signals. The rest has a module each: the commands
 * (`harness-commands.node.ts`), reading a command line (`harness-command-line.ts`, over
 * `shell-words.ts`), the standard streams and `attach` (`harness-stdio.node.ts`), errors and
 * schemas as text (`harness-describe.ts`) and the help text (`harness-usage.ts`).
 */
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { argOptions, argvErrorLine, negativeValues, repeatedFlagLine, shownValue } from "./argv.ts";
import { CONTRACT_VERSION } from "../protocol/generated/contract.ts";
import { SDK_VERSION as VERSION } from "../executor/version.ts";
// The inspector page's agent turns and approvals (--ui). The application imports agent/ and hands
// it to the harness through its extension seam (the `agent` option), so harness/ never imports it.
import { AgentPlatform } from "../agent/harness/platform.ts";
import {
  Harness,
  type HarnessServer,
  inspector,
  randomInspectorToken,
  serveInspector,
} from "../harness/node.ts";
import { SocketPathTakenError } from "../transport/stale-socket.node.ts";
import { SocketPathTooLongError } from "../transport/socket-path.node.ts";
import { Cli } from "./harness-commands.node.ts";
import { Input, note, writeOut } from "./harness-stdio.node.ts";
import { USAGE } from "./harness-usage.ts";
import { serveMain } from "./harness-serve.node.ts";
import { outliveOutputReaders } from "./output-streams.node.ts";

const OPTIONS = argOptions({
  values: ["host", "port", "unix", "heartbeat-ms", "ui-port"],
  switches: ["insecure-no-auth", "ui", "help", "version"],
});

async function main(): Promise<number> {
  let values;
  try {
    let tokens;
    ({ values, tokens } = parseArgs({
      args: negativeValues(process.argv.slice(2), OPTIONS),
      strict: true,
      options: OPTIONS,
      tokens: true,
    }));
    const repeated = repeatedFlagLine(tokens, OPTIONS);
    if (repeated) throw new Error(repeated);
  } catch (error) {
    process.stderr.write(
      `bma-harness: ${argvErrorLine(error, process.argv.slice(2))} (see --help)\n`,
    );
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
  const port = values.port === undefined ? 7700 : digits(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(
      `bma-harness: --port takes 0-65535, not ${shownValue(values.port!)} (see --help)\n`,
    );
    return 2;
  }
  const heartbeat = values["heartbeat-ms"];
  const heartbeatMs = heartbeat === undefined ? undefined : digits(heartbeat);
  if (heartbeatMs !== undefined && (!Number.isSafeInteger(heartbeatMs) || heartbeatMs <= 0)) {
    const shown = shownValue(heartbeat!);
    process.stderr.write(
      `bma-harness: --heartbeat-ms must be a positive integer (milliseconds), not ${shown} (see --help)\n`,
    );
    return 2;
  }
  const withUi = values.ui === true || values["ui-port"] !== undefined;
  const uiPort = values["ui-port"] === undefined ? 0 : digits(values["ui-port"]);
  if (!Number.isInteger(uiPort) || uiPort < 0 || uiPort > 65535) {
    process.stderr.write(
      `bma-harness: --ui-port takes 0-65535, not ${shownValue(values["ui-port"]!)} (see --help)\n`,
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
  // The --unix path once the port is served: what failed, if anything fails after.
  let unixPath: string | undefined;
  try {
    servers.push(await harness.serve({ hostname: host, port }));
    unixPath = values.unix;
    if (values.unix) servers.push(await harness.serveUnix(values.unix));
  } catch (error) {
    process.stderr.write(`bma-harness: ${listenFailure(error, unixPath)}\n`);
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
      const close = async () => {
        page.close();
        await web.close();
      };
      servers.push({ url: web.url, httpUrl: web.url, close, [Symbol.asyncDispose]: close });
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
  const onSignal = (signal: "SIGINT" | "SIGTERM" | "SIGHUP") => {
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
  // The terminal went away: quit as SIGTERM does.
  process.on("SIGHUP", () => onSignal("SIGHUP"));

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

/** A number written in digits, else NaN (`Number` alone takes `1e3`, `0x10` and `" 7 "`). */
function digits(value: string): number {
  return /^\d+$/.test(value) ? Number(value) : NaN;
}

outliveOutputReaders();
const entry = process.argv[2] === "serve"
  ? serveMain(process.argv.slice(3), {
    env: process.env,
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
  })
  : main();

entry.then((code) => process.exit(code), (error) => {
  process.stderr.write(`bma-harness: ${(error as Error).message}\n`);
  process.exit(1);
});

/**
 * The line for a server that could not listen: on the Unix socket `path` when given (`cannot
 * listen on PATH: why`, as for a file in the way), else on the port.
 */
function listenFailure(error: unknown, path: string | undefined): string {
  // A file in the way, a path too long: their messages name the path already.
  if (error instanceof SocketPathTakenError || error instanceof SocketPathTooLongError) {
    return error.message;
  }
  if (path === undefined) return `cannot listen: ${(error as Error).message}`;
  const dir = dirname(path);
  // Node and Bun report a missing directory as EACCES: the directory, not the code, is the cause.
  if (!existsSync(dir)) return `cannot listen on ${path}: the directory ${dir} does not exist`;
  const code = (error as { code?: unknown } | undefined)?.code;
  return `cannot listen on ${path}: ${typeof code === "string" ? code : (error as Error).message}`;
}
