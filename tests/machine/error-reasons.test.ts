/**
 * Every error the machine answers on the wire is one the contract lists: its code is in the
 * method's `errors` list of `protocol/contract/openrpc.json`, and its reason is named in the
 * contract, by the method's description or by the listed error's. Driven through the public
 * API: `serveMachine` (with this runtime's PTYs) on an `ExecutorClient`, a real `Harness` over a
 * real WebSocket on 127.0.0.1, real processes, PTYs, files and a real HTTP server.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readFileSync, writeFileSync } from "node:fs";
import { Buffer } from "node:buffer";
import { ProtocolError } from "../../protocol/errors.ts";
import type { ExecutorHandle } from "../../harness/node.ts";
import type { SkillSource } from "../../protocol/generated/contract.ts";
import type { PtyHost } from "../../executor/machine/pty.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";
import { startMachine } from "./machine-fixture.ts";

const pty: PtyHost = "Bun" in globalThis
  ? (await import("../../executor/machine/pty.bun.ts")).bunPty
  : (await import("../../executor/machine/pty.node.ts")).nodePty;

interface ContractError {
  code: number;
  description: string;
}
const contract = JSON.parse(readFileSync(
  fileURLToPath(new URL("../../protocol/contract/openrpc.json", import.meta.url)),
  "utf8",
)) as {
  methods: { name: string; description: string; errors?: { $ref: string }[] }[];
  components: { errors: Record<string, ContractError> };
};

/** Asserts that `error` has the code and reason expected, and that the contract lists both. */
function assertListed(method: string, error: unknown, code: number, reason: string): void {
  assert.ok(error instanceof ProtocolError, `${method}: a protocol error, got ${error}`);
  const answered = (error.data as { reason?: string } | undefined)?.reason;
  assert.equal(error.code, code, `${method}: code`);
  assert.equal(answered, reason, `${method}: reason`);
  const spec = contract.methods.find((m) => m.name === method);
  assert.ok(spec, `${method} is in the contract`);
  const listed = (spec.errors ?? []).map((ref) =>
    contract.components.errors[ref.$ref.split("/").at(-1)!]
  );
  const entry = listed.find((e) => e.code === code);
  assert.ok(entry, `${method}: ${code} is in its errors list`);
  const named = new RegExp(`\\b${reason}\\b`);
  assert.ok(
    named.test(spec.description) || named.test(entry.description),
    `${method}: reason ${reason} is named by its description or by error ${code}'s`,
  );
}

const failure = (work: Promise<unknown>) =>
  work.then(
    (value) => assert.fail(`expected an error, got ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );

/** The `field` of a protocol error's data. */
const fieldOf = (error: unknown) => ((error as ProtocolError).data as { field?: string })?.field;

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Reads a terminal's output until it holds `text` (the test's timeout bounds the wait). */
async function outputOf(
  executor: ExecutorHandle,
  sessionId: string,
  terminalId: string,
  text: string,
): Promise<void> {
  let output = "";
  let offset = 0;
  while (!output.includes(text)) {
    const read = await executor.request("terminal.read", {
      session_id: sessionId,
      terminal_id: terminalId,
      offset,
      wait_ms: 5_000,
    });
    assert.ok(!read.eof, `the terminal ended before printing ${text}: ${JSON.stringify(output)}`);
    output += read.encoding === "base64" ? Buffer.from(read.data, "base64").toString() : read.data;
    offset = read.next_offset;
  }
}

describe("the machine's errors are the contract's", { timeout: 60_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("process.start and terminal.open: a program that cannot start is -32002 spawn_failed", async () => {
    const { executor, session } = await startMachine(fx, { machine: { pty } });
    const sid = session.id;
    for (const argv of [["/no/such/program"], ["no-such-program-4f2a"]]) {
      assertListed(
        "process.start",
        await failure(executor.request("process.start", { session_id: sid, argv })),
        -32002,
        "spawn_failed",
      );
      assertListed(
        "terminal.open",
        await failure(executor.request("terminal.open", { session_id: sid, argv })),
        -32002,
        "spawn_failed",
      );
    }
    // A working directory that is not one is named as such, not as the program.
    for (const method of ["process.start", "terminal.open"] as const) {
      const missing = await failure(
        executor.request(method, { session_id: sid, argv: ["true"], cwd: "no-such-dir" }),
      );
      assertListed(method, missing, -32002, "spawn_failed");
      assert.equal(fieldOf(missing), "cwd", method);
    }
  });

  it("process.start with a NUL byte in an argument or the environment is -32002 spawn_failed, and bash says so", async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    for (
      const params of [
        { argv: ["echo", "a\u0000b"] },
        { argv: ["echo", "ok"], env: { NAME: "a\u0000b" } },
      ]
    ) {
      assertListed(
        "process.start",
        await failure(executor.request("process.start", { session_id: sid, ...params })),
        -32002,
        "spawn_failed",
      );
    }
    // A variable's name with "=" (or empty) is bad input: the child would get another variable.
    for (const env of [{ "A=B": "x" }, { "": "x" }] as Record<string, string>[]) {
      const refused = await failure(
        executor.request("process.start", { session_id: sid, argv: ["true"], env }),
      );
      assert.ok(refused instanceof ProtocolError && refused.code === -32602, String(refused));
      assert.equal(fieldOf(refused), "/env");
    }
    const badEnv = await session.tools.bash.call({ command: "true", env: { "A=B": "x" } });
    assert.equal(badEnv.outcome, "failed");
    assert.match(String(badEnv.error?.message), /name cannot be empty or hold "="/);
    const result = await session.tools.bash.call({ command: "echo a\u0000b" });
    assert.equal(result.outcome, "failed");
    assert.match(String(result.error?.message), /cannot start the program: .* NUL byte/);
  });

  it("process.write after eof is -32002 stdin_closed; terminal.input after exit is terminal_closed", async () => {
    const { executor, session } = await startMachine(fx, { machine: { pty } });
    const sid = session.id;
    const { process_id } = await executor.request("process.start", {
      session_id: sid,
      argv: ["sleep", "1000"],
    });
    await executor.request("process.write", { session_id: sid, process_id, data: "", eof: true });
    assertListed(
      "process.write",
      await failure(executor.request("process.write", { session_id: sid, process_id, data: "x" })),
      -32002,
      "stdin_closed",
    );
    const { terminal_id } = await executor.request("terminal.open", {
      session_id: sid,
      argv: ["true"],
    });
    await executor.request("terminal.close", { session_id: sid, terminal_id });
    assertListed(
      "terminal.input",
      await failure(
        executor.request("terminal.input", { session_id: sid, terminal_id, data: "x" }),
      ),
      -32002,
      "terminal_closed",
    );
  });

  it("process.write: a program that closed its stdin is stdin_closed at the first write", {
    // Bun's child stdin takes writes its program can no longer read (no EPIPE) until it exits.
    skip: "Bun" in globalThis,
  }, async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    const { process_id } = await executor.request("process.start", {
      session_id: sid,
      argv: ["sh", "-c", "exec 0<&-; echo closed; exec sleep 1000"],
    });
    // It has closed its stdin once it says so.
    const said = await executor.request("process.read", {
      session_id: sid,
      process_id,
      stream: "stdout",
      wait_ms: 30_000,
    });
    assert.equal(said.data, "closed\n");
    assertListed(
      "process.write",
      await failure(executor.request("process.write", { session_id: sid, process_id, data: "x" })),
      -32002,
      "stdin_closed",
    );
  });

  it("process.write to a program that does not read: stdin_full beyond 8 MiB, then stdin_closed at its exit", async () => {
    const { executor, session } = await startMachine(fx);
    const sid = session.id;
    const { process_id } = await executor.request("process.start", {
      session_id: sid,
      argv: ["sleep", "1000"],
    });
    const chunk = "x".repeat(1024 * 1024);
    const writes = Array.from(
      { length: 12 },
      () =>
        executor.request("process.write", { session_id: sid, process_id, data: chunk }).then(
          () => "written",
          (error: unknown) => error,
        ),
    );
    // The writes beyond the bound are refused at once; those before it wait for the program.
    assertListed("process.write", await Promise.race(writes), -32009, "stdin_full");
    await executor.request("process.signal", { session_id: sid, process_id, signal: "SIGKILL" });
    // What waited for the program is answered as closed once it is gone, never as a failure.
    const outcomes = await Promise.all(writes);
    const reasons = outcomes.map((e) =>
      e instanceof ProtocolError ? (e.data as { reason?: string })?.reason : e
    );
    const taken = reasons.indexOf("stdin_full");
    assert.ok(taken >= 8, `the first 8 MiB are taken: ${reasons}`);
    for (const [i, outcome] of outcomes.entries()) {
      if (i < taken) assertListed("process.write", outcome, -32002, "stdin_closed");
      else assertListed("process.write", outcome, -32009, "stdin_full");
    }
  });

  it("terminal.input to a raw-mode program that does not read: answered at once, input_full beyond 8 MiB", async () => {
    const { executor, session } = await startMachine(fx, { machine: { pty } });
    const sid = session.id;
    // Raw mode: the PTY holds a few KiB and then takes nothing until the program reads.
    const { terminal_id } = await executor.request("terminal.open", {
      session_id: sid,
      argv: ["sh", "-c", "stty raw -echo; echo raw; exec sleep 1000"],
    });
    await outputOf(executor, sid, terminal_id, "raw");
    const chunk = "x".repeat(1024 * 1024);
    const outcomes: unknown[] = [];
    for (let i = 0; i < 12; i++) {
      outcomes.push(
        await executor.request("terminal.input", { session_id: sid, terminal_id, data: chunk })
          .then((answer) => answer.written, (error: unknown) => error),
      );
    }
    const taken = outcomes.findIndex((outcome) => typeof outcome !== "number");
    assert.ok(taken >= 8, `the first 8 MiB are taken: ${outcomes}`);
    for (const outcome of outcomes.slice(taken)) {
      assertListed("terminal.input", outcome, -32009, "input_full");
    }
    // The executor goes on answering, and the terminal ends as any other.
    const closed = await executor.request("terminal.close", { session_id: sid, terminal_id });
    assert.equal(closed.closed, true);
  });

  it("base64 input of 9 MiB is decoded, not refused: terminal.input and process.write", async () => {
    const { executor, session } = await startMachine(fx, { machine: { pty } });
    const sid = session.id;
    const size = 9 * 1024 * 1024;
    const data = Buffer.from(new Uint8Array(size).map((_, i) => 97 + (i % 26))).toString("base64");
    // A program that does not read: the input waits in the executor, answered at once.
    const { terminal_id } = await executor.request("terminal.open", {
      session_id: sid,
      argv: ["sh", "-c", "stty raw -echo; echo raw; exec sleep 1000"],
    });
    await outputOf(executor, sid, terminal_id, "raw");
    const typed = await executor.request("terminal.input", {
      session_id: sid,
      terminal_id,
      data,
      encoding: "base64",
    });
    assert.equal(typed.written, size);
    await executor.request("terminal.close", { session_id: sid, terminal_id });
    const { process_id } = await executor.request("process.start", {
      session_id: sid,
      argv: ["wc", "-c"],
    });
    const written = await executor.request("process.write", {
      session_id: sid,
      process_id,
      data,
      encoding: "base64",
      eof: true,
    });
    assert.equal(written.written, size);
    const counted = await executor.request("process.read", {
      session_id: sid,
      process_id,
      stream: "stdout",
      wait_ms: 30_000,
    });
    assert.equal(counted.data.trim(), String(size));
  });

  it("workspace.backup: a path that is not a directory is -32002 file_not_found", async () => {
    const { dir, executor, session } = await startMachine(fx);
    writeFileSync(join(dir, "plain.txt"), "x");
    // Refused before anything is uploaded: the URL is never reached.
    const backup = (params: Record<string, unknown>) =>
      failure(executor.request("workspace.backup", {
        session_id: session.id,
        upload_url: "http://127.0.0.1:9/never",
        ...params,
      }));
    for (const path of ["missing", "plain.txt", "missing/deeper"]) {
      assertListed("workspace.backup", await backup({ path }), -32002, "file_not_found");
    }
    assertListed("workspace.backup", await backup({ exclude: ["!x"] }), -32602, "invalid_params");
    // Another scheme than http(s) is bad input, named by its field (the URL is never repeated).
    const fileUrl = await backup({ upload_url: "file:///tmp/secret-presigned-x" });
    assertListed("workspace.backup", fileUrl, -32602, "invalid_params");
    assert.equal(fieldOf(fileUrl), "/upload_url");
    assert.doesNotMatch((fileUrl as Error).message, /secret-presigned/);
  });

  it("skill.install: no SKILL.md or a bad archive is -32602, a failed fetch -32004", async () => {
    const notAnArchive = new TextEncoder().encode("this is not a tar.gz\n");
    const server = createServer((req, res) => {
      if (req.url === "/bad.tgz") res.end(notAnArchive);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    fx.defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as { port: number };
    const { executor, session } = await startMachine(fx);
    const install = (source: SkillSource) =>
      failure(executor.request("skill.install", { session_id: session.id, name: "demo", source }));
    assertListed(
      "skill.install",
      await install({ type: "files", files: [{ path: "README.md", content: "# no manifest" }] }),
      -32602,
      "invalid_params",
    );
    const url = (path: string): SkillSource => ({
      type: "url",
      url: `http://127.0.0.1:${port}${path}`,
      sha256: sha256(notAnArchive),
    });
    assertListed("skill.install", await install(url("/bad.tgz")), -32602, "invalid_params");
    assertListed("skill.install", await install(url("/gone.tgz")), -32004, "backend_unavailable");
  });

  it("every capability request for a session not held is -32002 unknown_session", async () => {
    const { executor } = await startMachine(fx, { machine: { pty } });
    const sid = "ses_not_held";
    const requests: [string, Promise<unknown>][] = [
      ["process.start", executor.request("process.start", { session_id: sid, argv: ["true"] })],
      ["process.list", executor.request("process.list", { session_id: sid })],
      ["terminal.open", executor.request("terminal.open", { session_id: sid, argv: ["true"] })],
      [
        "file.upload",
        executor.request("file.upload", { session_id: sid, path: "x.txt", content: "eA==" }),
      ],
      ["file.download", executor.request("file.download", { session_id: sid, path: "x.txt" })],
      [
        "skill.install",
        executor.request("skill.install", {
          session_id: sid,
          name: "s",
          source: { type: "files", files: [{ path: "SKILL.md", content: "# s" }] },
        }),
      ],
      [
        "git.credentials",
        executor.request("git.credentials", {
          session_id: sid,
          host: "example.com",
          password: "pw-1234",
        }),
      ],
      [
        "workspace.backup",
        executor.request("workspace.backup", {
          session_id: sid,
          upload_url: "http://127.0.0.1:9/never",
        }),
      ],
    ];
    for (const [method, request] of requests) {
      assertListed(method, await failure(request), -32002, "unknown_session");
    }
  });
});
