/**
 * Children never see the executor's credentials: a real bash call, a real `process.start` and a
 * real MCP server each dump their environment (`env`, `/proc/self/environ`) while the executor
 * holds its environment key, a JWT, and a session's Git password, with the credential also in
 * the executor's own environment (as `BMA_ENVIRONMENT_KEY`, and under a name of the embedding
 * application's choosing). The dumps are read from files or from the child's `/proc` entry by
 * the test itself, so no redaction on the wire could hide a leak. And the policy's options:
 * the default allowlist, `keep`, `drop`, `set`, `defaults: false`.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { McpMessage } from "../../harness/node.ts";
import type { ChildEnvironmentOptions } from "../../executor/machine/child-env.node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { runScript } from "../helpers/mcp-stdio-servers.ts";
import { EXECUTOR_CLI, finished, printed, spawnTs } from "../helpers/runtime-command.ts";
import { environOf, parseEnviron, SECRETS, startMachine, until } from "./machine-fixture.ts";

const MCP_SERVER = new URL("./mcp-test-server.mjs", import.meta.url).pathname;
const GIT_PASSWORD = "ghp_SECRET_git_password_5e9d";
const CLI = EXECUTOR_CLI;

/** Variables set in the executor's own environment for these tests. */
const EXECUTOR_ENV: Record<string, string> = {
  BMA_ENVIRONMENT_KEY: SECRETS.environmentKey,
  BMA_MACHINE_TOKEN: SECRETS.machineToken,
  // The name an embedding application read its credential from: withheld by its value.
  MY_APP_EXECUTOR_KEY: SECRETS.environmentKey,
  MY_APP_AUTH_HEADER: `Bearer ${SECRETS.environmentKey}`,
  BMA_TEST_PLAIN: "plain-value",
  BMA_TEST_OTHER: "other-value",
};

/** A fetch that records the JWTs the token endpoint issues. */
function recordingFetch(tokens: string[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    try {
      const body = await response.clone().json() as { token?: unknown };
      if (typeof body?.token === "string") tokens.push(body.token);
    } catch { /* not JSON */ }
    return response;
  };
}

/** Asserts that none of the secrets (nor the credential variables' names) is in `text`. */
function assertClean(text: string, secrets: string[], what: string): void {
  assert.ok(text.length > 0, `${what}: dumped something`);
  for (const secret of secrets) assert.ok(!text.includes(secret), `${what} holds a secret`);
  for (const name of ["BMA_ENVIRONMENT_KEY", "BMA_MACHINE_TOKEN", "MY_APP_"]) {
    assert.ok(!text.includes(name), `${what} holds ${name}`);
  }
  assert.ok(!text.includes("[redacted]"), `${what}: something was redacted, not withheld`);
}

describe("children never see the executor's credentials", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  before(() => Object.assign(process.env, EXECUTOR_ENV));
  after(() => {
    for (const name of Object.keys(EXECUTOR_ENV)) delete process.env[name];
  });
  afterEach(() => fx.cleanup());

  /** A machine whose policy passes everything it may (`keep: ["*"]`), a JWT and a Git password held. */
  async function machine() {
    const tokens: string[] = [];
    const { command, args } = runScript(MCP_SERVER);
    const started = await startMachine(fx, {
      machine: {
        environment: { keep: ["*"] },
        mcpServers: { dump: { command, args, env: { SERVER_SET: "from-mcp-json" } } },
      },
      client: { fetch: recordingFetch(tokens), capabilities: { mcp: { servers: ["dump"] } } },
    });
    await started.executor.request("git.credentials", {
      session_id: started.session.id,
      host: "git.example.com",
      password: GIT_PASSWORD,
    });
    assert.equal(tokens.length > 0, true, "a JWT was issued");
    const secrets = [SECRETS.environmentKey, SECRETS.machineToken, GIT_PASSWORD, ...tokens];
    return { ...started, secrets, jwt: tokens.at(-1)! };
  }

  it("a bash call: env, /proc/self/environ and the shell's own /proc entry hold none", async () => {
    const { dir, session, secrets, jwt } = await machine();
    const result = await session.tools.bash.call({
      command:
        "env > bash.env; cat /proc/self/environ > cat.environ; cat /proc/$$/environ > shell.environ",
      // A call may not smuggle them in either.
      env: { CALL_TOKEN: jwt, CALL_KEY: SECRETS.environmentKey, CALL_PLAIN: "call-value" },
    });
    assert.equal(result.structured_content?.exit_code, 0);
    for (const file of ["bash.env", "cat.environ", "shell.environ"]) {
      const text = readFileSync(join(dir, file), "latin1");
      assertClean(text, secrets, file);
      // The policy did pass what it may: keep ["*"] and the call's own variable.
      assert.match(text, /BMA_TEST_PLAIN=plain-value/);
      assert.match(text, /CALL_PLAIN=call-value/);
      assert.doesNotMatch(text, /CALL_TOKEN|CALL_KEY/);
    }
  });

  it("process.start: env and cat /proc/self/environ hold none, nor the process's /proc entry", async () => {
    const { executor, session, secrets, jwt } = await machine();
    const sid = session.id;
    const outputOf = async (argv: string[]) => {
      const { process_id } = await executor.request("process.start", {
        session_id: sid,
        argv,
        env: { START_TOKEN: jwt, START_PLAIN: "start-value" },
      });
      await executor.request("process.wait", { session_id: sid, process_id });
      const read = await executor.request("process.read", {
        session_id: sid,
        process_id,
        stream: "stdout",
        max_bytes: 1024 * 1024,
      });
      return read.encoding === "base64" ? atob(read.data) : read.data;
    };
    for (const argv of [["env"], ["cat", "/proc/self/environ"]]) {
      const text = await outputOf(argv);
      assertClean(text, secrets, argv.join(" "));
      assert.match(text, /START_PLAIN=start-value/);
      assert.match(text, /PATH=/);
    }
    // Read by the test itself, while the process runs.
    const { pid } = await executor.request("process.start", {
      session_id: sid,
      argv: ["sleep", "30"],
    });
    assertClean(await environOf(pid!, ["sleep", "30"]), secrets, `/proc/${pid}/environ`);
  });

  it("an MCP server (a real child) dumping its environment sees none", async () => {
    const { session, secrets } = await machine();
    const channel = await session.mcp("dump");
    const answers: McpMessage[] = [];
    channel.onmessage = (message) => void answers.push(message);
    await channel.start();
    await channel.send({ jsonrpc: "2.0", id: 1, method: "dump" });
    while (answers.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const { env, environ, pid } = answers[0].result as {
      env: Record<string, string>;
      environ: string;
      pid: number;
    };
    assertClean(JSON.stringify(env), secrets, "the server's process.env");
    assertClean(environ, secrets, "the server's /proc/self/environ");
    assertClean(readFileSync(`/proc/${pid}/environ`, "latin1"), secrets, "its /proc entry");
    assert.equal(env.SERVER_SET, "from-mcp-json", "the server's configured env applies");
    await channel.close();
  });
});

describe("the child environment policy's options", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  before(() => Object.assign(process.env, EXECUTOR_ENV));
  after(() => {
    for (const name of Object.keys(EXECUTOR_ENV)) delete process.env[name];
  });
  afterEach(() => fx.cleanup());

  async function envWith(environment: ChildEnvironmentOptions, callEnv?: Record<string, string>) {
    const { dir, session } = await startMachine(fx, { machine: { environment } });
    await session.tools.bash.call({
      command: "cat /proc/self/environ > out.environ",
      env: callEnv,
    });
    return parseEnviron(readFileSync(join(dir, "out.environ"), "latin1"));
  }

  it("by default a child gets the allowlist of the executor's environment, nothing else", async () => {
    const env = await envWith({});
    assert.equal(env.get("PATH"), process.env.PATH);
    if (process.env.HOME) assert.equal(env.get("HOME"), process.env.HOME);
    assert.equal(env.has("BMA_TEST_PLAIN"), false);
    assert.equal(env.has("BMA_ENVIRONMENT_KEY"), false);
    assert.equal(env.has("NODE_OPTIONS"), false);
    const allowed =
      /^(PATH|HOME|USER|LOGNAME|SHELL|LANG|LANGUAGE|LC_.*|TERM|TZ|TMPDIR|PWD|SHLVL|_)$/;
    for (const name of env.keys()) assert.match(name, allowed, `${name} is not in the allowlist`);
  });

  it("keep adds names and prefixes, drop withholds from every source, set fixes values", async () => {
    const env = await envWith(
      {
        keep: ["BMA_TEST_*"],
        drop: ["BMA_TEST_OTHER", "HOME", "FORBIDDEN_*"],
        set: { SET_ME: "1" },
      },
      { FORBIDDEN_BY_CALL: "x", CALL_OK: "y" },
    );
    assert.equal(env.get("BMA_TEST_PLAIN"), "plain-value");
    assert.equal(env.has("BMA_TEST_OTHER"), false);
    assert.equal(env.has("HOME"), false);
    assert.equal(env.get("SET_ME"), "1");
    assert.equal(env.has("FORBIDDEN_BY_CALL"), false, "drop applies to a call's own env");
    assert.equal(env.get("CALL_OK"), "y");
  });

  it("defaults: false passes only what keep names; the credential variables never pass", async () => {
    const env = await envWith({
      defaults: false,
      keep: ["PATH", "BMA_ENVIRONMENT_KEY", "BMA_MACHINE_TOKEN", "MY_APP_*"],
      set: { BMA_MACHINE_TOKEN: "set-explicitly" },
    });
    const names = [...env.keys()].filter((name) => !["PWD", "SHLVL", "_"].includes(name));
    assert.deepEqual(names, ["PATH"]);
  });
});

describe("bma-executor: the credential from a file or stdin, and the --env-* flags", {
  timeout: 90_000,
}, () => {
  const fx = new Fixtures();
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) {
      const exit = finished(child);
      child.kill("SIGTERM");
      await exit;
    }
    await fx.cleanup();
  });

  /** Starts the CLI against a harness with a token endpoint; returns its session's child env. */
  async function launch(
    args: string[],
    env: Record<string, string>,
    stdin?: string,
    inherit = ["PATH", "HOME", "USER", "LANG", "TMPDIR"],
  ) {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-cli-env-")));
    fx.defer(() => rmSync(dir, { recursive: true, force: true }));
    const { harness, server } = await fx.harness();
    const base: Record<string, string> = {};
    for (const name of inherit) {
      if (process.env[name]) base[name] = process.env[name]!;
    }
    const child = spawnTs(CLI, ["--workdir", dir, "--log-level", "error", ...args], {
      env: {
        ...base,
        BMA_BASE_URL: server.httpUrl,
        BMA_ENVIRONMENT_ID: SECRETS.environmentId,
        BMA_TEST_PLAIN: "plain-value",
        ...env,
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    children.push(child);
    child.stdin!.end(stdin ?? "");
    await printed(child, "registered ");
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_cli_env" });
    await session.ready();
    const result = await session.tools.bash.call({
      command: "cat /proc/self/environ > child.environ",
    });
    assert.equal(result.structured_content?.exit_code, 0);
    return {
      session,
      childEnv: readFileSync(join(dir, "child.environ"), "latin1"),
      ownEnv: readFileSync(`/proc/${child.pid}/environ`, "latin1"),
    };
  }

  // A service manager or CI runner may start the executor with no USER, LOGNAME, HOME or SHELL
  // (Bun's os.userInfo() then answers "unknown"): the account database says who it runs as.
  it("started with PATH alone: children get the account's USER, LOGNAME and HOME, terminals its shell", async () => {
    const account = readFileSync("/etc/passwd", "utf8").split("\n")
      .map((line) => line.split(":"))
      .find((fields) => fields.length >= 7 && Number(fields[2]) === process.getuid!());
    assert.ok(account, "this machine's /etc/passwd has an entry for the test's uid");
    const [username, , , , , homedir, shell] = account;
    const { session, childEnv } = await launch(
      [],
      {
        BMA_ENVIRONMENT_KEY: SECRETS.environmentKey,
      },
      undefined,
      ["PATH"],
    );
    const env = parseEnviron(childEnv);
    assert.equal(env.get("USER"), username);
    assert.equal(env.get("LOGNAME"), username);
    assert.equal(env.get("HOME"), homedir);
    const terminal = await session.terminal();
    try {
      const cmdlineOf = () => readFileSync(`/proc/${terminal.pid}/cmdline`, "latin1");
      // Past fork and exec, and past the wrapper that enters the session's cgroup, if any.
      let cmdline = "";
      await until(() => {
        cmdline = cmdlineOf(); // empty while an exec replaces the program
        return cmdline.endsWith("-l\0") && !cmdline.includes("cgroup.procs");
      });
      assert.equal(cmdline, `${shell}\0-l\0`, "the default terminal runs the login shell");
    } finally {
      await terminal.close();
    }
  });

  it("--credential-file: the key is in no child and not in the executor's own environment", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-key-")));
    fx.defer(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "key");
    writeFileSync(file, `${SECRETS.environmentKey}\n`, { mode: 0o600 });
    const { childEnv, ownEnv } = await launch(
      ["--credential-file", file, "--env-keep", "BMA_TEST_*", "--env-set", "SET_ME=1"],
      {},
    );
    assertClean(childEnv, [SECRETS.environmentKey], "the child");
    assert.ok(!ownEnv.includes(SECRETS.environmentKey), "not in /proc/<executor>/environ");
    const env = parseEnviron(childEnv);
    assert.equal(env.get("BMA_TEST_PLAIN"), "plain-value");
    assert.equal(env.get("SET_ME"), "1");
  });

  it("--credential-file - reads standard input; BMA_ENVIRONMENT_KEY_FILE works too", async () => {
    const viaStdin = await launch(
      ["--credential-file", "-", "--env-drop", "HOME"],
      {},
      SECRETS.environmentKey,
    );
    assertClean(viaStdin.childEnv, [SECRETS.environmentKey], "the child");
    assert.ok(!viaStdin.ownEnv.includes(SECRETS.environmentKey));
    assert.equal(parseEnviron(viaStdin.childEnv).has("HOME"), false, "--env-drop");
    assert.equal(
      parseEnviron(viaStdin.childEnv).has("BMA_TEST_PLAIN"),
      false,
      "not kept by default",
    );
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-key-")));
    fx.defer(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "key"), SECRETS.environmentKey, { mode: 0o600 });
    const viaFileVar = await launch(["--env-clear", "--env-keep", "PATH"], {
      BMA_ENVIRONMENT_KEY_FILE: join(dir, "key"),
    });
    assertClean(viaFileVar.childEnv, [SECRETS.environmentKey, join(dir, "key")], "the child");
    const names = [...parseEnviron(viaFileVar.childEnv).keys()]
      .filter((name) => !["PWD", "SHLVL", "_"].includes(name));
    assert.deepEqual(names, ["PATH"], "--env-clear");
  });

  it("a credential passed by environment still reaches no child (only the executor's own entry)", async () => {
    const { childEnv, ownEnv } = await launch(["--env-keep", "*"], {
      BMA_ENVIRONMENT_KEY: SECRETS.environmentKey,
    });
    assertClean(childEnv, [SECRETS.environmentKey], "the child");
    // The documented limit: the executor's own /proc entry holds what it was started with.
    assert.ok(ownEnv.includes(SECRETS.environmentKey));
  });
});
