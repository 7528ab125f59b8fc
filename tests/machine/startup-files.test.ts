/**
 * Which of a user's shell start-up files run, for each way the executor starts a program, as
 * docs/machine.md ("Shell start-up files") says: an executor whose environment's `HOME` holds a
 * `.bashrc` and a `.profile` that each print a marker, served with this runtime's
 * `serveMachine`, driven over a real WebSocket on 127.0.0.1. The `bash` tool and
 * `process.start` read none, whatever stdin is (`process.start`'s stdin is a socket pair, which
 * bash otherwise takes for a remote shell's); a program asks for them as it would in a terminal
 * (`-l`, `-i`); a terminal's default login shell reads the profile.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const INFO = { name: "startup-files", os: "linux", arch: "amd64", version: "1.0.0" };
const RC = "rc-marker";
const PROFILE = "profile-marker";

describe(`shell start-up files on ${RUNTIME}`, { timeout: 60_000 }, () => {
  let dir: string;
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let client: Entry.ExecutorClient;
  let executor: Entry.ExecutorHandle;
  let session: Entry.Session;
  let processes = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-startup-"));
    const home = join(dir, "home");
    const workdir = join(dir, "work");
    mkdirSync(home);
    mkdirSync(workdir);
    writeFileSync(join(home, ".bashrc"), `echo ${RC}\n`);
    writeFileSync(join(home, ".profile"), `echo ${PROFILE}\n`);
    harness = new sdk.Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    client = new sdk.ExecutorClient({ harnessUrl: server.url, executor: INFO });
    sdk.serveMachine(client, {
      workdir,
      graceMs: 300,
      // The executor's own environment, as a user's login would give it.
      environment: { from: { ...process.env, HOME: home } },
    });
    await client.start();
    executor = await harness.waitExecutor();
    session = await executor.assignSession({ session_id: "ses_startup" });
    await session.ready();
  });

  after(async () => {
    await client?.stop();
    await harness?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `argv` with `process.start` and returns its stdout once it has exited. */
  async function started(argv: string[], env?: Record<string, string>): Promise<string> {
    const process_id = `p_${++processes}`;
    await executor.request("process.start", { session_id: session.id, process_id, argv, env });
    await executor.request("process.wait", { session_id: session.id, process_id });
    const read = await executor.request("process.read", {
      session_id: session.id,
      process_id,
      stream: "stdout",
    });
    return read.data;
  }

  it("the bash tool reads none", async () => {
    const result = await session.tools.bash.call({ command: "echo body" });
    assert.equal(result.structured_content?.stdout, "body\n");
  });

  it("process.start reads none, though its stdin is a socket pair", async () => {
    assert.equal(await started(["bash", "-c", "echo body"]), "body\n");
    assert.equal(await started(["sh", "-c", "echo body"]), "body\n");
  });

  it("the rule the executor turns off: bash at shell level 0 on a socket reads ~/.bashrc", async () => {
    // Node's and Bun's stdin pipes are socket pairs; Deno's are pipes, which bash leaves alone.
    const stdin = await started(["sh", "-c", "[ -S /dev/stdin ] && echo socket || echo pipe"]);
    assert.equal(stdin, RUNTIME === "deno" ? "pipe\n" : "socket\n");
    const expected = stdin === "socket\n" ? `${RC}\nbody\n` : "body\n";
    assert.equal(await started(["bash", "-c", "echo body"], { SHLVL: "0" }), expected);
  });

  it("a login shell reads the profile, an interactive one ~/.bashrc, when asked", async () => {
    assert.equal(await started(["bash", "-lc", "echo body"]), `${PROFILE}\nbody\n`);
    assert.equal(await started(["bash", "-ic", "echo body"]), `${RC}\nbody\n`);
  });

  it("a terminal's default login shell reads the profile", { timeout: 30_000 }, async () => {
    const terminal = await session.terminal();
    let text = "";
    for await (const chunk of terminal) {
      text += chunk;
      if (text.includes(PROFILE)) break;
    }
    assert.match(text, new RegExp(PROFILE));
    await terminal.close();
  });
});
