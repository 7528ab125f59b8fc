/**
 * The main job (`npm start`): a local harness in this process, the real `bma-executor` CLI as a
 * child process connected to it through a TCP proxy (so the connection can be cut), and a
 * scripted session that shows the protocol working, printed as a transcript with timings.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentPlatform, Harness } from "../node.ts";
import { ChaosProxy } from "../tests/helpers/chaos-proxy.ts";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));
const started = performance.now();
const stamp = () => `+${String(Math.round(performance.now() - started)).padStart(5)} ms`;
const say = (text: string) => console.log(`${stamp()}  ${text}`);
const step = (title: string) => console.log(`\n${stamp()}  == ${title}`);
const text = (content: { type: string; text?: string }[]) =>
  content.filter((b) => b.type === "text").map((b) => b.text).join("").trim();

function launchExecutor(
  url: string,
  workdir: string,
): { child: ChildProcess; registered: Promise<string> } {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(root, "cli/executor.node.ts"),
      "--harness",
      url,
      "--workdir",
      workdir,
      "--log-level",
      "warn",
      "--name",
      "demo-executor",
    ],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stderr!.on("data", (chunk) => process.stderr.write(`  [executor] ${chunk}`));
  const registered = new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      const match = /registered (\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    child.once(
      "exit",
      (code) => reject(new Error(`bma-executor exited with ${code} before registering`)),
    );
  });
  return { child, registered };
}

async function main(): Promise<void> {
  const workdir = mkdtempSync(join(tmpdir(), "bma-demo-"));
  // The platform's "user": approves `echo` commands, denies the rest.
  const platform = new AgentPlatform({
    onInteraction: ({ type, interaction }) => {
      if (type !== "opened") return;
      const allowed = interaction.prompt?.startsWith("echo ") ?? false;
      say(
        `  approval asked (${interaction.id}): ${interaction.prompt} -> ${
          allowed ? "approved" : "denied"
        }`,
      );
      platform.respond(
        interaction.id,
        allowed ? { outcome: "approved" } : { outcome: "denied", message: "not on the allowlist" },
      );
    },
  });
  const harness = new Harness({
    insecureNoAuth: true,
    heartbeatIntervalMs: 1_000,
    agent: platform,
  });
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  const proxy = await ChaosProxy.start(server.url);
  let executorProcess: ChildProcess | undefined;
  try {
    step("register");
    say(`harness listening on ${server.url}; executor dials it through a proxy at ${proxy.url}`);
    const { child, registered } = launchExecutor(proxy.url, workdir);
    executorProcess = child;
    const id = await registered;
    const executor = await harness.waitExecutor({ filter: (e) => e.id === id });
    say(`executor ${id} registered over ${executor.protocol}`);
    say(`capabilities: ${JSON.stringify(executor.capabilities)}`);

    step("assign a session");
    const session = await executor.assignSession({
      session_id: "ses_demo",
      metadata: { source: "harness" },
    });
    await session.ready();
    say(`session ${session.id} assigned and ready (workdir ${workdir})`);

    step("bash, with progress streamed live");
    const bash = await session.tools.bash.call(
      { command: "for i in 1 2 3 4 5; do echo step $i; sleep 0.1; done; uname -s" },
      {
        onProgress: (p) =>
          p.output && say(`  progress ${p.output.stream}: ${p.output.text.trim()}`),
      },
    );
    say(
      `bash ${bash.outcome}: exit ${bash.structured_content?.exit_code}, stdout ${
        JSON.stringify(bash.structured_content?.stdout)
      }`,
    );

    step("file tools");
    const written = await session.tools.write.call({
      path: "src/hello.ts",
      content: "export const greeting = 'hello';\n// TODO: more\n",
    });
    say(`write: ${written.structured_content?.bytes_written} bytes`);
    await session.tools.edit.call({
      path: "src/hello.ts",
      old_string: "'hello'",
      new_string: "'hello, executor'",
    });
    const read = await session.tools.read.call({ path: "src/hello.ts" });
    say(`edit + read: ${JSON.stringify(read.structured_content?.content.split("\n")[0])}`);
    const glob = await session.tools.glob.call({ pattern: "**/*.ts" });
    say(`glob **/*.ts: ${JSON.stringify(glob.structured_content?.files)}`);
    const grep = await session.tools.grep.call({ pattern: "TODO" });
    say(
      `grep TODO: ${grep.structured_content?.matches.map((m) => `${m.path}:${m.line}`).join(", ")}`,
    );
    const escape = await session.tools.read.call({ path: "../../etc/passwd" });
    say(`read ../../etc/passwd: is_error=${escape.is_error} (${text(escape.content)})`);

    step("cancel");
    const long = session.callTool({
      tool: "bash",
      input: { command: "sleep 30" },
      tool_call_id: "call_cancel",
    });
    await new Promise((r) => setTimeout(r, 300));
    const cancel = await session.cancelTool("call_cancel");
    const canceled = await long;
    say(`tool.cancel canceled=${cancel.canceled}; the call ended ${canceled.outcome}`);

    step("cut the connection while a call is running");
    const pending = session.callTool({
      tool: "bash",
      input: { command: "sleep 1; echo survived the cut" },
      tool_call_id: "call_cut",
    });
    await new Promise((r) => setTimeout(r, 300));
    proxy.cut();
    say("connection cut (both sockets destroyed, no close handshake)");
    const survived = await pending;
    say(
      `after reconnect and resume: ${survived.outcome}, ${JSON.stringify(text(survived.content))}`,
    );

    step("an agent turn with an approval");
    const agentProcess = spawn(process.execPath, [
      "--import",
      "tsx",
      join(root, "agent/examples/bash-agent.node.ts"),
      workdir,
    ], {
      cwd: root,
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, BMA_HARNESS_URL: server.url },
    });
    try {
      const agent = await harness.waitExecutor({
        filter: (e) => e.info.name === "bash-agent-example",
      });
      say(
        `agent executor ${agent.id} registered with capabilities ${
          JSON.stringify(agent.capabilities.agent)
        }`,
      );
      const events = (async () => {
        for await (const item of platform.stream("ses_agent")) {
          if (item.type !== "event") continue;
          const event = item.record.event as {
            type: string;
            content?: { text?: string }[];
            input?: unknown;
          };
          const detail = event.content?.map((c) => c.text ?? "").join("").trim() ??
            (event.input ? JSON.stringify(event.input) : "");
          say(
            `  event ${item.record.sequence} ${event.type}${
              detail ? `: ${JSON.stringify(detail.slice(0, 60))}` : ""
            }`,
          );
          if (event.type === "session.status_idle") break;
        }
      })();
      await agent.startTurn({
        session_id: "ses_agent",
        turn_id: "turn_1",
        input: [{ type: "text", text: "$ echo hello from the agent\n$ rm -rf important" }],
      });
      await events;
      const closed = await agent.closeAgentSession("ses_agent");
      say(`agent session closed: ${JSON.stringify(closed)}`);
    } finally {
      agentProcess.kill("SIGTERM");
    }

    step("stop and drain");
    const end = await session.stop("done");
    say(`session stopped: ${JSON.stringify(end)}`);
    const drained = await executor.drain();
    say(`drain: active_sessions=${JSON.stringify(drained.active_sessions)}`);
    child.kill("SIGTERM");
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    say(`bma-executor exited with ${code} after SIGTERM`);
    if (code !== 0) throw new Error(`bma-executor exited with ${code}`);
    console.log(`\ndone in ${Math.round(performance.now() - started)} ms`);
  } finally {
    executorProcess?.kill("SIGKILL");
    await proxy.close();
    await server.close();
    await harness.close();
    rmSync(workdir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(`start failed: ${error instanceof Error ? error.stack : error}`);
  process.exit(1);
});
