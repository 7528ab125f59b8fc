/**
 * `git.credentials` reaches git through git's credential-helper protocol from the executor's
 * memory: a real `git credential fill` run in the session (bash call) gets the password, while
 * `env` in a bash call and in `process.start` shows no password; a later call for the same host
 * replaces it; a repository path scopes it; an expired one is not served; after the session ends
 * the same git invocation gets nothing and the socket is gone.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { environOf, parseEnviron, startMachine } from "./machine-fixture.ts";

const PASSWORD = "ghp_SECRET_first_password_0a1b2c";
const REPLACED = "ghp_SECRET_second_password_3d4e5f";
const SCOPED = "ghp_SECRET_repo_scoped_password_6a7b";

/** Asks git in a bash call of the session for a credential; returns what git answered. */
async function fill(
  session: Awaited<ReturnType<typeof startMachine>>["session"],
  request: string,
): Promise<{ exit: number; out: string }> {
  const result = await session.tools.bash.call({
    command: `printf '${request.replaceAll("\n", "\\n")}\\n' | git credential fill`,
    env: { GIT_TERMINAL_PROMPT: "0" },
  });
  return {
    exit: result.structured_content!.exit_code,
    out: result.structured_content!.stdout,
  };
}

describe("git.credentials through git's credential helper protocol", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("git credential fill in the session gets the password; env in bash and process.start does not", async () => {
    const { dir, executor, session, logger } = await startMachine(fx);
    const sid = session.id;
    assert.deepEqual(
      await executor.request("git.credentials", {
        session_id: sid,
        host: "git.example.com",
        username: "bot",
        password: PASSWORD,
      }),
      { stored: true, host: "git.example.com" },
    );
    const got = await fill(session, "protocol=https\nhost=git.example.com\n");
    assert.equal(got.exit, 0);
    assert.match(got.out, /^username=bot$/m);
    assert.match(got.out, new RegExp(`^password=${PASSWORD}$`, "m"));

    await session.tools.bash.call({
      command: "env > bash.env; cat /proc/self/environ > bash.environ",
    });
    for (const file of ["bash.env", "bash.environ"]) {
      assert.ok(!readFileSync(join(dir, file), "latin1").includes(PASSWORD), file);
    }
    const { process_id, pid } = await executor.request("process.start", {
      session_id: sid,
      argv: ["sh", "-c", "env; exec sleep 30"],
    });
    assert.ok(!(await environOf(pid!, ["sleep", "30"])).includes(PASSWORD));
    const read = await executor.request("process.read", {
      session_id: sid,
      process_id,
      stream: "stdout",
      wait_ms: 10_000,
    });
    assert.match(read.data, /GIT_CONFIG_COUNT=/, "the helper is configured");
    assert.ok(!read.data.includes(PASSWORD));
    // Another host is not answered.
    assert.notEqual((await fill(session, "protocol=https\nhost=other.example.com\n")).exit, 0);
    assert.ok(!logger.text().includes(PASSWORD), "never logged");
  });

  it("a later call for the same host replaces; a path scopes; an expired one is not served", async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    await executor.request("git.credentials", {
      session_id: sid,
      host: "git.example.com",
      password: PASSWORD,
    });
    await executor.request("git.credentials", {
      session_id: sid,
      host: "git.example.com",
      password: REPLACED,
    });
    await executor.request("git.credentials", {
      session_id: sid,
      host: "git.example.com",
      path: "/org/repo.git",
      password: SCOPED,
    });
    const host = await fill(session, "protocol=https\nhost=git.example.com\n");
    assert.match(host.out, new RegExp(`^password=${REPLACED}$`, "m"));
    assert.match(host.out, /^username=x-access-token$/m);
    const scoped = await fill(session, "url=https://git.example.com/org/repo.git");
    assert.match(scoped.out, new RegExp(`^password=${SCOPED}$`, "m"));
    const other = await fill(session, "url=https://git.example.com/org/other.git");
    assert.match(other.out, new RegExp(`^password=${REPLACED}$`, "m"));
    await executor.request("git.credentials", {
      session_id: sid,
      host: "old.example.com",
      password: PASSWORD,
      expires_at: new Date(Date.now() - 1_000).toISOString(),
    });
    const expired = await fill(session, "protocol=https\nhost=old.example.com\n");
    assert.notEqual(expired.exit, 0);
    assert.ok(!expired.out.includes(PASSWORD));
  });

  it("after the session ends the same git invocation gets nothing, and the socket is gone", async () => {
    const { dir, executor, session } = await startMachine(fx);
    await executor.request("git.credentials", {
      session_id: session.id,
      host: "git.example.com",
      password: PASSWORD,
    });
    await session.tools.bash.call({ command: "cat /proc/self/environ > git.environ" });
    const env = Object.fromEntries(parseEnviron(readFileSync(join(dir, "git.environ"), "latin1")));
    const socket = /--socket '([^']+)'/.exec(Object.values(env).join("\n"))?.[1];
    assert.ok(socket && existsSync(socket), "a per-session socket serves the helper");
    // git run by the test with the session's environment (the executor answers in this process,
    // so asynchronously).
    const ask = () =>
      new Promise<{ status: number | null; stdout: string }>((resolve) => {
        const git = spawn("git", ["credential", "fill"], {
          env: { ...env, GIT_TERMINAL_PROMPT: "0" },
          stdio: ["pipe", "pipe", "ignore"],
        });
        let stdout = "";
        git.stdout.on("data", (chunk) => (stdout += chunk));
        git.once("close", (status) => resolve({ status, stdout }));
        git.stdin.end("protocol=https\nhost=git.example.com\n\n");
      });
    assert.match((await ask()).stdout, new RegExp(`password=${PASSWORD}`), "served while it lives");
    await session.stop("done");
    const after = await ask();
    assert.notEqual(after.status, 0);
    assert.ok(!after.stdout.includes(PASSWORD));
    assert.equal(existsSync(socket), false);
  });
});
