/**
 * `bma-harness attach`: the real CLI runs on a real PTY (the test holds its master side, through
 * the PTYs this SDK exports: node-pty on Node and Deno, Bun's own on Bun) and a real
 * `bma-executor` serves the remote terminal. The test types as a user would: raw keys reach the
 * remote shell, a resize of the user's window reaches it, Ctrl-] detaches and gives the command
 * line back in cooked mode, and attaching again continues the same terminal.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodePty } from "../../node.ts";
import { bunPty } from "../../bun.ts";
import type { Pty, PtyExit } from "../../node.ts";
import { EXECUTOR_CLI, ROOT, RUNTIME, spawnTs, tsCommand } from "../helpers/runtime-command.ts";

const host = RUNTIME === "bun" ? bunPty : nodePty;

/** The CLI on a PTY: what it printed so far, typing, and waiting for a pattern in new output. */
function onPty(argv: string[], env: Record<string, string>) {
  let text = "";
  let wake: (() => void) | undefined;
  let exited: PtyExit | undefined;
  let resolveExit!: (exit: PtyExit) => void;
  const exit = new Promise<PtyExit>((resolve) => (resolveExit = resolve));
  const decoder = new TextDecoder();
  const pty: Pty = host.spawn({ argv, cwd: ROOT, env, cols: 80, rows: 24 }, {
    data: (bytes) => {
      text += decoder.decode(bytes, { stream: true });
      wake?.();
    },
    exit: (how) => {
      exited = how;
      resolveExit(how);
      wake?.();
    },
  });
  /** Where the next `expect` starts looking. */
  let from = 0;
  return {
    pty,
    exit,
    get text() {
      return text;
    },
    type: (keys: string) => pty.write(new TextEncoder().encode(keys)),
    /** Waits for `pattern` in the output after the last match. */
    async expect(pattern: RegExp): Promise<RegExpExecArray> {
      for (;;) {
        const match = pattern.exec(text.slice(from));
        if (match) {
          from += match.index + match[0].length;
          return match;
        }
        if (exited) {
          throw new Error(`exited before ${pattern}: ${JSON.stringify(text.slice(from))}`);
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

describe(`bma-harness attach on ${RUNTIME}`, { timeout: 90_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-attach-"));
  const children: ChildProcess[] = [];
  const ptys: Pty[] = [];
  after(() => {
    for (const child of children) child.kill("SIGKILL");
    for (const pty of ptys) {
      pty.signal("SIGKILL");
      pty.close();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("attaches the user's terminal to a remote one: raw keys, resize, Ctrl-] and back", {
    timeout: 60_000,
  }, async () => {
    const [command, args] = tsCommand(join(ROOT, "cli/harness.node.ts"), ["--port", "0"]);
    const env = Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
    );
    const cli = onPty([command, ...args], { ...env, TERM: "xterm-256color" });
    ptys.push(cli.pty);
    const [, url] = await cli.expect(/listening (ws:\/\/\S+)/);
    const executor = spawnTs(EXECUTOR_CLI, [
      "--harness",
      url,
      "--workdir",
      dir,
      "--log-level",
      "error",
    ]);
    children.push(executor);
    cli.type("wait 1\r");
    await cli.expect(/ready 1\r\n/);
    cli.type("assign - ses_attach\r");
    await cli.expect(/assigned ses_attach to /);

    cli.type("attach ses_attach bash --norc --noprofile -i\r");
    const [, id] = await cli.expect(/attached (\S+) \(Ctrl-\] detaches\)/);
    // Each line is typed at the remote prompt: bash may drop what is typed while it switches
    // between running a command and reading the next line.
    const prompt = () => cli.expect(/bash-[\d.]+[#$] /);
    await prompt();
    cli.type("tty\r");
    await cli.expect(/\/dev\/pts\/\d+\r+\n/);
    await prompt();

    // The user's window grows: the remote terminal follows (once SIGWINCH got through).
    cli.pty.resize(120, 40);
    for (;;) {
      cli.type("stty size\r");
      const [, size] = await cli.expect(/(\d+ \d+)\r+\n/);
      await prompt();
      if (size === "40 120") break;
    }

    // (The user's terminal keeps ONLCR in Node's raw mode, so "\r\n" from afar shows as "\r\r\n".)
    // Keys go through raw: an interactive read gets the typed line, Ctrl-C reaches the remote.
    cli.type('echo READY; read -r line; echo "got=[$line]"\r');
    await cli.expect(/READY\r+\n/);
    cli.type("typed by hand\r");
    await cli.expect(/got=\[typed by hand\]/);
    await prompt();
    // The marker comes from the foreground job itself: it runs when Ctrl-C is typed.
    cli.type("sh -c 'echo SLEEP$((6*7)); exec sleep 1000'\r");
    await cli.expect(/SLEEP42\r+\n/);
    cli.type("\x03");
    await cli.expect(/\^C/);
    await prompt();
    cli.type("echo still $((20+22))\r");
    await cli.expect(/still 42\r+\n/);
    await prompt();

    // Ctrl-] detaches: the command line is back in cooked mode (Enter ends a line again).
    cli.type("\x1d");
    await cli.expect(new RegExp(`detached ${id} \\(attach ses_attach --id ${id} returns\\)`));
    cli.type("executors\r");
    await cli.expect(/exec_\S+ \S+ bma\.executor\.v1\.1 connected=true sessions=1/);

    // Attaching again continues the same terminal; its exit ends the attachment.
    cli.type(`attach ses_attach --id ${id}\r`);
    await cli.expect(new RegExp(`attached ${id}`));
    cli.type("echo again $((1+2))\r");
    await cli.expect(/again 3\r+\n/);
    cli.type("exit 3\r");
    await cli.expect(new RegExp(`terminal ${id} exited: code 3`));
    cli.type("quit\r");
    assert.equal((await cli.exit).exitCode, 0);
  });
});
