/**
 * `bma-harness serve`: the self-hosted harness as a service. It needs no terminal (standard
 * input is never read) and runs until SIGTERM or SIGINT. On one port: the executors' WebSocket
 * endpoint, the token endpoints, the brain HTTP API (`/v1/harness/…`, behind `BMA_BRAIN_TOKEN`),
 * `/metrics` (behind `BMA_METRICS_TOKEN`), `GET /healthz` and `GET /readyz`; the inspector with
 * `--ui`, on a port of its own.
 *
 * The first signal drains: `/readyz` turns 503, new executors and sessions are refused, the
 * executors are closed with 1001 (they reconnect, through the same address, to the next
 * harness), the store lets go of its claim with every acknowledgement written, and the process
 * exits 0 (1 if that took longer than `--shutdown-grace`). A second signal exits at once.
 *
 * What it runs with comes from `serve-config.ts`; the options it makes of it are the edge
 * harness's (`harnessOptionsFromVariables` of `http/env-options.ts`, which the edge's
 * `harnessOptionsFromEnv` reads too), so both hosts read one description.
 *
 * @module
 */
import { accessSync, constants, existsSync, readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { hostname as machineName } from "node:os";
import { parseArgs } from "node:util";
import { Hono } from "hono";
import { argvErrorLine, negativeValues, repeatedFlagLine } from "./argv.ts";
import { jsonLineLogger, textLineLogger } from "./line-logger.ts";
import { isLoopbackHost } from "../transport/dial-url.ts";
import {
  readServeConfig,
  SERVE_FLAGS,
  type ServeConfig,
  ServeConfigError,
  type StoreSpec,
  strictUtf8Text,
} from "./serve-config.ts";
import { SERVE_USAGE } from "./harness-usage.ts";
import { AgentPlatform } from "../agent/mod.ts";
import type { Logger } from "../protocol/logger.ts";
import {
  brainApi,
  Harness,
  HarnessClosedError,
  type HarnessServer,
  type HarnessStore,
  inspector,
  openPostgresStore,
  openSqliteStore,
  randomInspectorToken,
  serveInspector,
  StoreHeldError,
  StoreLockedError,
} from "../node.ts";
import { harnessOptionsFromVariables, HarnessVariableError } from "../http/env-options.ts";
import { HmacJwt } from "../http/token-endpoint/jwt.ts";
import { describeHolder } from "../harness/store/claim.ts";
import { SocketPathTakenError } from "../transport/stale-socket.node.ts";
import { SocketPathTooLongError } from "../transport/socket-path.node.ts";
import { healthRoutes } from "../http/health/health.ts";

/** Where `serve` writes and what it reads: the process's, or a test's. */
export interface ServeIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/** The brain API's place on the serve port. */
export const BRAIN_API_BASE = "/v1/harness";

/** The settings' files are text: read strictly, so that a binary secret is refused, not mangled. */
function readUtf8File(path: string): string {
  return strictUtf8Text(readFileSync(path));
}

/** Runs `bma-harness serve` with `argv` (the words after `serve`); resolves to the exit code. */
export async function serveMain(argv: readonly string[], io: ServeIo): Promise<number> {
  const usage = (message: string) => {
    io.stderr(`bma-harness serve: ${message} (see bma-harness serve --help)\n`);
    return 2;
  };
  let flags;
  try {
    let tokens;
    ({ values: flags, tokens } = parseArgs({
      args: negativeValues(argv, SERVE_FLAGS),
      strict: true,
      allowPositionals: false,
      options: SERVE_FLAGS,
      tokens: true,
    }));
    const repeated = repeatedFlagLine(tokens, SERVE_FLAGS);
    if (repeated) return usage(repeated);
  } catch (error) {
    return usage(argvErrorLine(error, argv));
  }
  if (flags.help) {
    io.stdout(SERVE_USAGE);
    return 0;
  }
  let config: ServeConfig;
  try {
    config = readServeConfig(flags, io.env, readUtf8File);
  } catch (error) {
    if (error instanceof ServeConfigError) return usage(error.message);
    throw error;
  }
  const authenticated = (config.env.BMA_JWT_SECRET ?? "") !== "";
  if (!authenticated && !config.insecureNoAuth && !isLoopbackHost(config.host)) {
    return usage(
      `serving on ${config.host} (beyond loopback) needs authentication: a JWT secret ` +
        "(--jwt-secret-file or BMA_JWT_SECRET) and credentials, or --insecure-no-auth",
    );
  }
  const write = (text: string) => io.stdout(text);
  const logger = config.logFormat === "json"
    ? jsonLineLogger({ write })
    : textLineLogger({ write });

  let options;
  try {
    options = harnessOptionsFromVariables({
      ...config.env,
      ...(authenticated ? {} : { BMA_INSECURE_NO_AUTH: "true" }),
    });
  } catch (error) {
    if (!(error instanceof HarnessVariableError)) throw error;
    // Named as it was given: a credentials file by its path, not as the variable it became.
    return usage(`${config.secretSources[error.variable] ?? error.variable} ${error.problem}`);
  }
  const { brainApi: brainOptions, ...harnessOptions } = options;
  if (authenticated) {
    // The token endpoint's own check, run now: a weak secret would only fail the first token.
    try {
      await HmacJwt.create(config.env.BMA_JWT_SECRET!);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      const source = config.secretSources.BMA_JWT_SECRET ?? "BMA_JWT_SECRET";
      return usage(
        `${source} is too weak: ${error.message} (a random one: openssl rand -base64 48)`,
      );
    }
  }

  if (config.storePasswordInFlag) {
    logger.warn(
      "the store's password is in --store, which every user of this machine reads in ps: " +
        "give the URL in BMA_HARNESS_STORE or the config file, or the password in PGPASSWORD or PGPASSFILE",
    );
  }

  let store: HarnessStore | undefined;
  // A database that takes connections but does not answer (at max_connections, the client tries
  // again for about 30 s) would otherwise be silence: say what the start waits for.
  const openedAt = Date.now();
  const waiting = setInterval(() => {
    logger.warn(
      `still opening the store (${describeStore(config.store)}): no answer for ` +
        `${Math.round((Date.now() - openedAt) / 1000)} s`,
    );
  }, STORE_WAIT_NOTICE_MS);
  try {
    store = await openStore(config.store);
  } catch (error) {
    if (config.store.kind === "sqlite") {
      const path = config.store.path;
      return usage(
        `cannot open the SQLite store at ${path}: ${sqliteOpenProblem(path) ?? message(error)}`,
      );
    }
    return usage(`cannot open the store (${describeStore(config.store)}): ${message(error)}`);
  } finally {
    clearInterval(waiting);
  }
  logger.info(
    `bma-harness serve starting: store ${describeStore(config.store)}` +
      (config.standby ? ", standby" : ""),
    { pid: process.pid, host: machineName() },
  );
  if (!authenticated) {
    logger.warn("no JWT secret: executors connect without a token (allowed on loopback only)");
  } else if (harnessOptions.tokens && !harnessOptions.tokens.connectUrl) {
    // Behind a proxy the request's address is the upstream's (`ws://bma_harness/…`), plain HTTP.
    logger.info(
      "token endpoint: executors are sent to the address each token request came to; " +
        "behind a proxy or TLS, set --connect-url (BMA_CONNECT_URL)",
    );
  }

  let harness: Harness;
  try {
    harness = new Harness({
      ...harnessOptions,
      logger,
      ...(store ? { store } : {}),
      standby: config.standby,
      takeover: config.takeover,
      ...(config.storeRenewMs !== undefined ? { storeRenewMs: config.storeRenewMs } : {}),
      ...(config.maxStoredArtifactBytes !== undefined
        ? { maxStoredArtifactBytes: config.maxStoredArtifactBytes }
        : {}),
      // The page starts agent turns and answers their approvals.
      ...(config.ui ? { agent: new AgentPlatform() } : {}),
    });
  } catch (error) {
    await store?.close?.();
    if (error instanceof StoreHeldError || error instanceof StoreLockedError) {
      io.stderr(`bma-harness serve: ${heldStoreLine(error)}\n`);
      return 1;
    }
    // The claim is the store's first write: a store it cannot write is named, with why.
    if (config.store.kind === "sqlite") {
      const path = config.store.path;
      return usage(
        `cannot write the SQLite store at ${path}: ${sqliteOpenProblem(path) ?? message(error)}` +
          " (SQLite writes the file and its -wal and -shm files beside it)",
      );
    }
    return usage(`cannot use the store (${describeStore(config.store)}): ${message(error)}`);
  }

  // Each face judges its own requests (the brain API's bearer check covers its paths only).
  const app = new Hono();
  app.route("/", healthRoutes(harness));
  if (brainOptions) {
    const brain = brainApi(harness, { ...brainOptions, basePath: BRAIN_API_BASE, logger });
    // A standby (or a harness going away) sends brains on with 503: `brainApi` says so.
    app.all(`${BRAIN_API_BASE}/*`, (c) => brain.fetch(c.req.raw));
  }
  app.all("*", (c) => harness.fetch(c.req.raw));

  const servers: HarnessServer[] = [];
  // Which address failed, as the error line names it: the port, or the Unix socket.
  let listeningOn: "port" | "unix" = "port";
  try {
    servers.push(
      await harness.serve({ hostname: config.host, port: config.port, fetch: app.fetch }),
    );
    listeningOn = "unix";
    if (config.unix) servers.push(await harness.serveUnix(config.unix, { fetch: app.fetch }));
  } catch (error) {
    await harness.close();
    if (error instanceof SocketPathTakenError || error instanceof SocketPathTooLongError) {
      return usage(error.message);
    }
    const code = (error as { code?: unknown } | undefined)?.code;
    if (listeningOn === "unix" && typeof code === "string") {
      const dir = dirname(config.unix!);
      // Bun reports a missing directory as EACCES: the directory, not the code, is the cause.
      const why = existsSync(dir) ? code : `the directory ${dir} does not exist (create it first)`;
      return usage(`cannot listen on the Unix socket ${config.unix}: ${why}`);
    }
    if (code === "EADDRINUSE") {
      return usage(`port ${config.port} on ${config.host} is in use`);
    }
    if (code === "EACCES" || code === "EADDRNOTAVAIL") {
      return usage(`cannot listen on ${config.host}:${config.port}: ${code}`);
    }
    io.stderr(`bma-harness serve: cannot listen: ${message(error)}\n`);
    return 1;
  }
  for (const server of servers) logger.info(`listening ${server.httpUrl ?? server.url}`);

  let closeInspector: (() => Promise<void>) | undefined;
  if (config.ui) {
    const page = inspector(harness, {
      token: randomInspectorToken(),
      loginHint: "Restart bma-harness serve --ui for a new login link.",
    });
    const web = await serveInspector(page, { port: config.uiPort });
    closeInspector = async () => {
      page.close();
      await web.close();
    };
    // The link logs in once: printed for the operator, not kept in the log's fields.
    io.stderr(`inspector ${await page.loginUrl(web.url)}\n`);
  }

  let failedStart: ((error: unknown) => void) | undefined;
  harness.ready.then(
    () => logger.info("serving: the store is held"),
    (error) => failedStart?.(error),
  );

  return await new Promise<number>((resolve) => {
    // A store that could not be claimed or read back (held, locked, unreachable): the harness
    // closed itself, serving nothing; the process says so and exits.
    failedStart = (error) => {
      if (error instanceof HarnessClosedError) return;
      // The harness logged why; the last line says it as the CLI's flags do.
      if (error instanceof StoreHeldError || error instanceof StoreLockedError) {
        io.stderr(`bma-harness serve: ${heldStoreLine(error)}\n`);
      }
      void (async () => {
        await harness.close();
        await closeInspector?.();
        await store?.close?.();
        resolve(1);
      })();
    };
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      if (++signals > 1) {
        logger.warn(`${signal} again: exiting at once`);
        resolve(130);
        return;
      }
      logger.info(`${signal}: draining (a second signal exits at once)`, {
        grace_ms: config.shutdownGraceMs,
      });
      const timer = setTimeout(() => {
        logger.error("the drain outlasted --shutdown-grace: exiting");
        resolve(1);
      }, config.shutdownGraceMs);
      void (async () => {
        await harness.close();
        await closeInspector?.();
        await store?.close?.();
        clearTimeout(timer);
        logger.info("drained: exiting");
        resolve(0);
      })();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    // A job of a shell that exits gets SIGHUP (deploy.md runs it with `&`): it drains too.
    process.on("SIGHUP", onSignal);
  });
}

/** How often a start that waits for its store says so. */
const STORE_WAIT_NOTICE_MS = 5_000;

async function openStore(spec: StoreSpec): Promise<HarnessStore | undefined> {
  switch (spec.kind) {
    case "memory":
      return undefined;
    case "sqlite":
      return await openSqliteStore(spec.path);
    case "postgres":
      return await openPostgresStore(spec.url, spec.table ? { table: spec.table } : {});
  }
}

/** A store as a log line names it (a URL without its password). */
function describeStore(spec: StoreSpec): string {
  switch (spec.kind) {
    case "memory":
      return "memory (nothing survives a restart)";
    case "sqlite":
      return `sqlite ${spec.path}`;
    case "postgres": {
      const url = new URL(spec.url);
      return `postgres ${url.hostname || url.searchParams.get("host") || "local"}` +
        `${url.port ? `:${url.port}` : ""}${url.pathname}` +
        (spec.table ? ` table ${spec.table}` : "");
    }
  }
}

/**
 * A store another harness holds, as the CLI says it: with its flags (`--standby`, `--takeover`),
 * where the library names its options (`takeover: true`).
 */
function heldStoreLine(error: StoreHeldError | StoreLockedError): string {
  if (error instanceof StoreLockedError) {
    return `${error.message} (or start this one with --standby)`;
  }
  return `the harness store is held by another harness (${
    describeHolder(error.holder, Date.now())
  }): stop that one, start this one with --standby to wait for it, or with --takeover to ` +
    "take the store over (that one is fenced)";
}

/**
 * Why the SQLite file at `path` cannot be opened, read from the file system (the drivers say
 * only "unable to open", with a number); undefined when the file system shows no reason.
 */
function sqliteOpenProblem(path: string): string | undefined {
  const problem = (code: unknown, what: string): string | undefined =>
    code === "EACCES" || code === "EPERM"
      ? `permission denied on ${what}`
      : code === "ENOTDIR"
      ? `a part of ${what} is not a directory`
      : undefined;
  try {
    if (statSync(path).isDirectory()) return "it is a directory, not a database file";
    accessSync(path, constants.R_OK | constants.W_OK);
    return undefined;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== "ENOENT") return problem(code, path);
  }
  // No file yet: SQLite creates it, in a directory that must exist and be writable.
  const dir = dirname(path);
  try {
    if (!statSync(dir).isDirectory()) return `${dir} is not a directory`;
    accessSync(dir, constants.W_OK);
    return undefined;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === "ENOENT") return `the directory ${dir} does not exist (create it first)`;
    return problem(code, `the directory ${dir}`);
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export type { Logger };
