/**
 * An example agent executor: a scripted loop (no model) that runs shell commands through the
 * platform's approval flow.
 *
 * Each line of the user's input that starts with `$ ` is a command. For each, the agent
 * previews what it is about to do (deltas), emits an `agent.tool_use` with
 * `evaluated_permission: "ask"`, asks the platform for approval under a deterministic approval
 * id (so a restarted executor asking again names the same interaction instead of opening a
 * second one), runs the approved command with the SDK's `bash` runner confined to the workdir,
 * and reports an `agent.tool_result`. A denied (or expired) approval is reported as a failed
 * tool result and the command never runs. The conversation is kept in a file per session, and
 * `executor_session_ref` names that file, so a restarted executor resumes it.
 *
 * Run it against a harness (the brain) with
 *
 *   BMA_HARNESS_URL=ws://127.0.0.1:8080 tsx agent/examples/bash-agent.node.ts ./workdir
 *
 * Node (also Deno and Bun through their Node compatibility): it uses `node:fs` and the
 * executor's machine `bash` runner.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ExecutorClient } from "../../executor/node.ts";
import { BashTimeoutError, runBash } from "../../executor/machine/bash.node.ts";
import { Workdir } from "../../executor/machine/workdir.node.ts";
import type { ContentBlock } from "../../protocol/generated/contract.ts";
import { approvalId } from "../ids.ts";
import { serveAgent } from "../executor/serve.ts";
import type { AgentHandler, Turn } from "../executor/types.ts";

/** Options of {@linkcode createBashAgent}. */
export interface BashAgentOptions {
  /** The directory commands run in (and the conversations are kept under). */
  workdir: string;
  /** How long an approval may stay unanswered before the agent denies it itself. Default 10 min. */
  approvalTimeoutMs?: number;
  /** Output kept per command in the tool result. Default 4,000 characters. */
  maxOutputChars?: number;
}

/** One exchange of a conversation, as the agent keeps it. */
export interface ConversationEntry {
  readonly turn_id: string;
  readonly role: "user" | "agent";
  readonly text: string;
}

/** The scripted agent: an {@linkcode AgentHandler} for `serveAgent`. */
export function createBashAgent(options: BashAgentOptions): AgentHandler {
  const workdir = new Workdir(options.workdir);
  const store = join(options.workdir, ".conversations");
  const conversations = new Map<string, { ref: string; entries: ConversationEntry[] }>();
  const maxChars = options.maxOutputChars ?? 4_000;

  const save = async (ref: string, entries: ConversationEntry[]) => {
    await mkdir(store, { recursive: true });
    await writeFile(join(store, `${ref}.json`), JSON.stringify(entries));
  };

  return {
    async openTurn(turn) {
      // Resume the conversation the harness names, or start one.
      const ref = turn.executorSessionRef ?? `conv_${turn.sessionId.replace(/[^\w-]/g, "_")}`;
      let entries: ConversationEntry[] = [];
      try {
        entries = JSON.parse(await readFile(join(store, `${ref}.json`), "utf8"));
      } catch {
        // A new conversation.
      }
      conversations.set(turn.sessionId, { ref, entries });
      return { executorSessionRef: ref };
    },

    async runTurn(turn) {
      const conversation = conversations.get(turn.sessionId)!;
      const said = textOf(turn.input);
      conversation.entries.push({ turn_id: turn.turnId, role: "user", text: said });
      const commands = said.split("\n").filter((line) => line.startsWith("$ "))
        .map((line) => line.slice(2).trim()).filter((command) => command.length > 0);
      const summary: string[] = [];
      for (const command of commands) {
        if (turn.signal.aborted) break;
        summary.push(await runApproved(turn, command));
      }
      const reply = commands.length === 0
        ? "Nothing to run: start a line with `$ ` to give me a command."
        : summary.join("\n");
      await say(turn, reply);
      conversation.entries.push({ turn_id: turn.turnId, role: "agent", text: reply });
      await save(conversation.ref, conversation.entries);
      return { stop_reason: "end_turn" };
    },

    closeSession(sessionId) {
      conversations.delete(sessionId);
    },
  };

  /** Asks for approval, then runs `command` (or reports the refusal). Returns a summary line. */
  async function runApproved(turn: Turn, command: string): Promise<string> {
    await say(turn, `I will run \`${command}\`.`);
    const toolUseId = turn.eventId();
    await turn.emit({
      type: "agent.tool_use",
      name: "bash",
      input: { command },
      evaluated_permission: "ask",
    }, { eventId: toolUseId });
    const answer = await turn.requestInteraction({
      kind: "permission",
      interaction_id: await approvalId(turn.sessionId, "bash", command),
      tool_use_id: toolUseId,
      title: "Run a command",
      prompt: command,
      options: [
        { id: "allow", label: "Allow" },
        { id: "deny", label: "Deny" },
      ],
      expires_at: new Date(Date.now() + (options.approvalTimeoutMs ?? 600_000)),
    });
    const approved = answer.outcome === "approved" ||
      (answer.outcome === "answered" && answer.answer === "allow");
    if (!approved) {
      const why = answer.message ? `: ${answer.message}` : "";
      await turn.emit({
        type: "agent.tool_result",
        tool_use_id: toolUseId,
        is_error: true,
        content: [{ type: "text", text: `not run (${answer.outcome}${why})` }],
      });
      return `\`${command}\`: not run (${answer.outcome})`;
    }
    let output: string;
    let failed: boolean;
    try {
      const result = await runBash({ command }, { workdir, signal: turn.signal });
      output = (result.stdout + result.stderr).slice(0, maxChars);
      failed = result.exit_code !== 0;
      output += failed ? `\n(exit code ${result.exit_code})` : "";
    } catch (error) {
      if (turn.signal.aborted) throw error;
      output = error instanceof BashTimeoutError ? error.message : "the command could not run";
      failed = true;
    }
    await turn.emit({
      type: "agent.tool_result",
      tool_use_id: toolUseId,
      is_error: failed,
      content: [{ type: "text", text: output }],
    });
    return `\`${command}\`: ${failed ? "failed" : "done"}`;
  }
}

/** Streams `text` as a preview (two deltas), then emits it as a durable message. */
async function say(turn: Turn, text: string): Promise<void> {
  const id = turn.eventId();
  const half = Math.ceil(text.length / 2);
  turn.delta(id, { type: "text_delta", text: text.slice(0, half) });
  turn.delta(id, { type: "text_delta", text: text.slice(half) });
  await turn.emit({ type: "agent.message", content: [{ type: "text", text }] }, { eventId: id });
}

function textOf(blocks: readonly ContentBlock[]): string {
  return blocks.map((block) => (block.type === "text" ? block.text : "")).join("\n");
}

/** Serves the agent against `BMA_HARNESS_URL` until interrupted. */
export async function main(args: string[] = process.argv.slice(2)): Promise<void> {
  const url = process.env.BMA_HARNESS_URL;
  if (!url) throw new Error("set BMA_HARNESS_URL (ws://…, wss://… or unix:///path.sock)");
  const workdir = resolve(args[0] ?? ".");
  const client = new ExecutorClient({
    harnessUrl: url,
    executor: {
      name: "bash-agent-example",
      os: process.platform,
      arch: process.arch,
      version: "0.1.0",
    },
  });
  serveAgent(client, createBashAgent({ workdir }), { maxSessions: 4 });
  await client.start();
  process.once("SIGINT", () => void client.stop({ reason: "interrupted" }));
  await client.closed;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    process.exitCode = 1;
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  });
}
