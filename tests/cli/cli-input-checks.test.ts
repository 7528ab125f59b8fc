/**
 * What the two CLIs refuse at start, and how they say it: the real `bma-harness`, `bma-harness
 * serve` and `bma-executor` as child processes. Numbers that are no positive integer, a connect
 * URL that is no ws:// URL, weak secrets, a store that cannot be opened, a file at the --unix
 * path, a flag given twice, a flag whose value is missing, a credential a local harness takes
 * no use of; and the executor's log when a reconnect registers it anew.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Harness } from "../../harness/node.ts";
import { harnessOptionsFromVariables, HarnessVariableError } from "../../http/env-options.ts";
import {
  EXECUTOR_CLI,
  type Finished,
  finished,
  ROOT,
  RUNTIME,
  spawnTs,
} from "../helpers/runtime-command.ts";
import { exited, jsonLogs, launchCli, sendSignal } from "./cli-helpers.ts";
import { DRIVERS, rawDatabase } from "../store/sqlite-fixture.ts";
import { refusedPort } from "../helpers/ports.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const dir = mkdtempSync(join(tmpdir(), "bma-cli-checks-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The cases of a list this runtime runs: all of them on Node; on Deno and Bun the first, since
 * the checks are the same code on every runtime and what differs is the process (its exit code,
 * its standard error), while each case costs a start of the CLI.
 */
function onThisRuntime<T>(cases: T[]): T[] {
  return RUNTIME === "node" ? cases : cases.slice(0, 1);
}

/** A secret no line may quote. */
const WEAK_SECRET = "abcSECRET";

function run(script: string, args: string[], env: Record<string, string> = {}): Promise<Finished> {
  return finished(
    spawnTs(script, args, { env: { PATH: process.env.PATH ?? "", HOME: dir, ...env } }),
  );
}

/** Exit 2 (unless `code` says otherwise), one line on stderr matching `expected`, no secret. */
function assertOneLine(run: Finished, expected: RegExp, what: string, code = 2): void {
  assert.equal(run.code, code, `${what}: ${run.stdout}${run.stderr}`);
  const lines = run.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `${what}: ${run.stderr}`);
  assert.match(lines[0], expected, what);
  assert.ok(!run.stderr.includes(WEAK_SECRET), `${what} printed a secret`);
  assert.ok(!/\n\s+at /.test(run.stderr), `${what}: a stack trace`);
}

describe("bma-harness serve: refused at start", { timeout: 240_000 }, () => {
  it("a number that is no positive integer, a connect URL that is no ws:// URL: flag or variable named, exit 2", async () => {
    const see = /\(see bma-harness serve --help\)$/;
    const cases: [string[], Record<string, string>, RegExp][] = onThisRuntime([
      [
        ["--heartbeat-ms", "-3"],
        {},
        /^bma-harness serve: --heartbeat-ms takes a positive integer, not "-3"/,
      ],
      [
        ["--max-frame-bytes", "abc"],
        {},
        /^bma-harness serve: --max-frame-bytes takes a positive integer/,
      ],
      [["--token-ttl-seconds", "0"], {}, /--token-ttl-seconds takes a positive integer, not "0"/],
      [["--request-timeout-ms", "1e3"], {}, /--request-timeout-ms takes a positive integer/],
      [
        [],
        { BMA_HARNESS_MAX_STORED_ARTIFACT_BYTES: "0" },
        /BMA_HARNESS_MAX_STORED_ARTIFACT_BYTES takes a positive integer \(bytes\), not "0"/,
      ],
      [
        ["--connect-url", "notaurl"],
        {},
        /--connect-url takes a ws:\/\/ or wss:\/\/ URL, not "notaurl"/,
      ],
      [["--connect-url", "https://h.example/x"], {}, /--connect-url takes a ws:\/\/ or wss:\/\//],
      [
        [],
        { BMA_HEARTBEAT_INTERVAL_MS: "-5" },
        /BMA_HEARTBEAT_INTERVAL_MS takes a positive integer, not "-5"/,
      ],
      [[], { BMA_MAX_FRAME_BYTES: "99999999999999999999" }, /BMA_MAX_FRAME_BYTES takes a positive/],
      [[], { BMA_CONNECT_URL: "notaurl" }, /BMA_CONNECT_URL takes a ws:\/\/ or wss:\/\/ URL/],
    ]);
    const runs = await Promise.all(
      cases.map(([args, env]) => run(HARNESS, ["serve", "--port", "0", ...args], env)),
    );
    for (const [i, [args, env, expected]] of cases.entries()) {
      const what = `${args.join(" ")} ${JSON.stringify(env)}`;
      assertOneLine(runs[i], expected, what);
      assert.match(runs[i].stderr.trim(), see, what);
    }
  });

  it("a weak brain token or JWT secret, a credentials file that is no JSON: the file named, never the secret", async () => {
    const brain = join(dir, "brain-token");
    writeFileSync(brain, `${WEAK_SECRET.slice(0, 5)}\n`);
    const jwt = join(dir, "jwt-secret");
    writeFileSync(jwt, `${WEAK_SECRET}\n`);
    const credentials = join(dir, "credentials.json");
    writeFileSync(credentials, `{${WEAK_SECRET}`);
    const strongJwt = { BMA_JWT_SECRET: "s".repeat(40) };
    const binaryJwt = join(dir, "binary-secret");
    writeFileSync(binaryJwt, new Uint8Array(40).map((_, i) => 0x80 + i));
    const emptyKey = join(dir, "empty-key.json");
    writeFileSync(
      emptyKey,
      JSON.stringify([
        { environmentId: "env_1", environmentKey: WEAK_SECRET.repeat(3) },
        { environmentId: "env_2", environmentKey: "" },
      ]),
    );
    const emptyOwner = join(dir, "empty-owner.json");
    writeFileSync(emptyOwner, JSON.stringify([{ machineId: "", machineToken: WEAK_SECRET }]));
    const spacedKey = join(dir, "spaced-key.json");
    writeFileSync(
      spacedKey,
      JSON.stringify([{ environmentId: "env_1", environmentKey: `${WEAK_SECRET} x` }]),
    );
    const cases: [string[], Record<string, string>, RegExp][] = onThisRuntime([
      [
        ["--brain-token-file", brain],
        {},
        /the file .*brain-token \(--brain-token-file\) holds 5 characters: a bearer token needs at least 16/,
      ],
      [[], { BMA_BRAIN_TOKEN: "short" }, /BMA_BRAIN_TOKEN holds 5 characters/],
      [
        ["--jwt-secret-file", jwt],
        {},
        /the file .*jwt-secret \(--jwt-secret-file\) is too weak: an HS256 secret needs at least 32 bytes/,
      ],
      [[], { BMA_JWT_SECRET: WEAK_SECRET }, /BMA_JWT_SECRET is too weak: .*32 bytes/],
      [
        ["--credentials-file", credentials],
        strongJwt,
        /the file .*credentials\.json \(--credentials-file\) is not valid JSON/,
      ],
      // 40 bytes, none of them UTF-8: read as text, every one was the same U+FFFD.
      [
        ["--jwt-secret-file", binaryJwt],
        {},
        /--jwt-secret-file: cannot read .*binary-secret: it is not UTF-8 text/,
      ],
      [
        ["--credentials-file", emptyKey],
        strongJwt,
        /credentials.*credential 2: its environmentKey is empty/,
      ],
      [
        ["--credentials-file", emptyOwner],
        strongJwt,
        /credentials.*credential 1: its machineId is empty/,
      ],
      [
        ["--credentials-file", spacedKey],
        strongJwt,
        /credentials.*credential 1: its environmentKey holds whitespace/,
      ],
    ]);
    const runs = await Promise.all(
      cases.map(([args, env]) => run(HARNESS, ["serve", "--port", "0", ...args], env)),
    );
    for (const [i, [args, env, expected]] of cases.entries()) {
      const what = `${args.join(" ")} ${Object.keys(env).join(" ")}`;
      assertOneLine(runs[i], expected, what);
      assert.ok(
        !runs[i].stderr.includes("BMA_CREDENTIALS: "),
        `${what}: names a variable not used`,
      );
    }
  });

  it("a SQLite store that cannot be opened, a --unix path that cannot be listened on: named, with why", async () => {
    const folder = join(dir, "a-folder");
    mkdirSync(folder);
    const victim = join(dir, "victim.txt");
    writeFileSync(victim, "important\n");
    const cases: [string[], RegExp][] = onThisRuntime([
      [
        ["--store", `sqlite:${join(dir, "no-such-dir", "h.db")}`],
        /cannot open the SQLite store at .*no-such-dir\/h\.db: the directory .*no-such-dir does not exist/,
      ],
      [
        ["--store", `sqlite:${folder}`],
        /cannot open the SQLite store at .*a-folder: it is a directory/,
      ],
      [
        ["--unix", join(dir, "no-such-dir", "x.sock")],
        /cannot listen on the Unix socket .*no-such-dir\/x\.sock: \w+/,
      ],
      [["--unix", victim], /cannot listen on .*victim\.txt: a regular file is there, not a socket/],
      [["--drain-ms"], /Unknown option '--drain-ms'/],
      [["--store", "--port", "0"], /--store is missing its value/],
      [["--port", "0", "--port", "1"], /--port is given more than once/],
    ]);
    const runs = await Promise.all(
      cases.map(([args]) =>
        run(HARNESS, ["serve", ...(args.includes("--port") ? [] : ["--port", "0"]), ...args])
      ),
    );
    for (const [i, [args, expected]] of cases.entries()) {
      const run = runs[i];
      // The start's log lines go to stdout; the refusal is the one line on stderr.
      assertOneLine(run, expected, args.join(" "));
      assert.ok(!/ConnectionFailed|127\.0\.0\.1:0/.test(run.stderr), run.stderr);
    }
    assert.equal(readFileSync(victim, "utf8"), "important\n", "the file at --unix is kept");
  });

  it("bma-harness: numbers in digits only, a flag given once", async () => {
    const cases: [string[], RegExp][] = onThisRuntime([
      [["--heartbeat-ms", "1e3"], /--heartbeat-ms must be a positive integer/],
      [["--heartbeat-ms", "99999999999999999999"], /--heartbeat-ms must be a positive integer/],
      [["--port", "0x10"], /--port takes 0-65535/],
      [["--port", "0", "--port", "1"], /--port is given more than once/],
      [["--port", "--unix", "x"], /--port is missing its value/],
    ]);
    const runs = await Promise.all(cases.map(([args]) => run(HARNESS, args)));
    for (const [i, [args, expected]] of cases.entries()) {
      assertOneLine(runs[i], expected, args.join(" "));
      assert.match(runs[i].stderr.trim(), /^bma-harness: .*\(see --help\)$/);
    }
  });

  it("bma-harness --unix on a regular file: refused, the file kept", async () => {
    const victim = join(dir, "victim-local.txt");
    writeFileSync(victim, "important\n");
    const result = await run(HARNESS, ["--port", "0", "--unix", victim]);
    assertOneLine(
      result,
      /^bma-harness: cannot listen on .*victim-local\.txt: a regular file is there/,
      "--unix",
      1,
    );
    assert.equal(readFileSync(victim, "utf8"), "important\n");
  });

  it("bma-harness --unix: a path too long, a directory missing: `cannot listen on PATH: why`, nothing bound", async () => {
    const folder = join(dir, "long-paths");
    mkdirSync(folder);
    const long = join(folder, "a".repeat(130) + ".sock");
    const missing = join(dir, "no-such-dir", "x.sock");
    const [tooLong, noDir] = await Promise.all([
      run(HARNESS, ["--port", "0", "--unix", long]),
      run(HARNESS, ["--port", "0", "--unix", missing]),
    ]);
    assertOneLine(
      tooLong,
      new RegExp(
        `^bma-harness: cannot listen on ${long}: a Unix socket path may have at most \\d+ bytes`,
      ),
      "too long",
      1,
    );
    assert.deepEqual(readdirSync(folder), [], "no socket at the path cut short");
    assertOneLine(
      noDir,
      new RegExp(
        `^bma-harness: cannot listen on ${missing}: the directory .*no-such-dir does not exist$`,
      ),
      "no directory",
      1,
    );
  });

  it("bma-harness --unix with a relative path prints the socket's absolute unix:// URL", async () => {
    const folder = join(dir, "relative");
    mkdirSync(join(folder, "s"), { recursive: true });
    const cli = launchCli(HARNESS, ["--port", "0", "--unix", "s/rel.sock"], { cwd: folder });
    try {
      const { match } = await cli.stdout.match(/^listening (unix:\S+)$/);
      assert.equal(match[1], `unix://${join(folder, "s", "rel.sock")}`);
    } finally {
      cli.send("quit");
      await cli.result;
    }
  });

  it("a SQLite store whose first write fails is named with its path (exit 2)", async () => {
    // A table of the store's name that is not the store's: the claim, its first write, fails.
    const db = join(dir, "foreign.db");
    const raw = await rawDatabase(DRIVERS[0], db);
    raw.exec("CREATE TABLE bma_harness_store (a INTEGER)");
    raw.close();
    const result = await run(HARNESS, ["serve", "--port", "0", "--store", `sqlite:${db}`]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, new RegExp(`cannot write the SQLite store at ${db}: `));
  });

  it("a second serve on a held SQLite store names the CLI's flags, not the library's option", async () => {
    const db = join(dir, "held.db");
    const first = launchCli(HARNESS, ["serve", "--port", "0", "--store", `sqlite:${db}`], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: process.env.PATH ?? "", HOME: dir },
    });
    try {
      await first.stdout.match(/serving: the store is held/);
      const second = await run(HARNESS, ["serve", "--port", "0", "--store", `sqlite:${db}`]);
      assert.equal(second.code, 1, second.stderr);
      const line = second.stderr.trim().split("\n").at(-1)!;
      assert.match(line, /held by another harness .*--standby.*--takeover/);
      assert.doesNotMatch(second.stderr, /takeover: true/);
    } finally {
      sendSignal(first.child, "SIGTERM");
      await exited(first.child);
    }
  });

  it("a PostgreSQL password in --store (read by every user in ps) is warned of, never printed", async () => {
    const password = "pwSECRET7f3a";
    // Nothing listens there: the open fails after its retries; the warning comes before it.
    const url = `postgres://bma:${password}@127.0.0.1:${await refusedPort()}/bma`;
    const env = { PATH: process.env.PATH ?? "", HOME: dir };
    const flagged = launchCli(HARNESS, ["serve", "--port", "0", "--store", url], {
      stdio: ["ignore", "pipe", "pipe"],
      env,
    });
    try {
      await flagged.stdout.match(/the store's password is in --store, .* PGPASSWORD or PGPASSFILE/);
    } finally {
      sendSignal(flagged.child, "SIGTERM");
      await exited(flagged.child);
    }
    const output = [...flagged.stdout.lines, ...flagged.stderr.lines].join("\n");
    assert.ok(!output.includes(password), output);
  });
});

describe("the BMA_* variables, as the edge harness reads them too", () => {
  it("a number that is no positive integer or a connect URL that is no ws:// URL throws, naming the variable; unset or empty takes the default", () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ BMA_HEARTBEAT_INTERVAL_MS: "-5" }, "BMA_HEARTBEAT_INTERVAL_MS"],
      [{ BMA_MAX_FRAME_BYTES: "abc" }, "BMA_MAX_FRAME_BYTES"],
      [{ BMA_REQUEST_TIMEOUT_MS: "1e3" }, "BMA_REQUEST_TIMEOUT_MS"],
      [{ BMA_TOKEN_TTL_SECONDS: "0" }, "BMA_TOKEN_TTL_SECONDS"],
      [{ BMA_CONNECT_URL: "notaurl" }, "BMA_CONNECT_URL"],
      [{ BMA_JWT_SECRET: "s".repeat(40), BMA_CREDENTIALS: "{" }, "BMA_CREDENTIALS"],
    ];
    for (const [env, variable] of bad) {
      assert.throws(
        () => harnessOptionsFromVariables(env),
        (error) => error instanceof HarnessVariableError && error.variable === variable,
        variable,
      );
    }
    const fine = harnessOptionsFromVariables({
      BMA_HEARTBEAT_INTERVAL_MS: "",
      BMA_MAX_FRAME_BYTES: "65536",
      BMA_CONNECT_URL: "wss://h.example/v1/executors/connect",
    });
    assert.equal(fine.heartbeatIntervalMs, undefined);
    assert.equal(fine.maxFrameBytes, 65536);
  });
});

describe("bma-executor: refused at start", { timeout: 120_000 }, () => {
  it("a flag given twice, a value missing, a number in another form, --mcp-config, --credential-file with --harness", async () => {
    const workdir = join(dir, "work");
    mkdirSync(workdir, { recursive: true });
    const harness = ["--harness", "ws://127.0.0.1:9", "--workdir", workdir];
    // An mcp.json that is not one: where it is wrong, never what it holds (env may hold keys).
    const mcp = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return [...harness, "--mcp-config", join(dir, name)];
    };
    const cases: [string[], RegExp][] = onThisRuntime([
      [mcp("mcp-list.json", "[]"), /^bma-executor: .*mcp\.json: the file: .*expected object/],
      [
        mcp(
          "mcp-args.json",
          '{"mcpServers":{"x":{"command":"node","args":5,"env":{"K":"SECRET_V"}}}}',
        ),
        /^bma-executor: .*mcp\.json: mcpServers\.x\.args: .*expected array/,
      ],
      [mcp("mcp-none.json", '{"servers_typo":{}}'), /mcp\.json: the file: holds no mcpServers map/],
      [
        ["--harness", "ws://a", "--harness", "ws://b"],
        /^bma-executor: --harness is given more than once/,
      ],
      [
        ["--drain-ms", "--workdir", workdir, "--harness", "ws://a"],
        /^bma-executor: --drain-ms is missing its value \(a value that starts with "-"/,
      ],
      [[...harness, "--grace-ms", "1e3"], /--grace-ms must be a positive integer, not "1e3"/],
      [[...harness, "--name", ""], /^bma-executor: --name is empty/],
      [["--workdir", workdir, "--harness", ""], /^bma-executor: --harness is empty/],
      [
        [...harness, "--max-sessions", "99999999999999999999"],
        /--max-sessions must be a positive integer/,
      ],
      [
        [...harness, "--max-running-tool-calls", "0"],
        /--max-running-tool-calls must be a positive integer/,
      ],
      [
        [...harness, "--mcp-config", join(dir, "no-mcp.json")],
        /^bma-executor: cannot read --mcp-config: .*\(see --help\)$/,
      ],
      [
        [...harness, "--credential-file", join(dir, "no-such-key")],
        /--credential-file is for BMA_BASE_URL .*--harness connects to a local harness, which takes no credential/,
      ],
      [
        ["--workdir", workdir, "--harness", `unix://${join(dir, "a".repeat(130))}.sock`],
        /^bma-executor: --harness: cannot connect to .*aaaa\.sock: a Unix socket path may have at most \d+ bytes/,
      ],
    ]);
    const runs = await Promise.all(cases.map(([args]) => run(EXECUTOR_CLI, args)));
    for (const [i, [args, expected]] of cases.entries()) {
      assertOneLine(runs[i], expected, args.join(" "));
      assert.match(runs[i].stderr.trim(), /\(see --help\)$/);
      assert.doesNotMatch(runs[i].stderr, /SECRET_V/);
    }
  });

  it("a credential in the environment with --harness: a warning naming the variables, never their values", async () => {
    const cli = launchCli(EXECUTOR_CLI, ["--harness", "ws://127.0.0.1:9", "--workdir", dir], {
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        PATH: process.env.PATH ?? "",
        HOME: dir,
        BMA_BASE_URL: "http://127.0.0.1:9",
        BMA_ENVIRONMENT_KEY: WEAK_SECRET,
        BMA_ENVIRONMENT_ID: "env_1",
      },
    });
    await cli.stderr.match(
      /WARN .*--harness connects to a local harness, which takes no credential: BMA_BASE_URL, BMA_ENVIRONMENT_KEY are not used/,
    );
    sendSignal(cli.child, "SIGTERM");
    await exited(cli.child);
    assert.ok(!cli.stderr.lines.join("\n").includes(WEAK_SECRET));
  });
});

describe("bma-executor: a reconnect the harness did not resume", { timeout: 120_000 }, () => {
  it("logs 'registered anew' with the old and new ids, and prints the new id", async () => {
    const socket = join(dir, "reg.sock");
    let harness = new Harness({ insecureNoAuth: true });
    let server = await harness.serveUnix(socket);
    const cli = launchCli(
      EXECUTOR_CLI,
      ["--harness", `unix://${socket}`, "--workdir", dir, "--log-format", "json"],
      { stdio: ["ignore", "pipe", "pipe"], env: { PATH: process.env.PATH ?? "", HOME: dir } },
    );
    try {
      const first = (await cli.stdout.match(/^registered (\S+)$/)).match[1];
      // A harness without a store restarts knowing nothing: the executor gets a new id.
      await server.close();
      await harness.close();
      harness = new Harness({ insecureNoAuth: true });
      server = await harness.serveUnix(socket);
      const { match, index } = await cli.stdout.match(/^registered (\S+)$/, 1);
      const second = match[1];
      assert.notEqual(second, first);
      assert.ok(index > 0);
      await cli.stderr.match(/"message":"registered anew/);
      const records = jsonLogs(cli.stderr.lines);
      const anew = records.find((r) => String(r.message).startsWith("registered anew"))!;
      assert.equal(anew.executor_id, second);
      assert.equal(anew.previous_executor_id, first);
      assert.ok(!records.some((r) => r.message === "re-registered"), "a new id logged as resumed");
    } finally {
      sendSignal(cli.child, "SIGTERM");
      await exited(cli.child);
      await server.close();
      await harness.close();
    }
  });
});
